-- Schema only: the table holds nothing but who runs the background work now.
DROP TABLE leases;
