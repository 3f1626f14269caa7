-- Backfill: products created before ownership existed belong to no seller (owner 0); only
-- admins manage them until an operator assigns them (docs/migrations.md).
UPDATE products SET owner_id = 0 WHERE owner_id IS NULL;
