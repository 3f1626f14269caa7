//! The owner column's expand-backfill-contract, on MariaDB, from the previous release's schema
//! and data: nothing is lost, old products end up owned by no seller (admins only), and after
//! the contract a product without an owner is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_mysql::MysqlTls;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use goods_domain::ports::ProductRepository;
use goods_domain::{NewProduct, ProductId, UserId};

/// The last migration of the release before ownership, and the expand step of ownership.
const PREVIOUS_RELEASE: &str = "2026-12-01-000002";
const EXPAND: &str = "2026-12-02-000001";

use test_support::mysql::count;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_column_is_added_backfilled_and_required_without_losing_a_row() {
    let url = test_support::mysql::fresh_database().await;
    // The previous release's schema, and data written by it (no owner column).
    let applied =
        adapters_mysql::migrate_database(&url, Some(PREVIOUS_RELEASE), &MysqlTls::default())
            .await
            .unwrap();
    assert_eq!(
        applied.last().map(|m| adapters_sql::version_of(m)),
        Some(adapters_sql::version_of(PREVIOUS_RELEASE)),
        "{applied:?}"
    );
    let mut conn = AsyncMysqlConnection::establish(&url).await.unwrap();
    conn.batch_execute(
        "INSERT INTO products (id, name) VALUES (1, 'Old sneaker');
         INSERT INTO stocks (product_id, quantity) VALUES (1, 8);
         INSERT INTO limited_drops (id, product_id, open_at, close_at, limited_quantity, per_user_limit, sold_quantity)
           VALUES (1, 1, '2026-01-01 00:00:00', '2026-01-02 00:00:00', 5, 1, 2);
         INSERT INTO orders (drop_id, product_id, user_id, quantity, status, idempotency_key, created_at)
           VALUES (1, 1, 10, 1, 'PENDING', 'a', '2026-01-01 00:00:01'),
                  (1, 1, 11, 1, 'PAID', 'b', '2026-01-01 00:00:02');",
    )
    .await
    .unwrap();

    // Expand: the previous release keeps inserting products without the column.
    let applied = adapters_mysql::migrate_database(&url, Some(EXPAND), &MysqlTls::default())
        .await
        .unwrap();
    assert_eq!(applied, ["2026-12-02-000001_products_owner_expand"]);
    conn.batch_execute(
        "INSERT INTO products (id, name) VALUES (2, 'Written by the old release');
         INSERT INTO stocks (product_id, quantity) VALUES (2, 1);",
    )
    .await
    .unwrap();
    // Backfill and contract.
    let applied = adapters_mysql::migrate_database(&url, None, &MysqlTls::default())
        .await
        .unwrap();
    assert_eq!(
        &applied[..2],
        [
            "2026-12-02-000002_products_owner_backfill",
            "2026-12-02-000003_products_owner_contract"
        ]
    );
    assert!(
        adapters_mysql::migrate_database(&url, Some("2099-01-01-000001"), &MysqlTls::default())
            .await
            .is_err(),
        "a version this release lacks is refused"
    );

    let store = adapters_mysql::Mysql::connect(&url, 2, false)
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
    assert_eq!(count(&url, "SELECT COUNT(*) AS n FROM orders").await, 2);
    assert_eq!(
        count(
            &url,
            "SELECT CAST(sold_quantity AS SIGNED) AS n FROM limited_drops"
        )
        .await,
        2
    );
    // This release writes the owner.
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
    // Contracted: a product without an owner is refused, and the index exists.
    let refused = conn
        .batch_execute("INSERT INTO products (name) VALUES ('No owner')")
        .await;
    assert!(refused.is_err(), "a product without owner_id was accepted");
    let indexes = test_support::mysql::index_names(&url, "products").await;
    assert!(
        indexes.iter().any(|i| i == "products_owner_id"),
        "{indexes:?}"
    );
}
