-- Leases (additive): one instance of a fleet at a time runs the background work (healing,
-- reconciliation, expiry of unpaid orders). The row exists from the start; taking the lease is
-- one conditional UPDATE against the database's clock.
CREATE TABLE leases (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    holder VARCHAR(128) NOT NULL,
    expires_at_ms BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
  AS SELECT 'background' AS name, '' AS holder, 0 AS expires_at_ms;
