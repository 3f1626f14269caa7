//! Outcome counters on a real Redis (`TEST_REDIS_URL`, or a private `redis-server`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_redis::{RedisConfig, RedisConnection, RedisStats};
use goods_domain::DropId;
use goods_domain::ports::{PurchaseOutcome, StatsRecorder};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use test_support::redis::{fresh_prefix, server_url};

/// A read flushes this instance's counts first, so it sees every count recorded before it,
/// even while other reads (each flushing too) run beside it: 300 counts, each read right
/// after it was recorded, with four readers flushing all the while.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_sees_every_count_recorded_before_it_whatever_flushes_run_beside_it() {
    let config = RedisConfig {
        url: server_url(),
        prefix: fresh_prefix(),
        pool_size: 4,
        command_timeout: Duration::from_millis(500),
        tls_ca_file: None,
    };
    let conn = RedisConnection::connect(&config, Duration::from_secs(2))
        .await
        .unwrap();
    let stats = Arc::new(RedisStats::new(conn));
    let drop = DropId::parse(1).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (stats, done) = (Arc::clone(&stats), Arc::clone(&done));
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    stats.counts(drop).await.unwrap();
                }
            })
        })
        .collect();
    for recorded in 1..=300 {
        stats.record(drop, PurchaseOutcome::SoldOut).unwrap();
        let seen = stats.counts(drop).await.unwrap().sold_out;
        assert_eq!(
            seen, recorded,
            "a read missed a count a concurrent flush was writing"
        );
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
}
