-- Not reversed: the table holds who set which flag when (docs/migrations.md).
DO 0;
