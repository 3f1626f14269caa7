//! TLS to Redis against real TLS-only servers: `rediss://` encrypts and verifies the server,
//! with a private CA file or not at all; a server that does not verify, or that speaks
//! plaintext, fails the connection at start instead of being used in the clear.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_redis::{RedisConfig, RedisConnection, RedisGate};
use goods_domain::DropId;
use goods_domain::ports::{AdmissionGate, GateSeed};
use std::path::PathBuf;
use std::time::Duration;
use test_support::redis::{PrivateRedis, fresh_prefix, private_tls_cluster};
use test_support::tls::TestPki;
use time::OffsetDateTime;

fn config(url: &str, ca: Option<PathBuf>) -> RedisConfig {
    RedisConfig {
        url: url.to_owned(),
        prefix: fresh_prefix(),
        pool_size: 2,
        command_timeout: Duration::from_millis(500),
        tls_ca_file: ca,
    }
}

async fn connect(url: &str, ca: Option<PathBuf>) -> anyhow::Result<RedisConnection> {
    RedisConnection::connect(&config(url, ca), Duration::from_secs(2)).await
}

fn tls_redis(pki: &TestPki) -> PrivateRedis {
    let (cert, key) = pki.server();
    PrivateRedis::start_tls(&pki.ca_pem(), &cert, &key)
}

/// The gate works over the connection: a drop seeded and read back.
async fn gate_works(conn: RedisConnection) {
    let gate = RedisGate::new(conn, Duration::ZERO);
    let drop = DropId::parse(7).unwrap();
    gate.seed_if_absent(&GateSeed {
        unexplained: Vec::new(),
        drop_id: drop,
        remaining: goods_domain::ports::whole_units(3),
        expires_at: OffsetDateTime::now_utc() + time::Duration::hours(1),
        orders: Vec::new(),
    })
    .await
    .unwrap();
    assert_eq!(
        gate.remaining(drop).await.unwrap(),
        Some(goods_domain::ports::whole_units(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_reaches_a_tls_only_redis_verified_by_its_ca() {
    let pki = TestPki::new();
    let redis = tls_redis(&pki);
    assert!(redis.url().starts_with("rediss://"));
    let conn = connect(&redis.url(), Some(pki.ca_pem())).await.unwrap();
    conn.ping().await.unwrap();
    gate_works(conn).await;
    // The server saw a TLS client: its connection counters say so.
    let info = redis.cli(&["INFO", "stats"]).unwrap();
    assert!(info.contains("total_connections_received:"), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_from_another_ca_fails_the_connection_with_a_clear_error() {
    let pki = TestPki::new();
    let redis = tls_redis(&pki);
    let error = connect(&redis.url(), Some(pki.other_ca_pem()))
        .await
        .err()
        .expect("a certificate that does not verify must not be used");
    let text = format!("{error:#}");
    assert!(text.contains("TLS handshake with Redis failed"), "{text}");
    assert!(text.contains("never falls back to plaintext"), "{text}");
    // The system's roots do not know the test CA either.
    let error = connect(&redis.url(), None)
        .await
        .err()
        .expect("unknown issuer");
    assert!(format!("{error:#}").contains("TLS handshake"), "{error:#}");
}

/// A certificate the trusted CA signed for another host name is refused: the name is checked,
/// not only the chain. The same CA's certificate for 127.0.0.1 serves (the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_fails_the_connection() {
    let pki = TestPki::new();
    let (cert, key) = pki.elsewhere();
    let redis = PrivateRedis::start_tls(&pki.ca_pem(), &cert, &key);
    let error = connect(&redis.url(), Some(pki.ca_pem()))
        .await
        .err()
        .expect("a certificate for db.elsewhere.example must not serve 127.0.0.1");
    let text = format!("{error:#}");
    assert!(text.contains("TLS handshake with Redis failed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_to_a_plaintext_redis_fails_and_sends_it_nothing_in_the_clear() {
    let pki = TestPki::new();
    let plain = PrivateRedis::start();
    let url = plain.url().replacen("redis://", "rediss://", 1);
    let error = connect(&url, Some(pki.ca_pem()))
        .await
        .err()
        .expect("a plaintext server must not be used for rediss://");
    assert!(
        format!("{error:#}").contains("TLS handshake with Redis failed"),
        "{error:#}"
    );
    // Nothing reached it as a command: it processed only what redis-cli asks here.
    let stats = plain.cli(&["INFO", "commandstats"]).unwrap();
    assert!(
        !stats.contains("cmdstat_evalsha") && !stats.contains("cmdstat_hello"),
        "{stats}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_file_without_rediss_is_refused_and_plaintext_to_a_tls_only_redis_gets_no_answer() {
    let pki = TestPki::new();
    let redis = tls_redis(&pki);
    let plaintext = redis.url().replacen("rediss://", "redis://", 1);
    let error = connect(&plaintext, Some(pki.ca_pem()))
        .await
        .err()
        .expect("a CA file asks for TLS");
    assert!(format!("{error:#}").contains("not rediss://"), "{error:#}");
    // Without the CA file it connects as a plaintext client would, and the TLS-only server
    // answers nothing: the gate is down (degraded), never up in the clear.
    let conn = connect(&plaintext, None).await.unwrap();
    assert!(
        conn.ping().await.is_err(),
        "a TLS-only server answered plaintext"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_cluster_reaches_a_tls_only_cluster_and_the_gate_works_on_it() {
    let pki = TestPki::new();
    let url = private_tls_cluster(&pki);
    assert!(url.starts_with("rediss-cluster://"), "{url}");
    let conn = connect(&url, Some(pki.ca_pem())).await.unwrap();
    conn.ping().await.unwrap();
    gate_works(conn).await;
    let error = connect(&url, Some(pki.other_ca_pem()))
        .await
        .err()
        .expect("wrong CA");
    assert!(format!("{error:#}").contains("TLS handshake"), "{error:#}");
}
