-- Payment windows per drop, and each order's stored deadline (NULL for orders from before).
ALTER TABLE limited_drops ADD COLUMN payment_window_s INTEGER NULL;
ALTER TABLE orders ADD COLUMN expires_at TIMESTAMP NULL;
CREATE INDEX orders_status_expires ON orders (status, expires_at);
