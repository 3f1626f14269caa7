-- Additive (expand only): a drop can be paused, and closed before its closeAt. The previous
-- release ignores both columns (it neither pauses nor closes), so it keeps serving meanwhile.
ALTER TABLE limited_drops
    ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN closed_at DATETIME(6) NULL;
