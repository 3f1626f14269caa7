-- The event log (a transactional outbox): every decision another system needs, written in the
-- decision's own transaction. A drop's events are numbered 1, 2, 3, ... by `event_seq`, bumped
-- on the drop's row under its lock, so the numbers follow commit order with no gaps. Additive:
-- the previous release neither reads nor writes them (its decisions have no events).
ALTER TABLE limited_drops ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
CREATE TABLE events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    drop_id BIGINT NULL,
    dropseq BIGINT NULL,
    type VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subject VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    occurred_at DATETIME(6) NOT NULL,
    data TEXT NOT NULL,
    published_at DATETIME(6) NULL,
    UNIQUE INDEX events_event_id (event_id),
    UNIQUE INDEX events_drop_seq (drop_id, dropseq),
    INDEX events_unpublished (published_at, drop_id, dropseq),
    INDEX events_type (type, id),
    INDEX events_occurred (occurred_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
-- The relay to the broker runs under this lease, one instance of the fleet at a time.
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('events', '', 0);
