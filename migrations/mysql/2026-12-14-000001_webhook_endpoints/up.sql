-- Expand: sellers' webhook endpoints. New tables only, which the previous release never reads.
-- `types` lists the event types the endpoint takes, space-separated; the secrets are sealed
-- under the service's seal key (DRAW_SEAL_KEY), bound to the endpoint's id, and never stored in
-- the clear. `previous_*` is the secret before the last rotation, which signs beside the new
-- one until `previous_until`. `failing_since`: the first failure after the last success. The
-- secret columns are NULL only inside the creating transaction, between the insert that numbers
-- the endpoint and the update that writes its sealed secret.
CREATE TABLE webhook_endpoints (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    seller_id BIGINT NOT NULL,
    url VARCHAR(2048) NOT NULL,
    types VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    description VARCHAR(256) NULL,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    secret_sealed VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    secret_key_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    previous_sealed VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    previous_key_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    previous_until DATETIME(6) NULL,
    failing_since DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL,
    INDEX webhook_endpoints_seller (seller_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- How many endpoints each seller has: the row a creation takes with a conditional update
-- (`endpoints < WEBHOOK_MAX_ENDPOINTS`), so racing creations of one seller count one after the
-- other; a deletion gives its place back in the same transaction.
CREATE TABLE webhook_sellers (
    seller_id BIGINT NOT NULL PRIMARY KEY,
    endpoints INT NOT NULL,
    CONSTRAINT webhook_sellers_endpoints CHECK (endpoints >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
