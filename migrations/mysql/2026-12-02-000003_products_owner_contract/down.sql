ALTER TABLE products DROP INDEX products_owner_id, MODIFY owner_id BIGINT NULL;
