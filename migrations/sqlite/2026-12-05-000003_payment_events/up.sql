-- The payment provider's events: each event id is applied once, with the outcome it had.
CREATE TABLE payment_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    order_id INTEGER NOT NULL,
    amount_minor BIGINT NOT NULL,
    currency TEXT NOT NULL,
    payment_reference TEXT NOT NULL,
    outcome TEXT NOT NULL,
    received_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_events_outcome ON payment_events (outcome, id);
