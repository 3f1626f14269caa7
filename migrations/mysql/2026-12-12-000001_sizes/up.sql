-- Expand: sizes (variants). Two new tables and a nullable column, so the previous release,
-- which reads none of them, keeps serving products and drops without sizes on this schema.
-- A product without variants has no product_variants row and a drop without sizes no
-- drop_variants row: their stock and units stay in stocks and limited_drops, as before.
-- Skus compare byte for byte (ascii_bin): 'US-9' and 'us-9' are two sizes, as the domain says.
--
-- A product sold in variants keeps each variant's units here and their sum in stocks.quantity,
-- changed together in one transaction; `position` is the order its seller listed them in.
CREATE TABLE product_variants (
    product_id BIGINT NOT NULL,
    sku VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    position SMALLINT NOT NULL,
    label VARCHAR(64) NOT NULL,
    stock INT NOT NULL,
    PRIMARY KEY (product_id, sku),
    CONSTRAINT product_variants_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT product_variants_position UNIQUE (product_id, position),
    CONSTRAINT product_variants_stock_non_negative CHECK (stock >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- A drop sold in sizes: each size's limited and sold units, kept by the purchase transaction's
-- conditional updates as limited_drops keeps the drop's totals (which stay their sums). No
-- foreign key to limited_drops (see 2026-11-30-000001_create_goods).
CREATE TABLE drop_variants (
    drop_id BIGINT NOT NULL,
    sku VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    position SMALLINT NOT NULL,
    limited_quantity INT NOT NULL,
    sold_quantity INT NOT NULL DEFAULT 0,
    PRIMARY KEY (drop_id, sku),
    CONSTRAINT drop_variants_position UNIQUE (drop_id, position),
    CONSTRAINT drop_variants_quantity CHECK (limited_quantity > 0),
    CONSTRAINT drop_variants_sold CHECK (sold_quantity >= 0 AND sold_quantity <= limited_quantity)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- The size an order bought; NULL for an order of a drop without sizes (every order of the
-- previous release).
ALTER TABLE orders ADD COLUMN sku VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL;
