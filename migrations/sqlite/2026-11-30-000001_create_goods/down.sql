DROP TABLE orders;
DROP TABLE drop_holdings;
DROP TABLE limited_drops;
DROP TABLE stocks;
DROP TABLE products;
