//! Several hosts in `DATABASE_URL` on a real three-node Galera Cluster (`TEST_GALERA_URL`, the
//! URL scripts/galera-cluster prints; scripts/test starts one): the store writes through the
//! first node that answers and is a synced member of the primary component.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_mysql::{HostList, Mysql};
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};

/// The cluster's nodes (`host:port`).
fn nodes() -> Vec<String> {
    let url = std::env::var("TEST_GALERA_URL")
        .expect("TEST_GALERA_URL: the URL scripts/galera-cluster prints (scripts/test sets it)");
    let hosts = HostList::parse(&url).unwrap();
    assert_eq!(hosts.len(), 3, "{url}");
    hosts.hosts().to_vec()
}

async fn node(host: &str) -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(&format!("mysql://root@{host}"))
        .await
        .unwrap()
}

/// A fresh database, created through `host` (Galera replicates the DDL).
async fn fresh_database(host: &str) -> String {
    let name = format!(
        "galera_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    );
    node(host)
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    name
}

/// How many rows `table` of `db` has as `host` sees it, after it applied everything committed
/// in the cluster before the read (`wsrep_sync_wait`).
async fn count_on(host: &str, db: &str, table: &str) -> i64 {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = node(host).await;
    conn.batch_execute("SET SESSION wsrep_sync_wait = 1")
        .await
        .unwrap();
    diesel::sql_query(format!("SELECT COUNT(*) AS n FROM {db}.{table}"))
        .get_result::<Count>(&mut conn)
        .await
        .unwrap()
        .n
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_whose_first_host_is_down_writes_through_the_next_and_every_node_has_it() {
    let nodes = nodes();
    let db = fresh_database(&nodes[1]).await;
    // The first node is left out: the other test desynchronises it.
    let url = format!(
        "mysql://root@127.0.0.1:{},{},{}/{db}",
        dead_port(),
        nodes[1],
        nodes[2]
    );
    let store = Mysql::connect(&url, 2, true).await.unwrap();
    assert_eq!(store.backend().writer().current(), 1);
    let drop = test_support::contract::open_drop(&store, 10, 5, 3).await;
    let placed =
        test_support::contract::place(&store, &test_support::contract::order(&drop, 7, "k", 2))
            .await;
    assert!(placed.is_ok(), "{placed:?}");
    for host in &nodes {
        assert_eq!(count_on(host, &db, "orders").await, 1, "{host}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_not_synced_is_passed_over_for_the_next() {
    let nodes = nodes();
    let db = fresh_database(&nodes[1]).await;
    let mut first = node(&nodes[0]).await;
    first
        .batch_execute("SET GLOBAL wsrep_desync = ON")
        .await
        .unwrap();
    let url = format!("mysql://root@{},{},{}/{db}", nodes[0], nodes[1], nodes[2]);
    let connected = Mysql::connect(&url, 2, true).await;
    // Synced again before any assertion can fail.
    first
        .batch_execute("SET GLOBAL wsrep_desync = OFF")
        .await
        .unwrap();
    let store = connected.unwrap();
    assert_eq!(store.backend().writer().current(), 1);
    let drop = test_support::contract::open_drop(&store, 10, 5, 3).await;
    let placed =
        test_support::contract::place(&store, &test_support::contract::order(&drop, 7, "k", 1))
            .await;
    assert!(placed.is_ok(), "{placed:?}");
    for host in &nodes {
        assert_eq!(count_on(host, &db, "orders").await, 1, "{host}");
    }
}
