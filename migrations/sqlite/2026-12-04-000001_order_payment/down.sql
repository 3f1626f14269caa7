-- Not reversed: the columns hold payments, and EXPIRED rows would break the old check
-- (docs/migrations.md).
SELECT 1;
