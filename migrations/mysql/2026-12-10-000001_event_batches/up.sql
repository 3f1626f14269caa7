-- Each decision's events as one row, written in the decision's transaction: a purchase batch
-- of 64 orders writes one row here instead of 65 into `events` (and their five indexes) while
-- the drop's row is locked. The numbers are taken as before (`limited_drops.event_seq`, under
-- the drop's lock): `first_seq` .. `first_seq + event_count - 1`. Readers of the log move the
-- rows into `events`, one row per event, oldest first, before they read (and the healing pass
-- does so every interval), so every read of `events` sees what it saw before. Additive: the
-- previous release writes `events` directly and never reads this table.
CREATE TABLE event_batches (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    drop_id BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    event_count BIGINT NOT NULL,
    occurred_at DATETIME(6) NOT NULL,
    -- One line an event: type, a tab, subject, a tab, the data's JSON (which has neither).
    events MEDIUMTEXT NOT NULL,
    UNIQUE INDEX event_batches_drop_seq (drop_id, first_seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
