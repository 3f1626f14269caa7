-- Events that must survive a lost log line (the oversell alert), written once per key by
-- whichever instance sees them first, then handed to the event publisher by a relay that marks
-- them published. Additive: the previous release neither reads nor writes it.
CREATE TABLE outbox_events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_key VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind VARCHAR(32) NOT NULL,
    payload TEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    published_at DATETIME(6) NULL,
    UNIQUE INDEX outbox_events_key (event_key),
    INDEX outbox_events_unpublished (published_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
