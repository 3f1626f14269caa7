-- See migrations/mysql: events written once per key, relayed and marked published.
CREATE TABLE outbox_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    published_at TIMESTAMP NULL
);
CREATE INDEX outbox_events_unpublished ON outbox_events (published_at, id);
