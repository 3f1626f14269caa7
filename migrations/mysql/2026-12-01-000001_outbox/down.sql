DROP TABLE outbox_events;
