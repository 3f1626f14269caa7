-- A backfill is not undone: the owners it wrote are indistinguishable from no owner only by
-- the value 0, which stays valid for the expanded column.
DO 0;
