ALTER TABLE orders DROP COLUMN amount_minor, DROP COLUMN currency;
