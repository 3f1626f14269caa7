-- Order lifecycle: an order can be paid (when, with which payment reference, under which
-- idempotency key) or expire unpaid. SQLite cannot change a CHECK constraint in place, so the
-- table is rebuilt with the same rows (the embedded server is alone on its file and migrates
-- at start, before it serves). Nothing references orders.
CREATE TABLE orders_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    drop_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products (id),
    user_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'PAID', 'CANCELLED', 'EXPIRED')),
    idempotency_key TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    paid_at TIMESTAMP NULL,
    payment_key TEXT NULL,
    payment_reference TEXT NULL,
    UNIQUE (user_id, idempotency_key)
);
INSERT INTO orders_new (id, drop_id, product_id, user_id, quantity, status, idempotency_key, created_at)
    SELECT id, drop_id, product_id, user_id, quantity, status, idempotency_key, created_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE INDEX orders_drop_id ON orders (drop_id);
CREATE INDEX orders_status_created ON orders (status, created_at);
CREATE INDEX orders_user_id ON orders (user_id, id);
