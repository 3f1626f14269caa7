-- Not reversed: the columns hold the entries' sizes and each size's draw written since. Roll
-- the code back and leave them; the previous release ignores them (docs/migrations.md).
SELECT 1;
