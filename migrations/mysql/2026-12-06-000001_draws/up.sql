-- Draw drops (additive): a drop's mode and when its entries close; its draw (the secret seed,
-- stored once at creation with its published commitment, then when it was drawn and the
-- winning cutoff); its entries, one row per buyer (no hot row: entries never update a shared
-- row). The previous release ignores all of it and keeps serving FIRST_COME drops meanwhile.
ALTER TABLE limited_drops
    ADD COLUMN mode VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'FIRST_COME',
    ADD COLUMN entry_close_at DATETIME(6) NULL;
CREATE TABLE drop_draws (
    drop_id BIGINT NOT NULL PRIMARY KEY,
    seed CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    commitment CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    entries_closed_at DATETIME(6) NULL,
    drawn_at DATETIME(6) NULL,
    cutoff CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL
) ENGINE = InnoDB;
-- The seed and its commitment are written once: the database itself refuses to change them,
-- whatever a process sends.
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE ON drop_draws FOR EACH ROW
BEGIN
    IF NEW.seed <> OLD.seed OR NEW.commitment <> OLD.commitment THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'a draw seed is never changed';
    END IF;
END;
CREATE TABLE draw_entries (
    drop_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    entered_at DATETIME(6) NOT NULL,
    -- The random token of the batch that wrote the row: how a batch tells the entries it
    -- created from those that were there.
    entry_token BIGINT NOT NULL,
    draw_rank INT NULL,
    rank_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    order_id BIGINT NULL,
    promoted BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (drop_id, user_id),
    INDEX draw_entries_rank (drop_id, draw_rank),
    -- A waitlisted buyer's position counts the promoted entries ranked before it (few), not
    -- the waitlist (many).
    INDEX draw_entries_promoted (drop_id, promoted, draw_rank)
) ENGINE = InnoDB;
