-- Contract: once every row has an owner and no release writes products without one.
ALTER TABLE products MODIFY owner_id BIGINT NOT NULL, ADD INDEX products_owner_id (owner_id);
