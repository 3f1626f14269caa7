-- See migrations/mysql/2026-12-15-000001_webhook_deliveries.
ALTER TABLE events ADD COLUMN webhooks_at TIMESTAMP NULL;
CREATE INDEX events_webhooks ON events (webhooks_at, id);
CREATE TABLE webhook_deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP NULL,
    last_status_code INTEGER NULL,
    last_error TEXT NULL,
    delivered_at TIMESTAMP NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (endpoint_id, id);
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('webhooks', '', 0);
