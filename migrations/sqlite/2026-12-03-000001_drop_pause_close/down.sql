-- Not reversed: the columns hold which drops were paused or closed (docs/migrations.md).
SELECT 1;
