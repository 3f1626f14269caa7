-- Not reversed: dropping the column would lose the owners written since. Roll the code back and
-- leave the column; the previous release ignores it (docs/migrations.md).
SELECT 1;
