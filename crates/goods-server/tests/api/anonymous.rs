//! What an anonymous client can cost the database: requests for drops that do not exist are
//! answered from the index of drop ids, readiness from its last check, a drop's units left (when
//! no gate counts them) from its last count. Each is bounded per second, whatever the rate.

use crate::helpers::{TestApp, problem};
use futures::stream::{self, StreamExt};
use std::time::Instant;

/// `requests` GETs of `path(i)` from 32 clients at once; how long they took.
async fn flood(app: &TestApp, requests: u64, path: impl Fn(u64) -> String) -> std::time::Duration {
    let start = Instant::now();
    let statuses: Vec<u16> = stream::iter(0..requests)
        .map(|i| {
            let url = format!("{}{}", app.address, path(i));
            let client = app.client.clone();
            async move { client.get(url).send().await.unwrap().status().as_u16() }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(
        statuses.iter().all(|s| *s == 404 || *s == 200),
        "{statuses:?}"
    );
    start.elapsed()
}

/// Statements allowed in `elapsed` for work done at most once per `every`: two statements each
/// (the pool's check of the connection and the query), plus one round in flight at each end.
fn bound(elapsed: std::time::Duration, every: std::time::Duration) -> u64 {
    2 * (u64::try_from(elapsed.as_millis() / every.as_millis()).unwrap() + 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_drop_ids_cost_the_database_one_scan_per_interval_whatever_the_rate() {
    // No periodic refresh during the test: only requests make statements.
    let app = TestApp::spawn_with(&[("DROP_REFRESH_MS", "3600000")]).await;
    let (_, drop) = app.open_drop(10, 5, 1).await;
    problem(
        app.get(&format!("/limited-drops/{}", drop + 1), None).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    let before = app.db_statements_settled().await;
    // Random ids: far above every drop's, answered from the index alone.
    let elapsed = flood(&app, 3000, |i| {
        format!(
            "/limited-drops/{}",
            (i * 2_654_435_761) % 9_000_000_000_000 + 2
        )
    })
    .await;
    let spent = app.db_statements().await - before;
    let allowed = bound(elapsed, goods_app::DROP_SCAN_INTERVAL);
    eprintln!("3000 random drop ids in {elapsed:?}: {spent} statements (at most {allowed})");
    assert!(
        spent <= allowed,
        "{spent} statements in {elapsed:?}, at most {allowed}"
    );
    // Ids just above every drop's may be drops another instance created since the last scan:
    // they wait for one shared scan per interval (and are answered 404 after it).
    let before = app.db_statements_settled().await;
    let elapsed = flood(&app, 300, |i| {
        format!("/limited-drops/{}", drop + 1 + i64::try_from(i).unwrap())
    })
    .await;
    let spent = app.db_statements().await - before;
    let allowed = bound(elapsed, goods_app::DROP_SCAN_INTERVAL);
    eprintln!(
        "300 ids just above the highest in {elapsed:?}: {spent} statements (at most {allowed})"
    );
    assert!(
        spent <= allowed,
        "{spent} statements in {elapsed:?}, at most {allowed}"
    );
    // A purchase of an unknown drop is the same miss.
    let res = app.purchase(9_000_000_000_001, 7, "k", 1).await;
    problem(res, 404, "DROP_NOT_FOUND").await;
    // The drop that exists is still found.
    assert_eq!(
        app.get(&format!("/limited-drops/{drop}"), None)
            .await
            .status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_probes_and_views_of_a_drop_cost_one_check_per_interval() {
    let app = TestApp::spawn_with(&[("DROP_REFRESH_MS", "3600000")]).await;
    let before = app.db_statements_settled().await;
    let elapsed = flood(&app, 2000, |_| "/health/ready".to_owned()).await;
    let spent = app.db_statements().await - before;
    let allowed = bound(elapsed, api_actix::READY_CACHE);
    eprintln!("2000 readiness probes in {elapsed:?}: {spent} statements (at most {allowed})");
    assert!(
        spent <= allowed,
        "{spent} statements in {elapsed:?}, at most {allowed}"
    );

    let (_, drop) = app.open_drop(10, 5, 1).await;
    assert_eq!(
        app.get(&format!("/limited-drops/{drop}"), None)
            .await
            .status(),
        200
    );
    let before = app.db_statements_settled().await;
    let elapsed = flood(&app, 2000, |_| format!("/limited-drops/{drop}")).await;
    let spent = app.db_statements().await - before;
    // With a gate its counter answers; without one, the count is reused.
    let allowed = bound(elapsed, goods_app::REMAINING_TTL);
    eprintln!("2000 views of a drop in {elapsed:?}: {spent} statements (at most {allowed})");
    assert!(
        spent <= allowed,
        "{spent} statements in {elapsed:?}, at most {allowed}"
    );
}
