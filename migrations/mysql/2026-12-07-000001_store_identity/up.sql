-- The database's identity: a random id written once, when this migration runs. The gate's Redis
-- keys carry it, so a database that is reset or restored (drop ids start again), or another
-- database sharing the Redis and its prefix, never meets the keys of a drop that is not its own.
CREATE TABLE store_identity (
    id TINYINT NOT NULL PRIMARY KEY CHECK (id = 1),
    identity CHAR(32) NOT NULL
);
INSERT INTO store_identity (id, identity) VALUES (1, REPLACE(UUID(), '-', ''));
