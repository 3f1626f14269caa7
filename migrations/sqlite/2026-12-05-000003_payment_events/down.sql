DROP TABLE payment_events;
