-- The payment provider's events (additive): each event id is applied once, with the outcome it
-- had. No foreign key to orders: an event for an unknown order is recorded too.
CREATE TABLE payment_events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind VARCHAR(32) NOT NULL,
    order_id BIGINT NOT NULL,
    amount_minor BIGINT NOT NULL,
    currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payment_reference VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    outcome VARCHAR(32) NOT NULL,
    received_at DATETIME(6) NOT NULL,
    UNIQUE INDEX payment_events_event_id (event_id),
    INDEX payment_events_outcome (outcome, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
