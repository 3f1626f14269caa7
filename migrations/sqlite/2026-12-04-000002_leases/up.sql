-- Leases (additive): one instance at a time runs the background work. The row exists from the
-- start; taking the lease is one conditional UPDATE against the database's clock.
CREATE TABLE leases (
    name TEXT NOT NULL PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
INSERT INTO leases (name, holder, expires_at_ms) VALUES ('background', '', 0);
