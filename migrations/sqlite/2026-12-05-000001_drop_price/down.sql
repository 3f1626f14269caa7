ALTER TABLE limited_drops DROP COLUMN price_minor;
ALTER TABLE limited_drops DROP COLUMN currency;
