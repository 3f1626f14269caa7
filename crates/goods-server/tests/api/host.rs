//! DNS rebinding: the embedded mode answers loopback names only.

use crate::helpers::{TestApp, problem};
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_mode_answers_421_to_a_foreign_host_and_the_others_serve_it() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(5, 5, 1).await;
    let view = format!("{}/limited-drops/{drop}", app.address);
    let with_host = |host: &'static str| app.client.get(&view).header("Host", host).send();
    assert_eq!(
        with_host("localhost").await.unwrap().status(),
        StatusCode::OK
    );
    let foreign = with_host("rebind.example").await.unwrap();
    if app.backend.url().starts_with("sqlite") {
        // Embedded: SQLite on loopback.
        let body = problem(foreign, 421, "MISDIRECTED_REQUEST").await;
        assert!(
            body["detail"].as_str().unwrap().contains("loopback"),
            "{body}"
        );
        // Nothing behind it runs: a purchase under that name changes nothing either.
        let buy = app
            .client
            .post(format!("{}/limited-drops/{drop}/orders", app.address))
            .header("Host", "rebind.example")
            .header("X-User-Id", "7")
            .header("Idempotency-Key", "k")
            .json(&serde_json::json!({"quantity": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(buy.status(), StatusCode::MISDIRECTED_REQUEST);
        let recon = app
            .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
            .await;
        assert_eq!(recon["soldQuantity"], 0);
    } else {
        // A server on MySQL is not the embedded mode: its names are the deployment's.
        assert_eq!(foreign.status(), StatusCode::OK);
    }
}
