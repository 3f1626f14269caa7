-- See migrations/mysql: each decision's events as one row, moved into `events` before reads.
CREATE TABLE event_batches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    drop_id BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    event_count BIGINT NOT NULL,
    occurred_at TIMESTAMP NOT NULL,
    events TEXT NOT NULL,
    UNIQUE (drop_id, first_seq)
);
