//! Degraded mode: the Redis gate is configured but dies mid-drop. Purchases keep working through
//! the database alone, the invariants hold, and readiness says so. Runs on every database
//! backend, always with a Redis gate of its own (a private `redis-server` it can kill).

use crate::helpers::{TestApp, body, problem};
use reqwest::StatusCode;
use serde_json::json;
use test_support::redis::PrivateRedis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_dies_purchases_fall_back_to_the_database_and_never_oversell() {
    let mut redis = PrivateRedis::start();
    let url = redis.url();
    let app = TestApp::spawn_with(&[("GATE", "redis"), ("REDIS_URL", &url)]).await;
    let (product, drop) = app.open_drop(10, 4, 1).await;
    let ready = body(app.get("/health/ready", None).await).await;
    assert_eq!(ready["gate"], json!({"kind": "redis", "status": "up"}));
    for user in 1..=2 {
        assert_eq!(
            app.purchase(drop, user, &format!("k{user}"), 1)
                .await
                .status(),
            StatusCode::ACCEPTED
        );
    }

    redis.kill();
    // Still 200: the database serves.
    let degraded = app
        .until_ready(|status, b| status == StatusCode::OK && b["status"] == "degraded")
        .await;
    assert_eq!(
        (
            degraded["status"].as_str(),
            degraded["gate"]["status"].as_str()
        ),
        (Some("degraded"), Some("degraded"))
    );

    // The database alone decides: exactly the two units left are sold, never a third.
    let mut sold = 0;
    for user in 3..=6 {
        let res = app.purchase(drop, user, &format!("k{user}"), 1).await;
        if res.status() == StatusCode::ACCEPTED {
            sold += 1;
        } else {
            problem(res, 409, "SOLD_OUT").await;
        }
    }
    assert_eq!(sold, 2);
    // A replay of an order made while Redis was up still answers.
    let replay = app.purchase(drop, 1, "k1", 1).await;
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    assert_eq!(app.stock(product).await, 6);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(
        (recon["soldQuantity"].as_i64(), recon["oversold"].as_bool()),
        (Some(4), Some(false))
    );
    assert!(
        recon["gateRemaining"].is_null(),
        "the gate is unreachable: {recon}"
    );
}
