//! The owner column's expand-backfill-contract on the embedded SQLite file, from the previous
//! release's schema and data: nothing is lost, old products belong to no seller (admins only),
//! and after the contract a product without an owner is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_sqlite::MIGRATIONS;
use diesel::connection::SimpleConnection as _;
use diesel::migration::{Migration, MigrationSource};
use diesel::sqlite::Sqlite;
use diesel::{Connection as _, RunQueryDsl as _, SqliteConnection};
use diesel_migrations::MigrationHarness as _;
use goods_domain::ports::{DropRepository, ProductRepository};
use goods_domain::{DropId, NewProduct, ProductId, UserId};

/// The version (diesel drops the dashes) of the first migration of the release that added
/// ownership.
const OWNERSHIP: &str = "20261202000001";

/// Applies this release's migrations whose version `keep` accepts, in order.
fn apply(conn: &mut SqliteConnection, keep: impl Fn(&str) -> bool) {
    let mut all = MigrationSource::<Sqlite>::migrations(&MIGRATIONS).unwrap();
    all.sort_by_key(|m| m.name().version().to_string());
    // What `run_pending_migrations` sets up first (diesel's own DDL); `run_migration` does not.
    conn.batch_execute(
        "CREATE TABLE IF NOT EXISTS __diesel_schema_migrations (
           version VARCHAR(50) PRIMARY KEY NOT NULL,
           run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    )
    .unwrap();
    for migration in all {
        if keep(&migration.name().version().to_string()) {
            conn.run_migration(&*migration).unwrap();
        }
    }
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

fn count(conn: &mut SqliteConnection, query: &str) -> i64 {
    diesel::sql_query(query)
        .get_result::<Count>(conn)
        .unwrap()
        .n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_column_is_added_backfilled_and_required_without_losing_a_row() {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = format!("{}/goods.db", dir.display());
    let mut conn = SqliteConnection::establish(&path).unwrap();
    // The previous release's schema, and data written by it (no owner column).
    apply(&mut conn, |v| v < OWNERSHIP);
    conn.batch_execute(
        "INSERT INTO products (id, name) VALUES (1, 'Old sneaker');
         INSERT INTO stocks (product_id, quantity) VALUES (1, 8);
         INSERT INTO limited_drops (id, product_id, open_at, close_at, limited_quantity, per_user_limit, sold_quantity)
           VALUES (1, 1, '2026-01-01 00:00:00', '2026-01-02 00:00:00', 5, 1, 2);
         INSERT INTO orders (drop_id, product_id, user_id, quantity, status, idempotency_key, created_at)
           VALUES (1, 1, 10, 1, 'PENDING', 'a', '2026-01-01 00:00:01'),
                  (1, 1, 11, 1, 'PAID', 'b', '2026-01-01 00:00:02');",
    )
    .unwrap();
    // Expand: the previous release keeps inserting products without the column.
    apply(&mut conn, |v| v.starts_with(OWNERSHIP));
    conn.batch_execute(
        "INSERT INTO products (id, name) VALUES (2, 'Written by the old release');
         INSERT INTO stocks (product_id, quantity) VALUES (2, 1);",
    )
    .unwrap();
    drop(conn);

    // Backfill, contract and the rest, as this release opens its file.
    let store = adapters_sqlite::Sqlite::open(&format!("sqlite://{path}"), true)
        .await
        .unwrap();
    for id in [1, 2] {
        let product = ProductRepository::get(&store, ProductId::parse(id).unwrap())
            .await
            .unwrap()
            .expect("the product survived");
        assert_eq!(product.owner, None, "product {id} belongs to no seller");
    }
    let old = ProductRepository::get(&store, ProductId::parse(1).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.stock.quantity(), 8);
    let drop = DropRepository::get(&store, DropId::parse(1).unwrap())
        .await
        .unwrap()
        .expect("the drop survived");
    assert!(!drop.paused && drop.closed_at.is_none());
    assert_eq!(store.sold_quantity(drop.id).await.unwrap(), 2);
    let seller = UserId::parse(77).unwrap();
    let created = ProductRepository::create(
        &store,
        &NewProduct::parse("New", 1).unwrap().owned_by(seller),
    )
    .await
    .unwrap();
    let read = ProductRepository::get(&store, created.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.owner, Some(seller));

    let mut conn = SqliteConnection::establish(&path).unwrap();
    assert_eq!(count(&mut conn, "SELECT COUNT(*) AS n FROM orders"), 2);
    let refused = conn.batch_execute("INSERT INTO products (name) VALUES ('No owner')");
    assert!(refused.is_err(), "a product without owner_id was accepted");
}
