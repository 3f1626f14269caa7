ALTER TABLE limited_drops DROP COLUMN price_minor, DROP COLUMN currency;
