-- Payment windows per drop (additive): a drop may give its orders a window of its own
-- (`paymentWindowSeconds`; NULL: the service's PAYMENT_WINDOW_S), and every order made from now
-- on stores its deadline. Orders made before, or by the previous release while this one rolls
-- out, have none: their window is the service's default, as before.
ALTER TABLE limited_drops ADD COLUMN payment_window_s INT NULL;
ALTER TABLE orders
    ADD COLUMN expires_at DATETIME(6) NULL,
    ADD INDEX orders_status_expires (status, expires_at);
