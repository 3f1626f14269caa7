-- Not reversed: the tables and the column hold the sizes, their units and the orders' sizes
-- written since. Roll the code back and leave them; the previous release ignores them
-- (docs/migrations.md).
SELECT 1;
