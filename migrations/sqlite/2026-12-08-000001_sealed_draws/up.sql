-- A draw anyone can trust: the seed sealed until the reveal, the entry set's root, the
-- draw's counts kept as they change (backfilled), promotions' times and voided entries.
-- SQLite cannot make a column nullable in place: the draws' table is rebuilt.
CREATE TABLE drop_draws_sealed (
    drop_id INTEGER NOT NULL PRIMARY KEY,
    seed TEXT NULL,
    sealed_seed TEXT NULL,
    seal_key_id TEXT NULL,
    commitment TEXT NOT NULL,
    entries_closed_at TIMESTAMP NULL,
    entries_root TEXT NULL,
    drawn_at TIMESTAMP NULL,
    cutoff TEXT NULL,
    entry_count INTEGER NOT NULL DEFAULT 0,
    winner_count INTEGER NOT NULL DEFAULT 0,
    promoted_count INTEGER NOT NULL DEFAULT 0,
    voided_count INTEGER NOT NULL DEFAULT 0
);
INSERT INTO drop_draws_sealed
    (drop_id, seed, commitment, entries_closed_at, drawn_at, cutoff, entry_count, winner_count, promoted_count)
SELECT d.drop_id, d.seed, d.commitment, d.entries_closed_at, d.drawn_at, d.cutoff,
    (SELECT COUNT(*) FROM draw_entries e WHERE e.drop_id = d.drop_id),
    (SELECT COUNT(e.order_id) FROM draw_entries e WHERE e.drop_id = d.drop_id),
    (SELECT COUNT(*) FROM draw_entries e WHERE e.drop_id = d.drop_id AND e.promoted)
FROM drop_draws d;
DROP TABLE drop_draws;
ALTER TABLE drop_draws_sealed RENAME TO drop_draws;
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE OF seed, sealed_seed, seal_key_id, commitment ON drop_draws
WHEN (OLD.seed IS NOT NULL AND NEW.seed IS NOT OLD.seed)
    OR NEW.sealed_seed IS NOT OLD.sealed_seed
    OR NEW.seal_key_id IS NOT OLD.seal_key_id
    OR NEW.commitment <> OLD.commitment
BEGIN
    SELECT RAISE(ABORT, 'a draw seed is never changed');
END;
ALTER TABLE draw_entries ADD COLUMN promoted_at TIMESTAMP NULL;
ALTER TABLE draw_entries ADD COLUMN void_reason TEXT NULL;
-- The draws' schedule has a lease of its own, apart from the healing pass's.
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('draws', '', 0);
