-- Draw drops (additive): a drop's mode and when its entries close; its draw (the secret seed,
-- stored once at creation with its published commitment, then when it was drawn and the
-- winning cutoff); its entries, one row per buyer.
ALTER TABLE limited_drops ADD COLUMN mode TEXT NOT NULL DEFAULT 'FIRST_COME';
ALTER TABLE limited_drops ADD COLUMN entry_close_at TIMESTAMP NULL;
CREATE TABLE drop_draws (
    drop_id INTEGER NOT NULL PRIMARY KEY,
    seed TEXT NOT NULL,
    commitment TEXT NOT NULL,
    entries_closed_at TIMESTAMP NULL,
    drawn_at TIMESTAMP NULL,
    cutoff TEXT NULL
);
-- The seed and its commitment are written once: the database itself refuses to change them.
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE OF seed, commitment ON drop_draws
WHEN NEW.seed <> OLD.seed OR NEW.commitment <> OLD.commitment
BEGIN
    SELECT RAISE(ABORT, 'a draw seed is never changed');
END;
CREATE TABLE draw_entries (
    drop_id INTEGER NOT NULL,
    user_id BIGINT NOT NULL,
    entered_at TIMESTAMP NOT NULL,
    entry_token BIGINT NOT NULL,
    draw_rank INTEGER NULL,
    rank_key TEXT NULL,
    order_id BIGINT NULL,
    promoted BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (drop_id, user_id)
);
CREATE INDEX draw_entries_rank ON draw_entries (drop_id, draw_rank);
-- A waitlisted buyer's position counts the promoted entries ranked before it (few), not the
-- waitlist (many).
CREATE INDEX draw_entries_promoted ON draw_entries (drop_id, promoted, draw_rank);
