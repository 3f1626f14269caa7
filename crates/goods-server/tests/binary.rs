//! The real `goods-server` binary: started with no configuration, stopped with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::process::{Child, Command};
use std::time::Duration;

mod support;
use support::{harness, process};

fn start(dir: &std::path::Path, vars: &[(&str, &str)]) -> (Child, String) {
    process::spawn(dir, vars.iter().copied())
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for the server to exit; its exit code.
async fn exit_code(mut child: Child) -> Option<i32> {
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap()
        .code()
}

/// The first two log lines name the listeners whatever happens while the rest is opened: a
/// Redis that does not answer at start warns (and purchases use the database), after them.
/// `process::spawn` reads the addresses from exactly those two lines and fails otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_two_log_lines_name_the_listeners_even_when_redis_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = start(
        dir.path(),
        &[("REDIS_URL", "redis://127.0.0.1:1"), ("GATE", "redis")],
    );
    let live = reqwest::get(format!("{base}/health/live")).await.unwrap();
    assert_eq!(live.status(), 200);
    sigterm(&child);
    assert_eq!(exit_code(child).await, Some(0));
}

/// SIGHUP moves a multi-host store's writer back to its first host (tests/galera.rs); on a
/// store with one host it is only logged, and it never ends the process (the signal's default
/// action without a handler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_on_a_store_with_one_host_changes_nothing_and_the_server_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = start(dir.path(), &[]);
    for _ in 0..2 {
        test_support::signal(&child, "HUP");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended the server"
    );
    let live = reqwest::get(format!("{base}/health/live")).await.unwrap();
    assert_eq!(live.status(), 200);
    sigterm(&child);
    assert_eq!(exit_code(child).await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_request_in_flight_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = start(dir.path(), &[("DB_WRITE_WAIT_MS", "60000")]);
    let client = reqwest::Client::new();
    let drop = harness::Client::new().open_drop(&base, 5).await;
    assert!(
        dir.path().join("data/goods.db").exists(),
        "the embedded default keeps its file under ./data"
    );

    let slots = || process::metric(&client, &base, "db_write_slots_available");
    let free = slots().await;

    // Hold the database so the purchase is caught in flight.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let db = dir.path().join("data/goods.db");
    let locker = std::thread::spawn(move || {
        use diesel::Connection;
        use diesel::connection::SimpleConnection;
        let mut conn = diesel::SqliteConnection::establish(db.to_str().unwrap()).unwrap();
        conn.batch_execute("BEGIN EXCLUSIVE").unwrap();
        released.recv().unwrap();
        conn.batch_execute("COMMIT").unwrap();
    });
    let purchase = tokio::spawn(
        client
            .post(format!("{base}/limited-drops/{drop}/orders"))
            .header("X-User-Id", "7")
            .header("Idempotency-Key", "k")
            .json(&json!({"quantity": 1}))
            .send(),
    );
    for attempt in 0.. {
        if slots().await == free - 1 {
            break;
        }
        assert!(attempt < 500, "the purchase never reached the database");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sigterm(&child);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server waits for the request in flight"
    );
    release.send(()).unwrap();
    locker.join().unwrap();
    let res = purchase.await.unwrap().unwrap();
    assert_eq!(res.status().as_u16(), 202);
    assert_eq!(exit_code(child).await, Some(0));

    // The order survived the restart.
    let (child, base) = start(dir.path(), &[]);
    let view: serde_json::Value = client
        .get(format!("{base}/limited-drops/{drop}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["remaining"], 4);
    sigterm(&child);
    assert_eq!(exit_code(child).await, Some(0));
}

#[rstest::rstest]
#[case::bad_number(&[("DB_WRITE_WAIT_MS", "soon")], "DB_WRITE_WAIT_MS")]
#[case::production_without_an_identity_mode(
    &[("DATABASE_URL", "mysql://root@127.0.0.1:1/goods")],
    "AUTH_MODE"
)]
#[case::placeholder_secret(
    &[("AUTH_MODE", "jwt"), ("AUTH_JWT_SECRET", "change-me-to-at-least-32-random-bytes")],
    "AUTH_JWT_SECRET"
)]
#[case::placeholder_webhook_secret(&[("PAYMENT_WEBHOOK_SECRET", "change-me")], "PAYMENT_WEBHOOK_SECRET")]
#[case::a_secret_and_its_file(
    &[("AUTH_MODE", "jwt"), ("AUTH_JWT_SECRET", "x"), ("AUTH_JWT_SECRET_FILE", "/dev/null")],
    "AUTH_JWT_SECRET_FILE"
)]
fn a_bad_variable_stops_the_server_with_one_line_naming_it(
    #[case] vars: &[(&str, &str)],
    #[case] named: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .current_dir(dir.path())
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("invalid configuration: {named}:")),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "nothing was created");
}

#[test]
fn migrate_applies_the_migrations_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .arg("migrate")
        .current_dir(dir.path())
        .env_clear()
        .env("DATABASE_URL", "sqlite://migrated/goods.db")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrations applied"));
    let db = dir.path().join("migrated/goods.db");
    use diesel::Connection;
    use diesel::connection::SimpleConnection;
    let mut conn = diesel::SqliteConnection::establish(db.to_str().unwrap()).unwrap();
    conn.batch_execute("SELECT id, sold_quantity FROM limited_drops")
        .unwrap();
}

/// A one-request-at-a-time HTTP receiver: answers 200 to everything and hands each request's
/// head and body over.
fn otlp_receiver() -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            let _ = sent.send((head, body));
        }
    });
    (address, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_reach_an_otlp_http_protobuf_collector() {
    let (collector, received) = otlp_receiver();
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = start(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ],
    );
    let answer = reqwest::Client::new()
        .get(format!("{base}/health/live"))
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // The batch exporter flushes at shutdown.
    sigterm(&child);
    assert_eq!(exit_code(child).await, Some(0));
    let (head, body) = received
        .recv_timeout(Duration::from_secs(10))
        .expect("no export reached the collector");
    assert!(head.starts_with("POST /v1/traces "), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/x-protobuf"),
        "{head}"
    );
    let contains = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(
        contains(b"goods-server"),
        "the service name is in the export"
    );
    assert!(
        contains(b"GET /health/live"),
        "the request's span is in the export"
    );
    // The caller's trace id, as the 16 bytes protobuf carries.
    let trace: Vec<u8> = (0..16)
        .map(|i| {
            u8::from_str_radix(&"4bf92f3577b34da6a3ce929d0e0e4736"[2 * i..2 * i + 2], 16).unwrap()
        })
        .collect();
    assert!(contains(&trace), "the caller's trace id is in the export");
}

/// Runs the binary until it exits (it must, within 20 s); its exit code and standard error.
fn run_to_exit(vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .current_dir(dir.path())
        .env_clear()
        .env("BIND_ADDR", "127.0.0.1:0")
        .env("OPS_BIND_ADDR", "127.0.0.1:0")
        .envs(vars.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the server did not stop within 20 s with {vars:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value the Kubernetes example shows is refused, with a line saying how to make one: an
/// operator who applies the example unchanged gets a server that does not start, not one signing
/// with a publicly known key.
#[test]
fn the_k8s_examples_secret_values_are_refused_with_how_to_generate_one() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/k8s-examples/secret.example.yaml"
    ))
    .unwrap();
    let value = |key: &str| {
        example
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in the example"))
            .to_owned()
    };
    for (var, key, extra) in [
        ("AUTH_JWT_SECRET", "auth-jwt-secret", ("AUTH_MODE", "jwt")),
        (
            "PAYMENT_WEBHOOK_SECRET",
            "payment-webhook-secret",
            ("RUST_LOG", "info"),
        ),
    ] {
        let secret = value(key);
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_goods-server"))
            .current_dir(dir.path())
            .env_clear()
            .env(var, &secret)
            .env(extra.0, extra.1)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}={secret}: {stderr}");
        assert!(
            stderr.starts_with(&format!("invalid configuration: {var}:"))
                && stderr.contains("openssl rand -base64 48"),
            "{stderr}"
        );
    }
}

#[test]
fn sign_payment_prints_the_signature_the_provider_would_send() {
    use std::io::Write as _;
    let secret = "whsec_7Jk2mQ9vX4nR8cT1pW6zL3bF5hD0gYsA2eU9iO";
    let body = br#"{"eventId":"evt_1","type":"payment.succeeded","orderId":1,"amountMinor":0,"currency":"XXX","paymentReference":"pi_1"}"#;
    let mut child = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .arg("sign-payment")
        .env_clear()
        .env("PAYMENT_WEBHOOK_SECRET", secret)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let header = String::from_utf8(out.stdout).unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(
        api_actix::signature::verify(secret.as_bytes(), Some(header.trim()), body, now),
        Ok(())
    );
    let unset = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .arg("sign-payment")
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(unset.status.code(), Some(2));
}

/// docs/api.md's worked example of `verify-draw`, to the letter: the seed opens the commitment,
/// user 42's rank key, under the cutoff; a commitment that is not the seed's exits 1.
#[test]
fn verify_draw_checks_the_commitment_and_computes_a_buyers_rank_key() {
    const SEED: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const COMMITMENT: &str = "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd";
    const CUTOFF: &str = "8000000000000000000000000000000000000000000000000000000000000000";
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_goods-server"))
            .arg("verify-draw")
            .args(args)
            .env_clear()
            .output()
            .unwrap()
    };
    let ok = run(&[
        "--seed",
        SEED,
        "--commitment",
        COMMITMENT,
        "--user",
        "42",
        "--cutoff",
        CUTOFF,
    ]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(ok.stdout).unwrap(),
        "commitment ok: SHA-256(seed) = 630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd\n\
         rankKey 7df989924b2ebf8832c80802d1213a8a21a062a23877f0718effe501daee1703\n\
         WON\n"
    );
    // The worked example's inclusion proof: user 42 among entrants 7, 42 and 100 (root and
    // path computed independently with Python's hashlib from RFC 6962).
    const ROOT: &str = "288e24871d3d3309cb9d020970d529546eec4de2bdb75930d9161ede80e021a0";
    const PATH: &str = "797427cf8368051fe7b8e3e9d5ade9c5bc9d0cf96f4f3fad2a1e1d7848368188,\
                        140fd61778802b13c05c0f8fafcfe84370c4e7491178431fee89658c6b0e79fb";
    let proven = |index: &str| {
        run(&[
            "--seed",
            SEED,
            "--commitment",
            COMMITMENT,
            "--user",
            "42",
            "--root",
            ROOT,
            "--leaf-index",
            index,
            "--tree-size",
            "3",
            "--path",
            PATH,
        ])
    };
    let included = proven("1");
    assert_eq!(included.status.code(), Some(0));
    assert!(
        String::from_utf8(included.stdout)
            .unwrap()
            .ends_with(&format!(
                "inclusion ok: user 42 is leaf 1 of 3 under {ROOT}\n"
            ))
    );
    let elsewhere = proven("0");
    assert_eq!(elsewhere.status.code(), Some(1));
    assert!(
        String::from_utf8(elsewhere.stdout)
            .unwrap()
            .contains("INCLUSION MISMATCH")
    );
    let lower = "7000000000000000000000000000000000000000000000000000000000000000";
    let lost = run(&[
        "--seed",
        SEED,
        "--commitment",
        COMMITMENT,
        "--user",
        "42",
        "--cutoff",
        lower,
    ]);
    assert!(
        String::from_utf8(lost.stdout)
            .unwrap()
            .contains("\nNOT_WON\n")
    );
    // A seed that does not open the commitment: only the mismatch, no result from it.
    let forged = run(&[
        "--seed",
        SEED,
        "--commitment",
        CUTOFF,
        "--user",
        "42",
        "--cutoff",
        CUTOFF,
    ]);
    assert_eq!(forged.status.code(), Some(1));
    let said = String::from_utf8(forged.stdout).unwrap();
    assert!(said.starts_with("COMMITMENT MISMATCH"), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert_eq!(
        run(&["--seed", "xyz", "--commitment", COMMITMENT, "--user", "42"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(&["--seed", SEED]).status.code(), Some(2));
}

/// A MariaDB: the shared test server, or a private TLS-only mariadbd.
mod needs_mysql {
    use super::*;

    /// MySQL's release flow: an instance does not migrate by default, refuses a schema that is
    /// behind with a clear line, and starts once `goods-server migrate` ran. The migration job
    /// needs only `DATABASE_URL`, and can stop at a named migration (expand now, contract later).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_mysql_the_migrate_step_runs_once_and_an_instance_refuses_a_schema_behind() {
        let dir = tempfile::tempdir().unwrap();
        let database = test_support::mysql::fresh_database().await;
        let vars = [
            ("DATABASE_URL", database.as_str()),
            ("AUTH_MODE", "trusted-header"),
            ("BIND_ADDR", "127.0.0.1:0"),
            ("RECONCILE_INTERVAL_MS", "0"),
        ];
        // An instance started before its migrations ran: it must refuse, saying why.
        let start_refused = || {
            let out = Command::new(env!("CARGO_BIN_EXE_goods-server"))
                .current_dir(dir.path())
                .env_clear()
                .envs(vars)
                .output()
                .unwrap();
            assert_ne!(out.status.code(), Some(0));
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let stderr = start_refused();
        assert!(
            stderr.contains("schema is behind") && stderr.contains("goods-server migrate"),
            "{stderr}"
        );

        let migrate = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_goods-server"))
                .arg("migrate")
                .args(args)
                .current_dir(dir.path())
                .env_clear()
                .env("DATABASE_URL", &database)
                .output()
                .unwrap()
        };
        // A stage this release does not have is refused, and nothing is applied.
        let unknown = migrate(&["--to", "2099-01-01-000001"]);
        assert_eq!(unknown.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&unknown.stderr);
        assert!(stderr.contains("no such migration"), "{stderr}");
        let usage = migrate(&["--to"]);
        assert_eq!(usage.status.code(), Some(2));
        // The expand stage only: the instance still refuses, naming the next step.
        let staged = migrate(&["--to", "2026-12-02-000001"]);
        assert_eq!(
            staged.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&staged.stderr)
        );
        let stdout = String::from_utf8_lossy(&staged.stdout);
        assert!(
            stdout.contains("products_owner_expand") && !stdout.contains("products_owner_backfill"),
            "{stdout}"
        );
        let stderr = start_refused();
        assert!(stderr.contains("first 2026-12-02-000002"), "{stderr}");

        let migrated = migrate(&[]);
        assert_eq!(
            migrated.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&migrated.stderr)
        );
        let stdout = String::from_utf8_lossy(&migrated.stdout);
        assert!(
            stdout.contains("products_owner_backfill") && !stdout.contains("products_owner_expand"),
            "{stdout}"
        );

        let (child, base) = start(dir.path(), &vars);
        let live = reqwest::get(format!("{base}/health/ready")).await.unwrap();
        assert_eq!(live.status(), reqwest::StatusCode::OK);
        sigterm(&child);
        assert_eq!(exit_code(child).await, Some(0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn database_tls_verify_identity_with_the_wrong_ca_stops_the_start_and_the_right_one_serves()
     {
        let pki = test_support::tls::TestPki::new();
        let (cert, key) = pki.server();
        let server = test_support::mariadb::PrivateMariadb::start_tls(&pki.ca_pem(), &cert, &key);
        let url = server.database("binary_tls");
        let other = pki.other_ca_pem().display().to_string();
        let mysql = [
            ("DATABASE_URL", url.as_str()),
            ("DATABASE_MIGRATE", "true"),
            ("AUTH_MODE", "trusted-header"),
            ("DATABASE_TLS", "verify-identity"),
        ];
        let mut wrong = mysql.to_vec();
        wrong.push(("DATABASE_TLS_CA_FILE", &other));
        let (code, stderr) = run_to_exit(&wrong);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
        assert!(
            stderr.contains("VerifyIdentity") && stderr.contains("certificate"),
            "{stderr}"
        );
        // Plaintext to the TLS-only server is refused by the server.
        let plaintext: Vec<_> = mysql
            .iter()
            .copied()
            .filter(|(k, _)| *k != "DATABASE_TLS")
            .collect();
        let (code, stderr) = run_to_exit(&plaintext);
        assert_eq!(code, Some(1), "{stderr}");

        let ca = pki.ca_pem().display().to_string();
        let mut right = mysql.to_vec();
        right.push(("DATABASE_TLS_CA_FILE", &ca));
        let dir = tempfile::tempdir().unwrap();
        let (child, base) = start(dir.path(), &right);
        let drop = harness::Client::new().open_drop(&base, 1).await;
        let bought = harness::Client::new().buy(&base, drop, 7).await.unwrap();
        assert_eq!(bought.status, 202, "{bought:?}");
        let sessions = server.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'root' AND COMMAND <> 'Daemon'");
        let encrypted = server.sql("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'");
        assert!(sessions.trim().parse::<u32>().unwrap() >= 1);
        let accepts: u32 = encrypted
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            accepts >= 1,
            "the server accepted TLS connections: {encrypted}"
        );
        sigterm(&child);
        assert_eq!(exit_code(child).await, Some(0));
    }
}

/// Private TLS-only redis-servers.
mod needs_redis {
    use super::*;

    /// The server at `base` reports its Redis gate up: it reached and verified Redis.
    async fn assert_redis_gate_up(base: &str) {
        let ready: serde_json::Value = reqwest::get(format!("{base}/health/ready"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            ready["gate"],
            json!({"kind": "redis", "status": "up"}),
            "{ready}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rediss_to_a_plaintext_redis_stops_the_start_and_a_tls_only_redis_serves() {
        let pki = test_support::tls::TestPki::new();
        let ca = pki.ca_pem().display().to_string();
        let plain = test_support::redis::PrivateRedis::start();
        let url = plain.url().replacen("redis://", "rediss://", 1);
        let (code, stderr) = run_to_exit(&[("REDIS_URL", &url), ("REDIS_TLS_CA_FILE", &ca)]);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
        assert!(
            stderr.contains("TLS handshake with Redis failed")
                && stderr.contains("never falls back"),
            "{stderr}"
        );

        let (cert, key) = pki.server();
        let tls = test_support::redis::PrivateRedis::start_tls(&pki.ca_pem(), &cert, &key);
        let dir = tempfile::tempdir().unwrap();
        let tls_url = tls.url();
        let (child, base) = start(
            dir.path(),
            &[
                ("REDIS_URL", tls_url.as_str()),
                ("REDIS_TLS_CA_FILE", ca.as_str()),
            ],
        );
        assert_redis_gate_up(&base).await;
        let drop = harness::Client::new().open_drop(&base, 1).await;
        let bought = harness::Client::new().buy(&base, drop, 7).await.unwrap();
        assert_eq!(
            bought.status, 202,
            "a purchase through the TLS gate: {bought:?}"
        );
        sigterm(&child);
        assert_eq!(exit_code(child).await, Some(0));
    }

    /// `REDIS_TLS_CA_FILE` is the only CA trusted, not one more beside the system's roots. The test
    /// CA is made the system's store (`SSL_CERT_FILE`, which the roots are read from), as a public
    /// CA is in a real one: a Redis it signed serves without the file, and stops the start when the
    /// file names another CA.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rediss_to_a_redis_a_system_root_signed_is_refused_when_the_ca_file_names_another_ca() {
        let pki = test_support::tls::TestPki::new();
        let (cert, key) = pki.server();
        let tls = test_support::redis::PrivateRedis::start_tls(&pki.ca_pem(), &cert, &key);
        let url = tls.url();
        let system_roots = pki.ca_pem().display().to_string();
        let other = pki.other_ca_pem().display().to_string();
        let (code, stderr) = run_to_exit(&[
            ("REDIS_URL", &url),
            ("SSL_CERT_FILE", &system_roots),
            ("REDIS_TLS_CA_FILE", &other),
        ]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("TLS handshake with Redis failed"),
            "{stderr}"
        );

        let dir = tempfile::tempdir().unwrap();
        let (child, base) = start(
            dir.path(),
            &[
                ("REDIS_URL", url.as_str()),
                ("SSL_CERT_FILE", system_roots.as_str()),
            ],
        );
        assert_redis_gate_up(&base).await;
        sigterm(&child);
        assert_eq!(exit_code(child).await, Some(0));
    }
}

/// Test certificates made with the `openssl` command (and `python3`'s standard library for an
/// HTTPS receiver).
mod needs_openssl {
    use super::*;
    use std::io::BufRead as _;

    /// An HTTPS receiver (Python's http.server behind `cert`) answering every POST 204 and
    /// writing each request, one JSON line, to `out`; its port.
    fn https_receiver(
        cert: &std::path::Path,
        key: &std::path::Path,
        out: &std::path::Path,
    ) -> (Child, u16) {
        const RECEIVER: &str = r#"
import http.server, json, ssl, sys
cert, key, out = sys.argv[1:4]
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body.decode()}) + "\n")
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
        let mut child = Command::new("python3")
            .args(["-c", RECEIVER])
            .arg(cert)
            .arg(key)
            .arg(out)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (child, line.trim().parse().unwrap())
    }

    fn received(out: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Deliveries over HTTPS verify the receiver's certificate against the roots the server
    /// trusts (here the test CA, by `SSL_CERT_FILE`): the receiver whose certificate names its
    /// host gets the sale's events; the one whose certificate names another host gets no
    /// request, and its deliveries say why. No secret is ever in the server's log.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn webhooks_go_to_an_https_receiver_whose_certificate_verifies_and_to_no_other() {
        let pki = test_support::tls::TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let (good_out, bad_out) = (dir.path().join("good.jsonl"), dir.path().join("bad.jsonl"));
        let (cert, key) = pki.server();
        let (mut good, good_port) = https_receiver(&cert, &key, &good_out);
        let (cert, key) = pki.elsewhere();
        let (mut bad, bad_port) = https_receiver(&cert, &key, &bad_out);
        let ca = pki.ca_pem().display().to_string();
        let (child, base) = start(
            dir.path(),
            &[
                ("AUTH_MODE", "trusted-header"),
                ("SSL_CERT_FILE", &ca),
                ("WEBHOOK_ALLOW_PRIVATE", "true"),
                ("WEBHOOK_POLL_MS", "50"),
            ],
        );
        let http = reqwest::Client::new();
        let seller = |req: reqwest::RequestBuilder| {
            req.header("X-User-Id", "900000")
                .header("X-User-Role", "seller")
        };
        let (mut endpoints, mut secrets) = (Vec::new(), Vec::new());
        for port in [good_port, bad_port] {
            let created: serde_json::Value = seller(http.post(format!("{base}/webhook-endpoints")))
                .json(&json!({"url": format!("https://localhost:{port}/hooks")}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            endpoints.push(created["endpointId"].as_i64().unwrap());
            secrets.push(created["secret"].as_str().unwrap().to_owned());
        }
        let product: serde_json::Value = seller(http.post(format!("{base}/products")))
            .json(&json!({"name": "Sneaker", "stockQuantity": 5}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let now = time::OffsetDateTime::now_utc();
        let rfc = |t: time::OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .unwrap()
        };
        let created = seller(http.post(format!("{base}/limited-drops")))
            .json(&json!({
                "productId": product["productId"],
                "openAt": rfc(now - time::Duration::seconds(1)),
                "closeAt": rfc(now + time::Duration::hours(1)),
                "limitedQuantity": 5,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), reqwest::StatusCode::CREATED);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while received(&good_out).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "nothing delivered over HTTPS"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got = received(&good_out);
        assert_eq!(got.len(), 1, "{got:?}");
        let event: serde_json::Value =
            serde_json::from_str(got[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(event["type"], "goods.drop.created");
        assert_eq!(got[0]["headers"]["webhook-id"], event["id"]);
        // The other receiver's certificate is not for localhost: its attempt fails at the
        // handshake, recorded as the delivery's last error, and it never sees a request.
        let deliveries = loop {
            let listed: serde_json::Value = seller(http.get(format!(
                "{base}/webhook-endpoints/{}/deliveries",
                endpoints[1]
            )))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
            if listed["items"][0]["attempts"].as_i64().unwrap_or(0) >= 1 {
                break listed;
            }
            assert!(std::time::Instant::now() < deadline, "{listed}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let item = &deliveries["items"][0];
        assert_eq!(item["status"], "PENDING", "{item}");
        assert_eq!(item["lastStatusCode"], serde_json::Value::Null, "{item}");
        let error = item["lastError"].as_str().unwrap();
        assert!(
            error.contains("certificate") || error.contains("Certificate"),
            "{error}"
        );
        assert!(received(&bad_out).is_empty());
        // A secret is in the answer that shows it and nowhere else: not in the log (at the
        // default level, with a creation, deliveries and a failing handshake in it).
        let logs = process::logs_of(&base);
        assert!(logs.len() > 2, "{logs:?}");
        for secret in &secrets {
            let key = secret.strip_prefix("whsec_").unwrap();
            assert!(
                !logs.iter().any(|l| l.contains(key)),
                "a secret in the log: {logs:?}"
            );
        }
        sigterm(&child);
        assert_eq!(exit_code(child).await, Some(0));
        good.kill().unwrap();
        bad.kill().unwrap();
        let _ = (good.wait(), bad.wait());
    }
}
