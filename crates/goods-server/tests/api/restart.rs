use crate::helpers::{TestApp, body, problem};
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_neither_loses_nor_invents_units_and_replays_survive() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 3, 1).await;
    let first = body(app.purchase(drop, 1, "k1", 1).await).await;
    assert_eq!(
        app.purchase(drop, 2, "k2", 1).await.status(),
        StatusCode::ACCEPTED
    );
    let app = app.restart().await;
    assert_eq!(app.remaining(drop).await, 1);
    assert_eq!(app.stock(product).await, 8);
    let replay = app.purchase(drop, 1, "k1", 1).await;
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    assert_eq!(body(replay).await["orderId"], first["orderId"]);
    problem(
        app.purchase(drop, 2, "k3", 1).await,
        403,
        "PER_USER_LIMIT_EXCEEDED",
    )
    .await;
    assert_eq!(
        app.purchase(drop, 3, "k4", 1).await.status(),
        StatusCode::ACCEPTED
    );
    problem(app.purchase(drop, 4, "k5", 1).await, 409, "SOLD_OUT").await;
    assert_eq!(app.stock(product).await, 7);
}
