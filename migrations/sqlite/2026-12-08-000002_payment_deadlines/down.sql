DROP INDEX orders_status_expires;
ALTER TABLE orders DROP COLUMN expires_at;
ALTER TABLE limited_drops DROP COLUMN payment_window_s;
