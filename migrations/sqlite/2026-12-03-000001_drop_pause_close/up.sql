-- Additive (expand only): a drop can be paused, and closed before its closeAt.
ALTER TABLE limited_drops ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE limited_drops ADD COLUMN closed_at TIMESTAMP NULL;
