//! The real `goods-server` binary: started with no configuration, stopped with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::process::{Child, Command};
use std::time::Duration;

#[path = "support/harness.rs"]
mod harness;
use harness::process;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_request_in_flight_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = start(dir.path(), &[("DB_WRITE_WAIT_MS", "60000")]);
    assert!(
        dir.path().join("data/goods.db").exists(),
        "the embedded default keeps its file under ./data"
    );
    let client = reqwest::Client::new();
    let drop = harness::Client::new().open_drop(&base, 5).await;

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
    let unknown = migrate(&["--to", "2026-12-09-000001"]);
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
