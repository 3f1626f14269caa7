-- Order lifecycle (additive, one statement): an order can be paid (when, with which payment
-- reference, under which idempotency key) or expire unpaid. The status check gains EXPIRED; the
-- indexes serve the expiry pass (PENDING orders by age) and a buyer's newest-first listing.
-- The previous release never writes the new columns and never reads EXPIRED rows' new state: it
-- counts an EXPIRED order as sold (its check was "not CANCELLED"), so run expiry (this release)
-- only once the rollout has finished; its instances do so by themselves.
ALTER TABLE orders
    ADD COLUMN paid_at DATETIME(6) NULL,
    ADD COLUMN payment_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN payment_reference VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    DROP CONSTRAINT orders_status,
    ADD CONSTRAINT orders_status CHECK (status IN ('PENDING', 'PAID', 'CANCELLED', 'EXPIRED')),
    ADD INDEX orders_status_created (status, created_at),
    ADD INDEX orders_user_id (user_id, id);
