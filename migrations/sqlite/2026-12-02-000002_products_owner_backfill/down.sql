-- A backfill is not undone.
SELECT 1;
