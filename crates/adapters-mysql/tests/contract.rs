//! The SQL source-of-truth contract against a real MySQL/MariaDB server, one fresh database per
//! test (`TEST_MYSQL_URL`, or a container where Docker answers).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_mysql::{MysqlStore, MysqlTls};

/// Enough connections to make the 64-task races contend for real, few enough that parallel
/// tests (six at once, see .config/nextest.toml) stay well under the server's default
/// `max_connections` of 151.
const POOL: usize = 16;

async fn store() -> MysqlStore {
    adapters_mysql::Mysql::connect(&test_support::mysql::fresh_database().await, POOL, true)
        .await
        .unwrap()
}

test_support::sql_contract_tests!(store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_and_create_the_documented_indexes() {
    let url = test_support::mysql::fresh_database().await;
    adapters_mysql::migrate_database(&url, None, &MysqlTls::default())
        .await
        .unwrap();
    adapters_mysql::migrate_database(&url, None, &MysqlTls::default())
        .await
        .unwrap();
    let store = adapters_mysql::Mysql::connect(&url, 2, false)
        .await
        .unwrap();
    store.ping().await.unwrap();
    let indexes = test_support::mysql::index_names(&url, "limited_drops").await;
    for index in ["limited_drops_product_id", "limited_drops_open_at"] {
        assert!(
            indexes.iter().any(|i| i == index),
            "{index} missing from {indexes:?}"
        );
    }
    let orders = test_support::mysql::index_names(&url, "orders").await;
    assert!(orders.iter().any(|i| i == "orders_user_key"), "{orders:?}");
}

/// Instances that start at once on a fresh database with `DATABASE_MIGRATE=true` migrate one
/// after the other: one applies every migration, the others find them applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_migrating_a_fresh_database_at_once_take_turns() {
    let url = test_support::mysql::fresh_database().await;
    let all = adapters_mysql::pending_migrations(&url, &MysqlTls::default())
        .await
        .unwrap()
        .len();
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let url = url.clone();
        runs.spawn(async move {
            adapters_mysql::migrate_database(&url, None, &MysqlTls::default()).await
        });
    }
    let mut applied = Vec::new();
    while let Some(run) = runs.join_next().await {
        match run.unwrap() {
            Ok(done) => applied.push(done.len()),
            Err(error) => panic!("a migration run failed: {error:#}"),
        }
    }
    applied.sort_unstable();
    assert_eq!(
        applied,
        [0, 0, all],
        "one run applied all {all}, the others none"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_of_the_pool_is_open_before_the_first_request() {
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 5, true).await.unwrap();
    assert_eq!(store.backend().open_connections(), 5);
    // The migration's own connection is closed without waiting for the server to drop it, so
    // for a moment the server may still list it (seen on Galera): a sixth that goes. The pool's
    // five are there from the start and stay.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let processes = loop {
        let processes = test_support::mysql::connections_to(&url).await;
        assert!(
            processes >= 5,
            "the server sees only {processes} of the five connections"
        );
        if processes == 5 || std::time::Instant::now() > until {
            break processes;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(processes, 5, "the server sees the five connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_clear_error_not_a_hang() {
    let err = adapters_mysql::Mysql::connect("mysql://root@127.0.0.1:1/none", 1, false)
        .await
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("MySQL"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_sends_thirteen_statements_alone_or_in_a_batch_of_fifty() {
    let store = store().await;
    let lone =
        test_support::contract::statements_of_a_lone_purchase(&store, || store.statements()).await;
    let batch =
        test_support::contract::statements_of_a_batch(&store, 50, || store.statements()).await;
    // The pool's check of the connection it hands out (SELECT 1, diesel-async's `Verified`
    // recycling); BEGIN; the hot rows and the clock; orders by key; holdings created; holdings
    // read with a lock; INSERT of the orders; their ids read back; holdings update; stock
    // update; drop update (numbering the events); the INSERT of the batch's events, numbered
    // from the drop's row; COMMIT. The same thirteen for one order as for fifty.
    assert_eq!((lone, batch), (13, 13));
}

/// The server's id of a pooled connection.
async fn connection_id(conn: &mut diesel_async::AsyncMysqlConnection) -> i64 {
    use adapters_sql::Exec as _;
    let rows: Vec<adapters_sql::rows::NumberRow> = conn
        .rows(adapters_sql::Sql::new(
            "SELECT CAST(CONNECTION_ID() AS SIGNED) AS n",
        ))
        .await
        .unwrap();
    rows[0].n
}

/// The pool hands out the connection given back last, whose statements are prepared (a batch
/// statement's text depends on its row count: handing the connections out in turn prepared
/// every text on every one of them, 2,684-3,191 prepares a 20,000-unit sell-out against
/// 731-1,134, docs/benchmarks.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_hands_out_the_connection_given_back_last() {
    use adapters_sql::Backend as _;
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 4, true).await.unwrap();
    let mut first = store.backend().conn().await.unwrap();
    let mut second = store.backend().conn().await.unwrap();
    let first_id = connection_id(&mut first).await;
    let second_id = connection_id(&mut second).await;
    assert_ne!(first_id, second_id);
    drop(second);
    drop(first);
    let mut next = store.backend().conn().await.unwrap();
    assert_eq!(connection_id(&mut next).await, first_id);
    drop(next);
    let mut again = store.backend().conn().await.unwrap();
    assert_eq!(connection_id(&mut again).await, first_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_past_its_time_limit_releases_its_row_locks_at_once() {
    use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
    use goods_domain::ports::{DropRepository, PlaceOrder, ProductRepository};
    use goods_domain::{DropInput, IdempotencyKey, NewLimitedDrop, NewProduct, Quantity, UserId};
    let url = test_support::mysql::fresh_database().await;
    let bounds = adapters_sql::Bounds {
        acquire: std::time::Duration::from_secs(1),
        transaction: std::time::Duration::from_millis(300),
    };
    let store = adapters_mysql::Mysql::connect_with(&url, 2, true, bounds, &MysqlTls::default())
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc();
    let product = ProductRepository::create(&store, &NewProduct::parse("Sneaker", 5).unwrap())
        .await
        .unwrap();
    let input = DropInput {
        product_id: product.id.get(),
        open_at: now - time::Duration::seconds(1),
        close_at: now + time::Duration::hours(1),
        limited_quantity: Some(5),
        variants: None,
        per_user_limit: 1,
        price_minor: 0,
        currency: "XXX".into(),
        mode: "FIRST_COME".into(),
        entry_close_at: None,
        payment_window_seconds: None,
    };
    let drop = DropRepository::create(
        &store,
        &NewLimitedDrop::parse(&input, now).unwrap(),
        None,
        now,
        None,
    )
    .await
    .unwrap();
    // Someone holds the drop row: the purchase takes the stock row, then waits on the drop.
    let mut holder = AsyncMysqlConnection::establish(&url).await.unwrap();
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM limited_drops WHERE id = {} FOR UPDATE;",
            drop.id
        ))
        .await
        .unwrap();
    let order = PlaceOrder {
        drop_id: drop.id,
        product_id: drop.product_id,
        limited_quantity: drop.limited_quantity,
        per_user_limit: drop.per_user_limit,
        price: drop.price,
        user_id: UserId::parse(1).unwrap(),
        sku: None,
        quantity: Quantity::parse("quantity", 1).unwrap(),
        key: IdempotencyKey::parse("k").unwrap(),
        now,
        deadline: None,
        window: goods_domain::PaymentWindow::default(),
    };
    let timed_out = test_support::contract::place(&store, &order).await;
    assert!(
        matches!(&timed_out, Err(goods_domain::ports::PlaceOrderError::Infra(e)) if e.is_unavailable()),
        "{timed_out:?}"
    );
    // Its connection was closed, so the server rolled it back: the stock row is free now, not
    // held by a transaction parked in the pool.
    let mut other = AsyncMysqlConnection::establish(&url).await.unwrap();
    other
        .batch_execute(&format!(
            "SET SESSION innodb_lock_wait_timeout = 1; \
             UPDATE stocks SET version = version + 1 WHERE product_id = {};",
            drop.product_id
        ))
        .await
        .unwrap();
    holder.batch_execute("COMMIT").await.unwrap();
    // And the pool serves the next purchase.
    assert!(test_support::contract::place(&store, &order).await.is_ok());
}

/// An instance stopped in the middle of a transaction (SIGSTOP, a frozen VM) sends nothing
/// more, and its connection stays open: to the server, a transaction left idle. Past the
/// transaction limit the server rolls it back and closes the connection, so another instance
/// waiting on the same row gets it, rather than waiting until the stopped one runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_left_idle_by_a_stopped_instance_releases_its_row_locks() {
    use adapters_sql::Backend as _;
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    let url = test_support::mysql::fresh_database().await;
    let bounds = adapters_sql::Bounds {
        acquire: std::time::Duration::from_secs(1),
        transaction: std::time::Duration::from_millis(1000),
    };
    let store = adapters_mysql::Mysql::connect_with(&url, 2, true, bounds, &MysqlTls::default())
        .await
        .unwrap();
    let mut other = AsyncMysqlConnection::establish(&url).await.unwrap();
    other
        .batch_execute(
            "CREATE TABLE held (id INT PRIMARY KEY, n INT); INSERT INTO held VALUES (1, 0)",
        )
        .await
        .unwrap();
    // One of the pool's connections, with the service's session settings, takes the row and
    // then is heard from no more.
    let mut stopped = store.backend().conn().await.unwrap();
    stopped
        .batch_execute("BEGIN; UPDATE held SET n = 1 WHERE id = 1")
        .await
        .unwrap();
    // Another instance waits on the row for up to 10 s: it gets it, and the stopped one's
    // change was rolled back.
    let waited = std::time::Instant::now();
    other
        .batch_execute(
            "SET SESSION innodb_lock_wait_timeout = 10; UPDATE held SET n = n + 10 WHERE id = 1",
        )
        .await
        .unwrap();
    eprintln!("the row was free after {:?}", waited.elapsed());
    let rows: Vec<Count> = diesel_async::RunQueryDsl::load(
        diesel::sql_query("SELECT CAST(n AS SIGNED) AS n FROM held WHERE id = 1"),
        &mut other,
    )
    .await
    .unwrap();
    assert_eq!(
        rows[0].n, 10,
        "the stopped instance's update was rolled back"
    );
    // Running again, the stopped instance finds its connection closed: its COMMIT fails, so
    // it cannot take its unfinished transaction for a committed one.
    assert!(stopped.batch_execute("COMMIT").await.is_err());
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_refuses_to_change_a_draws_seed() {
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 2, true).await.unwrap();
    let drop = test_support::contract::draw_drop(&store, 3).await;
    let mut conn = AsyncMysqlConnection::establish(&url).await.unwrap();
    let other = "0".repeat(64);
    // The sealed seed, its key and the commitment never change; the clear seed is written
    // once, at the reveal, and never again.
    let reveal = format!(
        "UPDATE drop_draws SET seed = '{}' WHERE drop_id = {}",
        "1".repeat(64),
        drop.id
    );
    conn.batch_execute(&reveal).await.unwrap();
    for column in ["sealed_seed", "seal_key_id", "commitment", "seed"] {
        let refused = conn
            .batch_execute(&format!(
                "UPDATE drop_draws SET {column} = '{other}' WHERE drop_id = {}",
                drop.id
            ))
            .await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.to_string().contains("never changed")),
            "{column}: {refused:?}"
        );
    }
    // Nor is the row replaced: deleting it, to insert another draw's sealed seed and
    // commitment, is refused.
    let refused = conn
        .batch_execute(&format!(
            "DELETE FROM drop_draws WHERE drop_id = {}",
            drop.id
        ))
        .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("never deleted")),
        "{refused:?}"
    );
    conn.batch_execute(&format!(
        "UPDATE drop_draws SET drawn_at = NOW(6) WHERE drop_id = {}",
        drop.id
    ))
    .await
    .unwrap();
    use goods_domain::ports::DrawRepository as _;
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!(
        draw.revealed_seed().map(|s| s.to_hex()),
        Some("1".repeat(64)),
        "the seed written at the reveal stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_without_a_stored_deadline_expires_by_the_default_window() {
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 2, true).await.unwrap();
    test_support::contract::an_order_without_a_stored_deadline_expires_by_the_default_window(
        store,
        |id| {
            let url = url.clone();
            async move {
                AsyncMysqlConnection::establish(&url)
                    .await
                    .unwrap()
                    .batch_execute(&format!(
                        "UPDATE orders SET expires_at = NULL WHERE id = {id}"
                    ))
                    .await
                    .unwrap();
            }
        },
    )
    .await;
}

/// A purchase batch writes its events as one row of `event_batches`, not one row an event into
/// `events` (and its five indexes) while the drop's row is locked; the first read of the log
/// moves them, and leaves no batch row behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_batch_writes_one_row_of_events_until_the_log_is_read() {
    use goods_domain::ports::{EventLog, EventQuery, PurchaseLedger};
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 2, true).await.unwrap();
    let drop = test_support::contract::open_drop(&store, 100, 10, 1).await;
    let orders: Vec<_> = (1..=10)
        .map(|buyer| test_support::contract::order(&drop, buyer, "k", 1))
        .collect();
    assert!(
        store
            .place_orders(&orders)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let rows = |table: &str| {
        let query = format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE drop_id = {}",
            drop.id
        );
        let url = url.clone();
        async move { test_support::mysql::count(&url, &query).await }
    };
    // The drop's creation and the batch: two rows; its 10 orders and the sell-out are in one.
    assert_eq!((rows("event_batches").await, rows("events").await), (2, 0));
    let logged = store
        .events(&EventQuery {
            after: None,
            kind: None,
            drop: Some(drop.id),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(logged.len(), 12);
    assert_eq!((rows("event_batches").await, rows("events").await), (0, 12));
}

/// A fault after a transaction's event line: a trigger that refuses every `event_batches` row.
struct EventLineFault(String);

impl EventLineFault {
    /// A store on a fresh database, and the fault for it.
    async fn store() -> (MysqlStore, Self) {
        let url = test_support::mysql::fresh_database().await;
        let store = adapters_mysql::Mysql::connect(&url, POOL, true)
            .await
            .unwrap();
        (store, Self(url))
    }

    async fn exec(&self, sql: &str) {
        use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
        AsyncMysqlConnection::establish(&self.0)
            .await
            .unwrap()
            .batch_execute(sql)
            .await
            .unwrap();
    }

    async fn arm(&self) {
        self.exec(
            "CREATE TRIGGER injected_fault AFTER INSERT ON event_batches FOR EACH ROW \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'a fault after the event line'",
        )
        .await;
    }

    async fn disarm(&self) {
        self.exec("DROP TRIGGER injected_fault").await;
    }
}

test_support::event_line_fault_tests!(EventLineFault::store());

/// How many statements of `db` (a database URL) are running whose text starts as `prefix`.
async fn running(conn: &mut diesel_async::AsyncMysqlConnection, db: &str, prefix: &str) -> i64 {
    let name = db.rsplit('/').next().unwrap();
    let rows: Vec<Count> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(format!(
            "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST \
             WHERE DB = '{name}' AND INFO LIKE '{prefix}%'"
        )),
        conn,
    )
    .await
    .unwrap();
    rows[0].n
}

/// Polls until `running` reports `n` statements starting as `prefix`; what is running if
/// they never come, after 20 s.
async fn until_running(
    conn: &mut diesel_async::AsyncMysqlConnection,
    db: &str,
    prefix: &str,
    n: i64,
) -> Result<(), String> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < until {
        if running(conn, db, prefix).await == n {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let name = db.rsplit('/').next().unwrap();
    #[derive(diesel::QueryableByName)]
    struct Info {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
        info: Option<String>,
    }
    let infos: Vec<Info> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(format!(
            "SELECT INFO AS info FROM information_schema.PROCESSLIST WHERE DB = '{name}'"
        )),
        conn,
    )
    .await
    .unwrap();
    Err(format!(
        "never {n} running as {prefix:?}; running: {:?}",
        infos.into_iter().filter_map(|i| i.info).collect::<Vec<_>>()
    ))
}

/// A batch that lost the race for the drop's row once cannot lose it again: its next attempt
/// locks the hot rows before it reads them (after the buyers' holdings, in the order the writes
/// take them), so a writer that takes units in between makes it wait, not refuse it. Two
/// writers of the test take units around a batch of four buyers at a drop of 5: the first
/// commits 3 while the batch waits on the drop's row (the batch read 5 free: its update is
/// refused); the second holds the row with 1 more when the batch tries again. The batch's retry
/// waits for that row at its locking read, then sells the last unit: 1 order, 3 sold out, on
/// its second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_lost_the_race_once_locks_the_drop_before_it_reads_it_again() {
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    use goods_domain::ports::{DropRepository as _, PlaceOrderError, Placed, PurchaseLedger as _};
    let url = test_support::mysql::fresh_database().await;
    let store = adapters_mysql::Mysql::connect(&url, 2, true).await.unwrap();
    let drop = test_support::contract::open_drop(&store, 10, 5, 1).await;
    let take = |n: u32| {
        format!(
            "BEGIN; UPDATE limited_drops SET sold_quantity = sold_quantity + {n} WHERE id = {}",
            drop.id
        )
    };
    let mut watch = AsyncMysqlConnection::establish(&url).await.unwrap();
    let mut first = AsyncMysqlConnection::establish(&url).await.unwrap();
    first.batch_execute(&take(3)).await.unwrap();
    let batch: Vec<_> = (1..=4)
        .map(|b| test_support::contract::order(&drop, b, "k", 1))
        .collect();
    let placing = {
        let store = store.clone();
        tokio::spawn(async move { store.place_orders(&batch).await })
    };
    until_running(&mut watch, &url, "UPDATE limited_drops", 1)
        .await
        .unwrap();
    let mut second = AsyncMysqlConnection::establish(&url).await.unwrap();
    let second_took = {
        let statement = take(1);
        tokio::spawn(async move {
            second.batch_execute(&statement).await.unwrap();
            second
        })
    };
    until_running(&mut watch, &url, "UPDATE limited_drops", 2)
        .await
        .unwrap();
    // The batch's update is refused (3 + 4 > 5) and the second writer gets the row.
    first.batch_execute("COMMIT").await.unwrap();
    let mut second = second_took.await.unwrap();
    let waited = until_running(&mut watch, &url, "SELECT id AS id FROM limited_drops", 1).await;
    second.batch_execute("COMMIT").await.unwrap();
    waited.unwrap();
    let answers = placing.await.unwrap().unwrap();
    let created = answers
        .iter()
        .filter(|a| matches!(a, Ok(Placed::Created(_))))
        .count();
    let sold_out = answers
        .iter()
        .filter(|a| matches!(a, Err(PlaceOrderError::SoldOut { .. })))
        .count();
    assert_eq!((created, sold_out), (1, 3), "{answers:?}");
    // The drop's row counts the test's 4 units and the batch's last one; its orders, the one.
    let rows: Vec<Count> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(format!(
            "SELECT CAST(sold_quantity AS SIGNED) AS n FROM limited_drops WHERE id = {}",
            drop.id
        )),
        &mut watch,
    )
    .await
    .unwrap();
    assert_eq!(rows[0].n, 5);
    assert_eq!(store.sold_quantity(drop.id).await.unwrap(), 1);
}
