-- What an order costs, fixed at purchase; older orders cost nothing, in 'XXX'.
ALTER TABLE orders ADD COLUMN amount_minor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN currency TEXT NOT NULL DEFAULT 'XXX';
