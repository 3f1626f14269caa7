-- Prices (additive, one statement, instant on InnoDB): a drop's unit price in the currency's
-- minor units. Drops of the previous release are free, in no currency ('XXX', ISO 4217). The
-- range (0 to 10^12) is checked by the domain on creation.
ALTER TABLE limited_drops
    ADD COLUMN price_minor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'XXX';
