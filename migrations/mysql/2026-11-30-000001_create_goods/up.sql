-- The production source of truth (MySQL 8 / MariaDB 10.11, InnoDB, utf8mb4).
-- CHECK constraints repeat the invariants that the purchase transaction's conditional updates
-- keep; they are a last line of defence, never the mechanism.
-- No foreign key points at limited_drops: InnoDB checks one by taking a shared lock on the
-- parent row, and a purchase later takes that hot row exclusively, so concurrent purchases
-- would deadlock on the upgrade. Drops are never deleted; orders and holdings are only written
-- by the purchase transaction, which names an existing drop.
CREATE TABLE products (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(200) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE stocks (
    product_id BIGINT NOT NULL PRIMARY KEY,
    quantity INT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT stocks_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT stocks_quantity_non_negative CHECK (quantity >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE limited_drops (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id BIGINT NOT NULL,
    open_at DATETIME(6) NOT NULL,
    close_at DATETIME(6) NOT NULL,
    limited_quantity INT NOT NULL,
    per_user_limit INT NOT NULL,
    sold_quantity INT NOT NULL DEFAULT 0,
    CONSTRAINT limited_drops_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT limited_drops_window CHECK (open_at < close_at),
    CONSTRAINT limited_drops_quantity CHECK (limited_quantity > 0),
    CONSTRAINT limited_drops_per_user CHECK (per_user_limit > 0 AND per_user_limit <= limited_quantity),
    CONSTRAINT limited_drops_sold CHECK (sold_quantity >= 0 AND sold_quantity <= limited_quantity),
    INDEX limited_drops_product_id (product_id),
    INDEX limited_drops_open_at (open_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE drop_holdings (
    drop_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    quantity INT NOT NULL,
    PRIMARY KEY (drop_id, user_id),
    CONSTRAINT drop_holdings_quantity CHECK (quantity >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE orders (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    drop_id BIGINT NOT NULL,
    product_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    quantity INT NOT NULL,
    status VARCHAR(16) NOT NULL,
    idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(6) NOT NULL,
    CONSTRAINT orders_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT orders_quantity CHECK (quantity > 0),
    CONSTRAINT orders_status CHECK (status IN ('PENDING', 'PAID', 'CANCELLED')),
    UNIQUE INDEX orders_user_key (user_id, idempotency_key),
    INDEX orders_drop_id (drop_id, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
