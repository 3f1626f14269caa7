-- Expand: products get an owner. Nullable, so the previous release keeps inserting products
-- while this release rolls out; this release always writes it.
ALTER TABLE products ADD COLUMN owner_id BIGINT NULL;
