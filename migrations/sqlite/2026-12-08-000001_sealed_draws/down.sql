DELETE FROM leases WHERE name = 'draws';
ALTER TABLE draw_entries DROP COLUMN void_reason;
ALTER TABLE draw_entries DROP COLUMN promoted_at;
CREATE TABLE drop_draws_clear (
    drop_id INTEGER NOT NULL PRIMARY KEY,
    seed TEXT NOT NULL,
    commitment TEXT NOT NULL,
    entries_closed_at TIMESTAMP NULL,
    drawn_at TIMESTAMP NULL,
    cutoff TEXT NULL
);
INSERT INTO drop_draws_clear SELECT drop_id, COALESCE(seed, ''), commitment, entries_closed_at, drawn_at, cutoff FROM drop_draws;
DROP TABLE drop_draws;
ALTER TABLE drop_draws_clear RENAME TO drop_draws;
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE OF seed, commitment ON drop_draws
WHEN NEW.seed <> OLD.seed OR NEW.commitment <> OLD.commitment
BEGIN
    SELECT RAISE(ABORT, 'a draw seed is never changed');
END;
