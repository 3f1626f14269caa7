-- Prices: a drop's unit price in the currency's minor units; older drops are free, in 'XXX'.
ALTER TABLE limited_drops ADD COLUMN price_minor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE limited_drops ADD COLUMN currency TEXT NOT NULL DEFAULT 'XXX';
