DROP TABLE event_batches;
