DELETE FROM leases WHERE name = 'draws';
DROP TRIGGER drop_draws_seed_is_written_once;
ALTER TABLE draw_entries DROP COLUMN void_reason, DROP COLUMN promoted_at;
ALTER TABLE drop_draws
    DROP COLUMN voided_count, DROP COLUMN promoted_count, DROP COLUMN winner_count,
    DROP COLUMN entry_count, DROP COLUMN entries_root, DROP COLUMN seal_key_id,
    DROP COLUMN sealed_seed;
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE ON drop_draws FOR EACH ROW
BEGIN
    IF NEW.seed <> OLD.seed OR NEW.commitment <> OLD.commitment THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'a draw seed is never changed';
    END IF;
END;
