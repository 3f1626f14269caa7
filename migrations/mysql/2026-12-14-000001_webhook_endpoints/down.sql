-- Not reversed: the tables hold the sellers' endpoints and their sealed secrets. Roll the code
-- back and leave it; the previous release ignores it (docs/migrations.md).
DO 0;
