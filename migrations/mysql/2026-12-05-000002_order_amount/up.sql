-- What an order costs, fixed at purchase (additive, one statement, instant on InnoDB). Orders of
-- the previous release cost nothing, in no currency; the previous release never writes these
-- columns, so its orders during a rollout get the defaults.
ALTER TABLE orders
    ADD COLUMN amount_minor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'XXX';
