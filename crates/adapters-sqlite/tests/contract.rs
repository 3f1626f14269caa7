//! The SQL source-of-truth contract against the embedded SQLite file, one file per test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_sqlite::SqliteStore;

async fn store() -> SqliteStore {
    // The directory is leaked on purpose: it must outlive the store, and is tiny.
    let dir = tempfile::tempdir().unwrap().keep();
    adapters_sqlite::Sqlite::open(&format!("sqlite://{}/goods.db", dir.display()), true)
        .await
        .unwrap()
}

test_support::sql_contract_tests!(store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_sends_fourteen_statements_alone_or_in_a_batch_of_fifty() {
    let store = store().await;
    let lone =
        test_support::contract::statements_of_a_lone_purchase(&store, || store.statements()).await;
    let batch =
        test_support::contract::statements_of_a_batch(&store, 50, || store.statements()).await;
    // MySQL's thirteen plus the no-op write that takes SQLite's write lock first.
    assert_eq!((lone, batch), (14, 14));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_contract_step_a_product_needs_an_owner() {
    use diesel::connection::SimpleConnection as _;
    use diesel::{Connection as _, SqliteConnection};
    let dir = tempfile::tempdir().unwrap().keep();
    let path = format!("{}/goods.db", dir.display());
    adapters_sqlite::Sqlite::open(&format!("sqlite://{path}"), true)
        .await
        .unwrap();
    let mut conn = SqliteConnection::establish(&path).unwrap();
    let refused = conn.batch_execute("INSERT INTO products (name) VALUES ('No owner')");
    assert!(refused.is_err(), "a product without owner_id was accepted");
    conn.batch_execute("INSERT INTO products (name, owner_id) VALUES ('Owned', 5)")
        .unwrap();
    let refused = conn.batch_execute("UPDATE products SET owner_id = NULL");
    assert!(refused.is_err(), "an owner was removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_refuses_to_change_a_draws_seed() {
    use diesel::connection::SimpleConnection as _;
    use diesel::{Connection as _, SqliteConnection};
    let dir = tempfile::tempdir().unwrap().keep();
    let path = format!("{}/goods.db", dir.display());
    let store = adapters_sqlite::Sqlite::open(&format!("sqlite://{path}"), true)
        .await
        .unwrap();
    let drop = test_support::contract::draw_drop(&store, 3).await;
    let mut conn = SqliteConnection::establish(&path).unwrap();
    let other = "0".repeat(64);
    // The sealed seed, its key and the commitment never change; the clear seed is written
    // once, at the reveal, and never again.
    let reveal = format!(
        "UPDATE drop_draws SET seed = '{}' WHERE drop_id = {}",
        "1".repeat(64),
        drop.id
    );
    conn.batch_execute(&reveal).unwrap();
    for column in ["sealed_seed", "seal_key_id", "commitment", "seed"] {
        let refused = conn.batch_execute(&format!(
            "UPDATE drop_draws SET {column} = '{other}' WHERE drop_id = {}",
            drop.id
        ));
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.to_string().contains("never changed")),
            "{column}: {refused:?}"
        );
    }
    // Nor is the row replaced: deleting it, to insert another draw's sealed seed and
    // commitment, is refused.
    let refused = conn.batch_execute(&format!(
        "DELETE FROM drop_draws WHERE drop_id = {}",
        drop.id
    ));
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("never deleted")),
        "{refused:?}"
    );
    conn.batch_execute(&format!(
        "UPDATE drop_draws SET drawn_at = CURRENT_TIMESTAMP WHERE drop_id = {}",
        drop.id
    ))
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
    use diesel::connection::SimpleConnection as _;
    use diesel::{Connection as _, SqliteConnection};
    let dir = tempfile::tempdir().unwrap().keep();
    let path = format!("{}/goods.db", dir.display());
    let store = adapters_sqlite::Sqlite::open(&format!("sqlite://{path}"), true)
        .await
        .unwrap();
    test_support::contract::an_order_without_a_stored_deadline_expires_by_the_default_window(
        store,
        |id| async move {
            SqliteConnection::establish(&path)
                .unwrap()
                .batch_execute(&format!(
                    "UPDATE orders SET expires_at = NULL WHERE id = {id}"
                ))
                .unwrap();
        },
    )
    .await;
}

/// A fault after a transaction's event line: a trigger that refuses every `event_batches` row.
struct EventLineFault(String);

impl EventLineFault {
    /// A store on a fresh file, and the fault for it.
    async fn store() -> (SqliteStore, Self) {
        let dir = tempfile::tempdir().unwrap().keep();
        let path = format!("{}/goods.db", dir.display());
        let store = adapters_sqlite::Sqlite::open(&format!("sqlite://{path}"), true)
            .await
            .unwrap();
        (store, Self(path))
    }

    fn exec(&self, sql: &str) {
        use diesel::connection::SimpleConnection as _;
        use diesel::{Connection as _, SqliteConnection};
        SqliteConnection::establish(&self.0)
            .unwrap()
            .batch_execute(sql)
            .unwrap();
    }

    async fn arm(&self) {
        self.exec(
            "CREATE TRIGGER injected_fault AFTER INSERT ON event_batches \
             BEGIN SELECT RAISE(ABORT, 'a fault after the event line'); END",
        );
    }

    async fn disarm(&self) {
        self.exec("DROP TRIGGER injected_fault");
    }
}

test_support::event_line_fault_tests!(EventLineFault::store());
