-- Not reversed: the table and the column hold the deliveries and which events were fanned out.
-- Roll the code back and leave them; the previous release ignores them (docs/migrations.md).
DO 0;
