ALTER TABLE orders DROP COLUMN amount_minor;
ALTER TABLE orders DROP COLUMN currency;
