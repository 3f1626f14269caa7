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

/// How soon after the loss of the node written through the sale takes purchases again: the
/// peers' new view (a closed connection is seen at once; a silent node after
/// `evs.suspect_timeout`, 5 s), the service's bounded waits, and slack for the machine.
const RESUMES_WITHIN: Duration = Duration::from_secs(12);

/// Every purchase is answered within the harness's bounds (`DB_WRITE_WAIT_MS` 500 +
/// `DB_ACQUIRE_TIMEOUT_MS` 500 + `DB_TX_TIMEOUT_MS` 1000) plus slack for a loaded machine, as
/// on one database (faults.rs).
const ANSWERED_WITHIN: Duration = Duration::from_millis(3500);

/// The cluster with all three nodes synced, a fresh database on it, and a server whose
/// `DATABASE_URL` names the three nodes in order (so it writes through node 0), with `extra`.
async fn server_on_the_cluster(extra: &[(&'static str, &str)]) -> (Cluster, String, Server) {
    let cluster = Cluster::from_env();
    cluster.restore();
    cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
    let name = format!("galera_{}", uuid::Uuid::new_v4().simple());
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", cluster.database(&name)));
    vars.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
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

/// After `fault` to node 0, the sale took purchases again within [`RESUMES_WITHIN`], answered
/// each within [`ANSWERED_WITHIN`], and wrote through node 1 alone (`commits` on nodes 1 and 2).
fn resumed_through_node_1(fault: &str, sale: &Sale, commits: &[u64]) {
    eprintln!(
        "after {fault}: first 202 {:?}, sold out {:?}, slowest wave {:?}, {} answers 503; \
         commits on nodes 1 and 2 {commits:?}",
        sale.resumed_after, sale.sold_out_after, sale.slowest_wave, sale.unavailable
    );
    assert!(
        sale.resumed_after <= RESUMES_WITHIN,
        "{:?}",
        sale.resumed_after
    );
    assert!(
        sale.slowest_wave <= ANSWERED_WITHIN,
        "{:?}",
        sale.slowest_wave
    );
    assert!(commits[0] > 0, "node 1 took the writes: {commits:?}");
    assert_eq!(commits[1], 0, "node 2 took none: {commits:?}");
}

/// A drop of 120 units on `server`: 40 sold, then `fault` to node 0, then the rest in waves.
/// The sale resumes through node 1 alone ([`resumed_through_node_1`]), the buyers told to retry
/// do so with their keys, and the drop sells out exactly with every 202's order on nodes 1 and 2.
/// The drop and those orders.
async fn fault_mid_sale(
    cluster: &Cluster,
    db: &str,
    server: &Server,
    client: &Client,
    fault_name: &str,
    fault: impl FnOnce(),
) -> (i64, Vec<i64>) {
    const LIMITED: i64 = 120;
    let drop = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(client, &server.base, drop, 1..=40).await;
    assert_eq!(accepted(&answers).len(), 40);
    let (commits, sale) = written_through(cluster, &[1, 2], async {
        fault();
        sell_out_in_waves(
            client,
            &server.base,
            drop,
            LIMITED,
            41,
            answers,
            Duration::from_secs(40),
        )
        .await
    })
    .await;
    resumed_through_node_1(&format!("{fault_name} of node 0"), &sale, &commits);
    let answers = settle(client, &server.base, drop, sale.answers, HEAL_WITHIN).await;
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    assert_sold_out_exactly(client, &server.base, drop, LIMITED, &answers).await;
    let want = accepted(&answers);
    every_node_has_exactly(cluster, &[1, 2], db, drop, &want);
    (drop, want)
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
    let (cluster, db, server) = server_on_the_cluster(&[]).await;
    let client = Client::new();
    let metric = |name| process::metric(&client.http, &server.base, name);
    let (drop, want) = fault_mid_sale(&cluster, &db, &server, &client, "kill -9", || {
        cluster.kill(0);
    })
    .await;
    assert_eq!(
        (
            metric("db_writer_host").await,
            metric("db_writer_moves_total").await
        ),
        (1, 1)
    );

    let restarted = std::time::Instant::now();
    cluster.restart(0);
    cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
    eprintln!("node 0 rejoined in {:?}", restarted.elapsed());
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

/// The node written through is paused (SIGSTOP) mid-sale: a partition as its peers and the
/// service see it, connections open and nothing answering. Every purchase is answered within
/// the bounds (503 while nothing commits, never a hang or a 500); once the two others form the
/// primary component the service writes through the next node, and the drop sells out exactly
/// with every 202's order on both. Resumed (SIGCONT), the node rejoins and holds them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_node_written_through_paused_mid_sale_is_left_behind_within_the_bounds() {
    let (cluster, db, server) = server_on_the_cluster(&[]).await;
    let client = Client::new();
    let (drop, want) = fault_mid_sale(&cluster, &db, &server, &client, "SIGSTOP", || {
        cluster.pause(0);
    })
    .await;

    let resumed = std::time::Instant::now();
    cluster.resume(0);
    cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
    eprintln!(
        "node 0 back in the cluster {:?} after SIGCONT",
        resumed.elapsed()
    );
    every_node_has_exactly(&cluster, &[0, 1, 2], &db, drop, &want);
}

/// A node joins by state transfer while a sale runs (node 2, down before the drop opened, is
/// started mid-sale; its donor is never the node written through: scripts/galera-cluster's
/// `wsrep_sst_donor`): the sale goes on through node 0 with no purchase refused for it, sells
/// out exactly, and the joined node holds every 202's order. The server runs on the default
/// bounds: the group's view change when the node arrives holds every commit for a second or
/// two, past the 1 s transaction limit of the other tests' harness (which answers 503 then).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_joining_by_state_transfer_mid_sale_changes_nothing() {
    const LIMITED: i64 = 600;
    let (cluster, db, server) = server_on_the_cluster(&[
        ("DB_WRITE_WAIT_MS", "2000"),
        ("DB_ACQUIRE_TIMEOUT_MS", "1000"),
        ("DB_TX_TIMEOUT_MS", "3000"),
        ("RESERVATION_LEASE_MS", "8000"),
    ])
    .await;
    cluster.kill(2);
    cluster.until_synced(&[0, 1], JOIN_WITHIN);
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let mut answers = wave(&client, &server.base, drop, 1..=40).await;
    assert_eq!(accepted(&answers).len(), 40);

    let joining = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            cluster.restart(2);
            cluster.until_synced(&[0, 1, 2], JOIN_WITHIN);
            started.elapsed()
        })
    };
    // Small waves while it joins, so the sale is still running when the node is synced.
    let mut next = 41;
    let (mut during, mut slowest) = (0, Duration::ZERO);
    while !joining.is_finished() {
        let sent = std::time::Instant::now();
        let got = wave(&client, &server.base, drop, next..next + 4).await;
        slowest = slowest.max(sent.elapsed());
        next += 4;
        for (user, answer) in &got {
            assert_eq!(
                answer.status, 202,
                "buyer {user} while node 2 joins: {answer:?}"
            );
        }
        during += got.len();
        answers.extend(got);
        tokio::time::sleep(Duration::from_millis(HEAL_MS)).await;
    }
    let joined = joining.await.unwrap();
    eprintln!(
        "node 2 joined in {joined:?}, {during} purchases answered 202 meanwhile, the slowest \
         wave in {slowest:?}"
    );
    assert!(during > 0);
    let sale = sell_out_in_waves(
        &client,
        &server.base,
        drop,
        LIMITED,
        next,
        answers,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(sale.unavailable, 0);
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &sale.answers).await;
    every_node_has_exactly(&cluster, &[0, 1, 2], &db, drop, &accepted(&sale.answers));
}
