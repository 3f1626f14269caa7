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
        stats.record(drop, None, PurchaseOutcome::SoldOut).unwrap();
        let seen = stats.counts(drop).await.unwrap().all.sold_out;
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

/// Each size's outcomes are counted in the drop's and in the size's, across instances: two
/// instances sharing the drop's hash record 5 sold and 3 refused of S, 2 sold of M and one
/// throttled purchase of a drop without sizes' kind; a read adds them up exactly.
#[tokio::test]
async fn each_sizes_outcomes_add_up_in_the_drop_and_the_size_across_instances() {
    let prefix = fresh_prefix();
    let connect = || async {
        let config = RedisConfig {
            url: server_url(),
            prefix: prefix.clone(),
            pool_size: 2,
            command_timeout: Duration::from_millis(500),
            tls_ca_file: None,
        };
        RedisStats::new(
            RedisConnection::connect(&config, Duration::from_secs(2))
                .await
                .unwrap(),
        )
    };
    let (one, two) = (connect().await, connect().await);
    let drop = DropId::parse(1).unwrap();
    let sku = |s: &str| goods_domain::Sku::parse("sku", s).unwrap();
    for n in 0..5 {
        let stats = if n % 2 == 0 { &one } else { &two };
        stats
            .record(drop, Some(&sku("S")), PurchaseOutcome::Success)
            .unwrap();
    }
    for _ in 0..3 {
        two.record(drop, Some(&sku("S")), PurchaseOutcome::SoldOut)
            .unwrap();
    }
    for _ in 0..2 {
        one.record(drop, Some(&sku("M")), PurchaseOutcome::Success)
            .unwrap();
    }
    one.record(drop, None, PurchaseOutcome::Throttled).unwrap();
    // Each read flushes only its own instance's counts: flush the other one first.
    two.counts(drop).await.unwrap();
    let counts = one.counts(drop).await.unwrap();
    assert_eq!(
        (
            counts.all.success,
            counts.all.sold_out,
            counts.all.throttled
        ),
        (7, 3, 1)
    );
    let s = counts.of(&sku("S"));
    let m = counts.of(&sku("M"));
    assert_eq!((s.success, s.sold_out, s.throttled), (5, 3, 0));
    assert_eq!((m.success, m.sold_out), (2, 0));
    assert_eq!(counts.sizes.len(), 2);
}
