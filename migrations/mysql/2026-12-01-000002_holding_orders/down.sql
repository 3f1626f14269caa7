ALTER TABLE drop_holdings DROP COLUMN orders_placed;
