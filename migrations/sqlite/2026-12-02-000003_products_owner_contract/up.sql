-- Contract: SQLite cannot add NOT NULL to an existing column without rebuilding a table that
-- others reference, so triggers refuse a missing owner instead, and the index is added.
CREATE INDEX products_owner_id ON products (owner_id);
CREATE TRIGGER products_owner_required_insert BEFORE INSERT ON products
    WHEN NEW.owner_id IS NULL BEGIN SELECT RAISE(ABORT, 'products.owner_id is required'); END;
CREATE TRIGGER products_owner_required_update BEFORE UPDATE OF owner_id ON products
    WHEN NEW.owner_id IS NULL BEGIN SELECT RAISE(ABORT, 'products.owner_id is required'); END;
