DROP TABLE draw_entries;
DROP TABLE drop_draws;
ALTER TABLE limited_drops DROP COLUMN entry_close_at, DROP COLUMN mode;
