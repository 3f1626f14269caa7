-- Runtime feature flags (additive). A flag without a row is at its default (on).
CREATE TABLE feature_flags (
    name VARCHAR(64) CHARACTER SET ascii NOT NULL PRIMARY KEY,
    enabled BOOLEAN NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    updated_by BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
