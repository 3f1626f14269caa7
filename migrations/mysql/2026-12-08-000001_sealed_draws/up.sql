-- A draw anyone can trust (additive for the previous release's FIRST_COME drops):
-- * the seed is kept sealed (AEAD under DRAW_SEAL_KEY, the key's id beside it) until the
--   reveal, when `seed` is written in the clear; draws made before keep their clear seed;
-- * the entry set's Merkle root, published when entries close, before the reveal;
-- * the draw's counts, kept as entries, awards and refusals are written, so no view recounts
--   the entries (backfilled here from the entries);
-- * when a promotion gave an entry its order, and why an award was refused (a voided entry).
ALTER TABLE drop_draws
    MODIFY seed CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN sealed_seed VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN seal_key_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN entries_root CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN entry_count INT NOT NULL DEFAULT 0,
    ADD COLUMN winner_count INT NOT NULL DEFAULT 0,
    ADD COLUMN promoted_count INT NOT NULL DEFAULT 0,
    ADD COLUMN voided_count INT NOT NULL DEFAULT 0;
UPDATE drop_draws d SET
    entry_count = (SELECT COUNT(*) FROM draw_entries e WHERE e.drop_id = d.drop_id),
    winner_count = (SELECT COUNT(e.order_id) FROM draw_entries e WHERE e.drop_id = d.drop_id),
    promoted_count = (SELECT COUNT(*) FROM draw_entries e WHERE e.drop_id = d.drop_id AND e.promoted);
ALTER TABLE draw_entries
    ADD COLUMN promoted_at DATETIME(6) NULL,
    ADD COLUMN void_reason VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL;
-- The seed, sealed or clear, and the commitment are written once; the clear seed may be
-- written once more, at the reveal, when it was sealed.
DROP TRIGGER drop_draws_seed_is_written_once;
CREATE TRIGGER drop_draws_seed_is_written_once BEFORE UPDATE ON drop_draws FOR EACH ROW
BEGIN
    IF (OLD.seed IS NOT NULL AND NOT (NEW.seed <=> OLD.seed))
        OR NOT (NEW.sealed_seed <=> OLD.sealed_seed)
        OR NOT (NEW.seal_key_id <=> OLD.seal_key_id)
        OR NEW.commitment <> OLD.commitment THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'a draw seed is never changed';
    END IF;
END;
-- The draws' schedule has a lease of its own, apart from the healing pass's.
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('draws', '', 0);
