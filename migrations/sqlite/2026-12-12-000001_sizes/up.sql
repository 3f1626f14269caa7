-- Expand: sizes (variants), as migrations/mysql/2026-12-12-000001_sizes. A product without
-- variants has no product_variants row and a drop without sizes no drop_variants row. Skus
-- compare byte for byte (SQLite's BINARY collation).
CREATE TABLE product_variants (
    product_id INTEGER NOT NULL REFERENCES products (id),
    sku TEXT NOT NULL,
    position INTEGER NOT NULL,
    label TEXT NOT NULL,
    stock INTEGER NOT NULL CHECK (stock >= 0),
    PRIMARY KEY (product_id, sku),
    UNIQUE (product_id, position)
);

CREATE TABLE drop_variants (
    drop_id INTEGER NOT NULL,
    sku TEXT NOT NULL,
    position INTEGER NOT NULL,
    limited_quantity INTEGER NOT NULL CHECK (limited_quantity > 0),
    sold_quantity INTEGER NOT NULL DEFAULT 0 CHECK (sold_quantity >= 0 AND sold_quantity <= limited_quantity),
    PRIMARY KEY (drop_id, sku),
    UNIQUE (drop_id, position)
);

ALTER TABLE orders ADD COLUMN sku TEXT NULL;
