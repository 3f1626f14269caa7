//! The SQL source-of-truth contract against the embedded SQLite file, one file per test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_sqlite::SqliteStore;

async fn store() -> SqliteStore {
    // The directory is leaked on purpose: it must outlive the store, and is tiny.
    let dir = tempfile::tempdir().unwrap().keep();
    SqliteStore::open(&format!("sqlite://{}/goods.db", dir.display()), true)
        .await
        .unwrap()
}

test_support::sql_contract_tests!(store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_sends_thirteen_statements_alone_or_in_a_batch_of_fifty() {
    let store = store().await;
    let lone =
        test_support::contract::statements_of_a_lone_purchase(&store, || store.statements()).await;
    let batch =
        test_support::contract::statements_of_a_batch(&store, 50, || store.statements()).await;
    // MySQL's twelve plus the no-op write that takes SQLite's write lock first.
    assert_eq!((lone, batch), (13, 13));
}
