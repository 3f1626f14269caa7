DELETE FROM leases WHERE name = 'events';
DROP TABLE events;
ALTER TABLE limited_drops DROP COLUMN event_seq;
