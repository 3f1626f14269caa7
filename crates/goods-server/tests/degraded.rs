//! Degraded mode: the Redis gate is configured but dies mid-drop. Purchases keep working through
//! the database alone, the invariants hold, and readiness says so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use goods_server::{Application, Config};
use serde_json::{Value, json};
use std::collections::HashMap;
use test_support::redis::PrivateRedis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_dies_purchases_fall_back_to_the_database_and_never_oversell() {
    let mut redis = PrivateRedis::start();
    let dir = tempfile::tempdir().unwrap();
    let env: HashMap<&str, String> = HashMap::from([
        ("BIND_ADDR", "127.0.0.1:0".to_owned()),
        (
            "DATABASE_URL",
            format!("sqlite://{}/goods.db", dir.path().display()),
        ),
        ("REDIS_URL", redis.url()),
        ("RECONCILE_INTERVAL_MS", "0".to_owned()),
        ("HTTP_WORKERS", "2".to_owned()),
    ]);
    let config = Config::from_lookup(|name| env.get(name).cloned()).unwrap();
    let app = Application::build(config).await.unwrap();
    let base = format!("http://{}", app.address());
    tokio::spawn(app.run_until_stopped());
    let client = reqwest::Client::new();
    let seller =
        |r: reqwest::RequestBuilder| r.header("X-User-Id", "1").header("X-User-Role", "seller");
    let product: Value = seller(client.post(format!("{base}/products")))
        .json(&json!({"name": "P", "stockQuantity": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc();
    let fmt = &time::format_description::well_known::Rfc3339;
    let drop: Value = seller(client.post(format!("{base}/limited-drops")))
        .json(&json!({"productId": product["productId"], "openAt": (now - time::Duration::seconds(1)).format(fmt).unwrap(),
                      "closeAt": (now + time::Duration::hours(1)).format(fmt).unwrap(), "limitedQuantity": 4}))
        .send().await.unwrap().json().await.unwrap();
    let buy = |user: i64| {
        client
            .post(format!("{base}/limited-drops/{}/orders", drop["dropId"]))
            .header("X-User-Id", user.to_string())
            .header("Idempotency-Key", format!("k{user}"))
            .json(&json!({"quantity": 1}))
            .send()
    };
    let ready = || async {
        client
            .get(format!("{base}/health/ready"))
            .send()
            .await
            .unwrap()
    };
    let first = ready().await;
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(
        first.json::<Value>().await.unwrap()["gate"],
        json!({"kind": "redis", "status": "up"})
    );
    for user in 1..=2 {
        assert_eq!(buy(user).await.unwrap().status().as_u16(), 202);
    }

    redis.kill();
    let degraded = ready().await;
    assert_eq!(degraded.status().as_u16(), 200, "the database still serves");
    let body: Value = degraded.json().await.unwrap();
    assert_eq!(
        (body["status"].as_str(), body["gate"]["status"].as_str()),
        (Some("degraded"), Some("degraded"))
    );

    // The database alone decides: exactly the two units left are sold, never a third.
    let mut statuses = Vec::new();
    for user in 3..=6 {
        let res = buy(user).await.unwrap();
        let status = res.status().as_u16();
        let code = res.json::<Value>().await.unwrap()["code"].clone();
        statuses.push((status, code));
    }
    let sold = statuses.iter().filter(|(s, _)| *s == 202).count();
    let refused = statuses
        .iter()
        .filter(|(s, c)| *s == 409 && c == "SOLD_OUT")
        .count();
    assert_eq!((sold, refused), (2, 2), "{statuses:?}");
    // A replay of an order made while Redis was up still answers.
    let replay = buy(1).await.unwrap();
    assert_eq!(replay.status().as_u16(), 202);
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    let stock: Value = seller(client.get(format!("{base}/products/{}", product["productId"])))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stock["stockQuantity"], 6);
    let recon: Value = seller(client.get(format!(
        "{base}/limited-drops/{}/reconciliation",
        drop["dropId"]
    )))
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        (recon["soldQuantity"].as_i64(), recon["oversold"].as_bool()),
        (Some(4), Some(false))
    );
    assert!(
        recon["gateRemaining"].is_null(),
        "the gate is unreachable: {recon}"
    );
}
