-- The embedded source of truth. Same shapes as migrations/mysql; CHECK constraints repeat the
-- invariants the conditional updates keep, as a last line of defence. Like the MySQL schema, no
-- foreign key points at limited_drops (see migrations/mysql for why).
CREATE TABLE products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL
);

CREATE TABLE stocks (
    product_id INTEGER PRIMARY KEY REFERENCES products (id),
    quantity INTEGER NOT NULL CHECK (quantity >= 0),
    version INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE limited_drops (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL REFERENCES products (id),
    open_at TIMESTAMP NOT NULL,
    close_at TIMESTAMP NOT NULL,
    limited_quantity INTEGER NOT NULL CHECK (limited_quantity > 0),
    per_user_limit INTEGER NOT NULL CHECK (per_user_limit > 0 AND per_user_limit <= limited_quantity),
    sold_quantity INTEGER NOT NULL DEFAULT 0 CHECK (sold_quantity >= 0 AND sold_quantity <= limited_quantity),
    CHECK (open_at < close_at)
);
CREATE INDEX limited_drops_product_id ON limited_drops (product_id);
CREATE INDEX limited_drops_open_at ON limited_drops (open_at);

CREATE TABLE drop_holdings (
    drop_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity >= 0),
    PRIMARY KEY (drop_id, user_id)
);

CREATE TABLE orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    drop_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products (id),
    user_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'PAID', 'CANCELLED')),
    idempotency_key TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (user_id, idempotency_key)
);
CREATE INDEX orders_drop_id ON orders (drop_id);
