-- Expand: sellers' webhook endpoints, as migrations/mysql/2026-12-14-000001_webhook_endpoints.
CREATE TABLE webhook_endpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seller_id BIGINT NOT NULL,
    url TEXT NOT NULL,
    types TEXT NOT NULL,
    description TEXT NULL,
    enabled BOOLEAN NOT NULL DEFAULT 1,
    secret_sealed TEXT NULL,
    secret_key_id TEXT NULL,
    previous_sealed TEXT NULL,
    previous_key_id TEXT NULL,
    previous_until TIMESTAMP NULL,
    failing_since TIMESTAMP NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX webhook_endpoints_seller ON webhook_endpoints (seller_id, id);

CREATE TABLE webhook_sellers (
    seller_id BIGINT NOT NULL PRIMARY KEY,
    endpoints INTEGER NOT NULL CHECK (endpoints >= 0)
);
