-- Expand: products get an owner. Nullable, so the previous release (which does not know the
-- column) keeps inserting products while this release rolls out; this release always writes it.
ALTER TABLE products ADD COLUMN owner_id BIGINT NULL;
