//! The SQL source-of-truth contract against a real MySQL/MariaDB server, one fresh database per
//! test (`TEST_MYSQL_URL`, or a container where Docker answers).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_mysql::MysqlStore;

/// Enough connections to make the 64-task races contend for real, few enough that parallel
/// tests stay under the server's `max_connections`.
const POOL: usize = 24;

async fn store() -> MysqlStore {
    MysqlStore::connect(&test_support::mysql::fresh_database().await, POOL, true)
        .await
        .unwrap()
}

test_support::sql_contract_tests!(store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_and_create_the_documented_indexes() {
    let url = test_support::mysql::fresh_database().await;
    adapters_mysql::migrate_database(&url).await.unwrap();
    adapters_mysql::migrate_database(&url).await.unwrap();
    let store = MysqlStore::connect(&url, 2, false).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_clear_error_not_a_hang() {
    let err = MysqlStore::connect("mysql://root@127.0.0.1:1/none", 1, false)
        .await
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("MySQL"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_purchase_sends_eleven_statements() {
    let store = store().await;
    let sent =
        test_support::contract::statements_of_a_lone_purchase(&store, || store.statements()).await;
    // The pool's check of the connection it hands out (SELECT 1, diesel-async's `Verified`
    // recycling); BEGIN; order by key; sold; INSERT order; LAST_INSERT_ID(); holding upsert;
    // holding update; stock update; drop update; COMMIT.
    assert_eq!(sent, 11);
}
