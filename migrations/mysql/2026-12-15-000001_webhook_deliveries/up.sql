-- Expand: webhook deliveries. `events.webhooks_at` marks an event whose deliveries were made
-- (NULL: not yet; the previous release never names the column, so its events wait for the
-- fan-out like this release's). A delivery is one event for one endpoint, with the event's
-- CloudEvent JSON as it is sent (so pruning the log loses no pending delivery), its state and
-- its attempts. Deleting an endpoint deletes its deliveries in the same transaction.
ALTER TABLE events ADD COLUMN webhooks_at DATETIME(6) NULL, ADD INDEX events_webhooks (webhooks_at, id);
CREATE TABLE webhook_deliveries (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    endpoint_id BIGINT NOT NULL,
    event_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_type VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    body MEDIUMTEXT NOT NULL,
    status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts INT NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(6) NULL,
    last_status_code INT NULL,
    last_error VARCHAR(255) NULL,
    delivered_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL,
    UNIQUE INDEX webhook_deliveries_once (endpoint_id, event_id),
    INDEX webhook_deliveries_due (status, next_attempt_at),
    INDEX webhook_deliveries_list (endpoint_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
-- The deliveries are made under this lease, one instance of the fleet at a time.
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('webhooks', '', 0);
