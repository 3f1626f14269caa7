-- Backfill: products created before ownership existed belong to no seller (owner 0, which no
-- user id can be: user ids are positive); only admins manage them until an operator assigns
-- them (docs/migrations.md). Run after every instance writes owner_id.
UPDATE products SET owner_id = 0 WHERE owner_id IS NULL;
