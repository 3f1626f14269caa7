-- Runtime feature flags (additive). A flag without a row is at its default (on).
CREATE TABLE feature_flags (
    name TEXT NOT NULL PRIMARY KEY,
    enabled BOOLEAN NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    updated_by BIGINT NOT NULL
);
