//! The fleet's token buckets against a real Redis (`TEST_REDIS_URL`, or a private
//! `redis-server`), a fresh key prefix per test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_redis::{RedisConfig, RedisConnection, RedisRateLimiter};
use futures::future::join_all;
use goods_domain::ports::RateLimiter;
use goods_domain::{RateKey, RateLimit, UserId};
use std::sync::Arc;
use std::time::Duration;
use test_support::redis::{fresh_prefix, server_url};

/// One instance's limiter on `prefix`.
async fn limiter(prefix: &str) -> RedisRateLimiter {
    let config = RedisConfig {
        url: server_url(),
        prefix: prefix.to_owned(),
        pool_size: 4,
        command_timeout: Duration::from_millis(500),
        tls_ca_file: None,
    };
    RedisRateLimiter::new(
        RedisConnection::connect(&config, Duration::from_secs(2))
            .await
            .unwrap(),
    )
}

fn buyer(id: i64) -> RateKey {
    RateKey::Buyer(UserId::parse(id).unwrap())
}

/// 30 a minute (bursts of 60): no token comes back within a test's second or two.
fn slow() -> RateLimit {
    RateLimit::parse("30/m").unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_allows_its_burst_as_goods_domain_counts_it_then_refuses_for_an_interval() {
    let limiter = limiter(&fresh_prefix()).await;
    let mut remaining = Vec::new();
    for _ in 0..60 {
        let decision = limiter.admit(buyer(7), slow()).await.unwrap();
        assert!(decision.allowed, "{decision:?}");
        remaining.push(decision.remaining);
    }
    // The same counts as goods-domain's gcra for 60 requests at one instant (59, 58, ... 0):
    // the script computes the domain's rule.
    let mut tat = None;
    let expected: Vec<u32> = (0..60)
        .map(|_| {
            let (decision, next) = goods_domain::rate::gcra(tat, 1_000_000_000, &slow());
            tat = next;
            decision.remaining
        })
        .collect();
    assert_eq!(remaining, expected);
    assert_eq!(expected.first(), Some(&59));
    let refused = limiter.admit(buyer(7), slow()).await.unwrap();
    assert!(!refused.allowed);
    // One token comes back 2 s after the first was spent; the bucket is full 120 s after.
    assert!(
        refused.retry_after > Duration::from_millis(1_500)
            && refused.retry_after <= Duration::from_secs(2),
        "{refused:?}"
    );
    assert_eq!(refused.retry_after_seconds(), 2);
    assert!(refused.reset > Duration::from_secs(119) && refused.reset <= Duration::from_secs(120));
    // A refusal spends nothing: the next is refused the same way, not later.
    let again = limiter.admit(buyer(7), slow()).await.unwrap();
    assert!(!again.allowed && again.retry_after <= refused.retry_after);
    // Another buyer, and an address, have buckets of their own.
    assert!(limiter.admit(buyer(8), slow()).await.unwrap().allowed);
    let address = RateKey::Address("10.0.0.7".parse().unwrap());
    assert!(limiter.admit(address, slow()).await.unwrap().allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_racing_for_one_buyer_get_exactly_the_burst() {
    let prefix = fresh_prefix();
    let instances = [
        Arc::new(limiter(&prefix).await),
        Arc::new(limiter(&prefix).await),
    ];
    let tries = (0..200).map(|i| {
        let limiter = Arc::clone(&instances[i % 2]);
        tokio::spawn(async move { limiter.admit(buyer(9), slow()).await.unwrap().allowed })
    });
    let allowed = join_all(tries)
        .await
        .into_iter()
        .filter(|r| *r.as_ref().unwrap())
        .count();
    assert_eq!(allowed, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_expires_when_it_would_be_full_again() {
    let prefix = fresh_prefix();
    let limiter = limiter(&prefix).await;
    // One token spent at 30 a minute comes back in 2 s: the key lives that long, not longer
    // (a missing bucket is a full one), so idle buyers leave nothing in Redis.
    assert!(limiter.admit(buyer(11), slow()).await.unwrap().allowed);
    let ttl: i64 = cli(&["PTTL", &format!("{prefix}rate:buyer:11")])
        .parse()
        .unwrap();
    assert!((1_900..=2_001).contains(&ttl), "{ttl}");
}

fn cli(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-u", &server_url()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
