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
