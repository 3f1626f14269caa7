-- See migrations/mysql: the event log, each drop's events numbered by limited_drops.event_seq.
ALTER TABLE limited_drops ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    drop_id BIGINT NULL,
    dropseq BIGINT NULL,
    type TEXT NOT NULL,
    subject TEXT NOT NULL,
    occurred_at TIMESTAMP NOT NULL,
    data TEXT NOT NULL,
    published_at TIMESTAMP NULL,
    UNIQUE (drop_id, dropseq)
);
CREATE INDEX events_unpublished ON events (published_at, drop_id, dropseq);
CREATE INDEX events_type ON events (type, id);
CREATE INDEX events_occurred ON events (occurred_at, id);
-- The relay to the broker runs under this lease, one instance of the fleet at a time.
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('events', '', 0);
