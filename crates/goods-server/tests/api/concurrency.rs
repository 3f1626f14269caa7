use crate::helpers::TestApp;
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

/// The design document's scenario: a drop of 100, 500 buyers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_buyers_get_exactly_one_hundred_units() {
    // The write wait and the database bounds are long: this test is about exact counts, not
    // throttling or 503s (a loaded CI machine once turned a slow pool acquire into a 503
    // here; the bounds themselves are tested in faults.rs).
    let app = TestApp::spawn_with(&[
        ("DB_WRITE_WAIT_MS", "60000"),
        ("DB_ACQUIRE_TIMEOUT_MS", "10000"),
        ("DB_TX_TIMEOUT_MS", "10000"),
    ])
    .await;
    let (product, drop) = app.open_drop(300, 100, 1).await;
    let url = format!("{}/limited-drops/{drop}/orders", app.address);
    let requests = (1..=500).map(|user: i64| {
        let (client, url) = (app.client.clone(), url.clone());
        tokio::spawn(async move {
            let res = client
                .post(url)
                .header("X-User-Id", user.to_string())
                .header("Idempotency-Key", format!("buy-{user}"))
                .json(&json!({"quantity": 1}))
                .send()
                .await
                .unwrap();
            let status = res.status();
            let body: serde_json::Value = res.json().await.unwrap();
            (status, body)
        })
    });
    let results: Vec<_> = join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let accepted = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::ACCEPTED)
        .count();
    let sold_out = results
        .iter()
        .filter(|(s, b)| *s == StatusCode::CONFLICT && b["code"] == "SOLD_OUT")
        .count();
    assert_eq!(
        (accepted, sold_out),
        (100, 400),
        "{:?}",
        results
            .iter()
            .find(|(s, b)| *s != StatusCode::ACCEPTED && b["code"] != "SOLD_OUT")
    );
    let mut order_ids: Vec<_> = results
        .iter()
        .filter_map(|(_, b)| b["orderId"].as_i64())
        .collect();
    order_ids.sort_unstable();
    order_ids.dedup();
    assert_eq!(order_ids.len(), 100, "every success is a distinct order");
    assert_eq!(app.stock(product).await, 200);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(recon["soldQuantity"], 100);
    assert_eq!(recon["oversold"], false);
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (
            stats["successCount"].as_i64(),
            stats["soldOutRejectCount"].as_i64()
        ),
        (Some(100), Some(400))
    );
}
