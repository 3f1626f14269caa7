DROP TABLE store_identity;
