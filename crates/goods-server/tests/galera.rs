//! Faults of the source of truth on a real three-node MariaDB Galera Cluster (the one
//! scripts/galera-cluster started: `TEST_GALERA_URL`, `TEST_GALERA_DIR`), the server given all
//! three nodes in one `DATABASE_URL`: the node written through killed with SIGKILL or paused with
//! SIGSTOP mid-sale, and a node rejoining by state transfer while a sale runs. After each, the
//! drop sells out exactly, every 202 is an order on every node that is up, none doubled, and the
//! gate agrees with the truth (drift 0).
//!
//! The tests share the cluster, run one at a time (.config/nextest.toml's `galera-cluster`
//! group), and leave it as they found it: three synced nodes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use test_support::galera::Cluster;

mod support;
use support::harness::*;

/// How long a node may take to join (or rejoin) the cluster: a full state transfer by rsync
/// of a small database, with the group's view changes, on a loaded machine.
const JOIN_WITHIN: Duration = Duration::from_secs(120);

/// The cluster with all three nodes synced, a fresh database on it, and a server whose
/// `DATABASE_URL` names the three nodes in order (so it writes through node 0).
async fn server_on_the_cluster() -> (Cluster, String, Server) {
    let cluster = Cluster::from_env();
    cluster.restore();
    cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
    let name = format!("galera_{}", uuid::Uuid::new_v4().simple());
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", cluster.database(&name)));
    let server = Server::start(&env(&vars));
    (cluster, name, server)
}

/// The ids of the orders of `drop` on node `node`, once it applied every write set before the
/// read, in order.
fn orders_on(cluster: &Cluster, node: usize, database: &str, drop: i64) -> Vec<i64> {
    cluster
        .rows_on(
            node,
            &format!("SELECT id FROM {database}.orders WHERE drop_id = {drop} ORDER BY id"),
        )
        .iter()
        .map(|id| id.trim().parse().unwrap())
        .collect()
}

/// The order ids of the buyers' 202s, in order.
fn accepted(answers: &Answers) -> Vec<i64> {
    let mut ids: Vec<i64> = answers
        .values()
        .filter(|a| a.status == 202)
        .map(|a| a.order.unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// Every node of `nodes` holds exactly the orders the buyers were answered 202 for: none lost,
/// none doubled, none that nobody was told of.
fn every_node_has_exactly(cluster: &Cluster, nodes: &[usize], db: &str, drop: i64, want: &[i64]) {
    for &node in nodes {
        assert_eq!(
            orders_on(cluster, node, db, drop),
            want,
            "node {node} holds exactly the 202s' orders"
        );
    }
}

/// Transactions each node has committed as the node a client wrote through
/// (`wsrep_local_commits`; write sets applied from other nodes do not count); `None` for a node
/// that does not answer.
fn local_commits(cluster: &Cluster, nodes: &[usize]) -> Vec<Option<u64>> {
    nodes
        .iter()
        .map(|&node| cluster.status(node, "wsrep_local_commits")?.parse().ok())
        .collect()
}

/// How many transactions each node of `nodes` committed as the writer while `work` ran.
async fn written_through<F: std::future::Future>(
    cluster: &Cluster,
    nodes: &[usize],
    work: F,
) -> (Vec<u64>, F::Output) {
    let before = local_commits(cluster, nodes);
    let output = work.await;
    let after = local_commits(cluster, nodes);
    let deltas = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a.unwrap() - b.unwrap())
        .collect();
    (deltas, output)
}

/// The node written through is killed mid-sale (a machine lost). The purchases in flight are
/// answered 202 only for what committed, 503 otherwise (never a 500); a 503 whose commit did
/// reach the cluster is replayed as the 202 it was when the buyer retries with its key. The
/// sale resumes on the next node within seconds, and every write goes through that one node
/// (the third commits none of its own). The drop sells out exactly; both survivors hold every
/// 202's order, none doubled. The killed node then rejoins by state transfer, holds them too,
/// and takes no writes until the operator's SIGHUP moves the instance back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_node_written_through_killed_mid_sale_loses_no_202_and_the_sale_sells_out() {
    const LIMITED: i64 = 120;
    let (cluster, db, server) = server_on_the_cluster().await;
    let client = Client::new();
    let metric = |name| process::metric(&client.http, &server.base, name);
    let drop = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(&client, &server.base, drop, 1..=40).await;
    assert_eq!(accepted(&answers).len(), 40);

    let (commits, (answers, took)) = written_through(&cluster, &[1, 2], async {
        cluster.kill(0);
        sell_out_in_waves(
            &client,
            &server.base,
            drop,
            LIMITED,
            41,
            answers,
            Duration::from_secs(30),
        )
        .await
    })
    .await;
    eprintln!("sold out {took:?} after the kill of the node written through; commits {commits:?}");
    assert!(commits[0] > 0, "node 1 took the writes: {commits:?}");
    assert_eq!(commits[1], 0, "node 2 took none: {commits:?}");
    assert_eq!(
        (
            metric("db_writer_host").await,
            metric("db_writer_moves_total").await
        ),
        (1, 1)
    );
    let answers = settle(&client, &server.base, drop, answers, HEAL_WITHIN).await;
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
    let want = accepted(&answers);
    every_node_has_exactly(&cluster, &[1, 2], &db, drop, &want);

    cluster.restart(0);
    let joined = cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
    eprintln!("node 0 rejoined in {joined:?}");
    every_node_has_exactly(&cluster, &[0, 1, 2], &db, drop, &want);

    // Back by itself? No: a second sale still goes through node 1 alone.
    let sale = |first: i64| {
        let client = client.clone();
        let base = server.base.clone();
        async move {
            let drop = client.open_drop(&base, 40).await;
            let answers = wave(&client, &base, drop, first..first + 40).await;
            assert_eq!(accepted(&answers).len(), 40, "{answers:?}");
        }
    };
    let (commits, ()) = written_through(&cluster, &[0, 1, 2], sale(1000)).await;
    assert_eq!((commits[0], commits[2]), (0, 0), "{commits:?}");
    // Asked (SIGHUP): the instance goes back to node 0; connections to node 1 are closed at
    // their next checkout, so after one sale nothing more goes through node 1.
    test_support::signal(&server.child, "HUP");
    sale(2000).await;
    let (commits, ()) = written_through(&cluster, &[0, 1, 2], sale(3000)).await;
    assert!(commits[0] > 0, "{commits:?}");
    assert_eq!((commits[1], commits[2]), (0, 0), "{commits:?}");
    assert_eq!(
        (
            metric("db_writer_host").await,
            metric("db_writer_moves_total").await
        ),
        (0, 2)
    );
}
