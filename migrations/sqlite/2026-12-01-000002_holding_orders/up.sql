-- How many orders the buyer has placed in the drop, cancelled ones included: it caps cancel-and-rebuy
-- cycles (perUserLimit + 10). Additive; existing holdings start at 0.
ALTER TABLE drop_holdings ADD COLUMN orders_placed INT NOT NULL DEFAULT 0;
