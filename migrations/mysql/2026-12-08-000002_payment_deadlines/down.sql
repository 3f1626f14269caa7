ALTER TABLE orders DROP INDEX orders_status_expires, DROP COLUMN expires_at;
ALTER TABLE limited_drops DROP COLUMN payment_window_s;
