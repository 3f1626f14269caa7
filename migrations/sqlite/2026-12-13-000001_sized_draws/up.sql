-- Expand: draw drops in sizes, as migrations/mysql/2026-12-13-000001_sized_draws.
ALTER TABLE draw_entries ADD COLUMN sku TEXT NULL;
CREATE INDEX draw_entries_size_rank ON draw_entries (drop_id, sku, draw_rank);
ALTER TABLE drop_variants ADD COLUMN draw_winners INTEGER NOT NULL DEFAULT 0;
ALTER TABLE drop_variants ADD COLUMN draw_voided INTEGER NOT NULL DEFAULT 0;
ALTER TABLE drop_variants ADD COLUMN draw_cutoff TEXT NULL;
