-- Expand: draw drops in sizes. An entry names its size (NULL in a drop without sizes, and for
-- every entry of the previous release); each size is ranked, awarded and waitlisted on its own,
-- so its waiting entries are read by (drop, size, rank). A size's draw keeps its winners,
-- refusals and cutoff beside its units in drop_variants, written with the awards, refusals and
-- the draw's end; a drop without sizes keeps them in drop_draws, as before.
ALTER TABLE draw_entries
    ADD COLUMN sku VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD INDEX draw_entries_size_rank (drop_id, sku, draw_rank);
ALTER TABLE drop_variants
    ADD COLUMN draw_winners INT NOT NULL DEFAULT 0,
    ADD COLUMN draw_voided INT NOT NULL DEFAULT 0,
    ADD COLUMN draw_cutoff CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL;
