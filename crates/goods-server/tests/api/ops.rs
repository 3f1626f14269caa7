use crate::helpers::{SELLER, TestApp, body, gate_on, problem, series_value};
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_answer() {
    let app = TestApp::spawn().await;
    assert_eq!(
        body(app.get("/health/live", None).await).await["status"],
        "up"
    );
    let ready = body(app.get("/health/ready", None).await).await;
    assert_eq!(ready["status"], "up");
    assert_eq!(ready["database"], "up");
    assert_eq!(
        ready["gate"]["status"],
        if gate_on() { "up" } else { "off" }
    );
    // The probes answer on both listeners; /metrics only on the ops listener.
    for path in ["/health/live", "/health/ready"] {
        let res = app
            .client
            .get(format!("{}{path}", app.ops))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path} on the ops listener");
    }
    problem(app.get("/metrics", None).await, 404, "NOT_FOUND").await;
    let nothing_else = app
        .client
        .get(format!("{}/limited-drops/1", app.ops))
        .send()
        .await
        .unwrap();
    problem(nothing_else, 404, "NOT_FOUND").await;
    let text = app.metrics().await;
    assert!(
        text.contains(
            "http_requests_total{method=\"GET\",route=\"/health/live\",status=\"200\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("db_write_slots_available 8"), "{text}");
    // The counters alerts watch exist at zero from the start, so their first increase shows.
    // The pool's state at the scrape: its bound, connections by state, nobody waiting.
    let max = series_value(&text, "db_pool_max_connections").unwrap_or_default();
    assert!(max >= 1.0, "{text}");
    let in_use = series_value(&text, "db_pool_connections{state=\"in_use\"}").unwrap();
    let idle = series_value(&text, "db_pool_connections{state=\"idle\"}").unwrap();
    assert!(in_use + idle <= max, "{in_use} + {idle} > {max}");
    assert_eq!(series_value(&text, "db_pool_waiting"), Some(0.0), "{text}");
    for series in [
        "oversell_events_total 0",
        "gate_oversell_events_total 0",
        "payment_events_total{outcome=\"REFUND_REQUIRED\"} 0",
        "payment_events_total{outcome=\"AMOUNT_MISMATCH\"} 0",
    ] {
        assert!(text.lines().any(|l| l == series), "{series}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_request_id_echoed_or_generated() {
    let app = TestApp::spawn().await;
    let echoed = app
        .client
        .get(format!("{}/health/live", app.address))
        .header("X-Request-Id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["X-Request-Id"], "abc-123");
    let generated = app.get("/nowhere", None).await;
    assert_eq!(generated.headers()["X-Request-Id"].len(), 36);
    problem(generated, 404, "NOT_FOUND").await;
    let wrong_method = app
        .client
        .delete(format!("{}/limited-drops/1", app.address))
        .send()
        .await
        .unwrap();
    problem(wrong_method, 405, "METHOD_NOT_ALLOWED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_and_reconciliation_are_for_sellers() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 10, 1).await;
    for path in [
        format!("/limited-drops/{drop}/stats"),
        format!("/limited-drops/{drop}/reconciliation"),
    ] {
        problem(app.get(&path, Some((7, "buyer"))).await, 403, "FORBIDDEN").await;
        problem(app.get(&path, None).await, 401, "UNAUTHENTICATED").await;
        assert_eq!(
            app.get(&path, Some((SELLER, "seller"))).await.status(),
            StatusCode::OK
        );
    }
    problem(
        app.get("/limited-drops/777/stats", Some((SELLER, "seller")))
            .await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(recon["limitedQuantity"], 10);
    assert_eq!(recon["oversold"], false);
    if gate_on() {
        assert_eq!(
            (recon["gateRemaining"].as_i64(), recon["drift"].as_i64()),
            (Some(10), Some(0))
        );
    } else {
        assert!(recon["gateRemaining"].is_null() && recon["drift"].is_null());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_the_framework_raises_are_problems_too() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 1).await;
    let huge = format!("{{\"quantity\":1,\"pad\":\"{}\"}}", "x".repeat(100 * 1024));
    let res = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/orders"),
            Some((7, "buyer")),
        )
        .header("Idempotency-Key", "big")
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert!(res.headers().contains_key("X-Request-Id"));
    problem(res, 413, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(app.stock(product).await, 10, "nothing was bought");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_http_methods_add_no_metric_series() {
    let app = TestApp::spawn().await;
    // Series of the request counter (the duration histogram has the same label sets).
    let series = |text: String| {
        text.lines()
            .filter(|l| l.starts_with("http_requests_total{"))
            .count()
    };
    let send = |name: &str| {
        app.request(
            reqwest::Method::from_bytes(name.as_bytes()).unwrap(),
            "/products",
            None,
        )
        .send()
    };
    send("FOO1").await.unwrap();
    let after_one = series(app.metrics().await);
    send("FOO2").await.unwrap();
    send("FOO3").await.unwrap();
    let text = app.metrics().await;
    assert!(!text.contains("FOO"), "{text}");
    assert!(
        text.contains("http_requests_total{method=\"OTHER\",route=\"/products\",status=\"405\"} 3"),
        "{text}"
    );
    // Reading /metrics on the ops listener adds no series of the API's.
    assert_eq!(series(text), after_one);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_405_names_the_methods_the_resource_allows() {
    let app = TestApp::spawn().await;
    for (method, path, allow) in [
        (reqwest::Method::DELETE, "/products", "POST"),
        (reqwest::Method::GET, "/limited-drops/1/orders", "POST"),
        (reqwest::Method::PUT, "/health/live", "GET"),
        (reqwest::Method::GET, "/payments/events", "POST"),
    ] {
        let res = app.request(method, path, None).send().await.unwrap();
        assert_eq!(res.headers()["allow"], allow, "{path}");
        problem(res, 405, "METHOD_NOT_ALLOWED").await;
    }
    let res = app
        .client
        .post(format!("{}/metrics", app.ops))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["allow"], "GET");
    problem(res, 405, "METHOD_NOT_ALLOWED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_drop_shows_in_the_outcome_series_and_the_histograms() {
    let app = TestApp::spawn_with(&[("DB_WRITE_PERMITS", "1"), ("DB_WRITE_WAIT_MS", "50")]).await;
    let (_, later) = app
        .drop_with(5, 5, 1, time::Duration::hours(1), time::Duration::hours(2))
        .await;
    let (_, drop) = app.open_drop(10, 3, 1).await;
    problem(app.purchase(later, 1, "early", 1).await, 425, "TOO_EARLY").await;
    assert_eq!(app.purchase(drop, 1, "a", 1).await.status(), 202);
    assert_eq!(app.purchase(drop, 1, "a", 1).await.status(), 202); // the replay
    // A purchase holding the only write slot makes the next admitted one THROTTLED.
    let lock = app.lock_drop(drop).await;
    let slow = app.purchase_in_background(drop, 2, "b");
    app.until_write_slots_available(0).await;
    problem(app.purchase(drop, 3, "c", 1).await, 429, "THROTTLED").await;
    lock.release().await;
    assert_eq!(slow.await.unwrap().status(), 202);
    assert_eq!(app.purchase(drop, 4, "d", 1).await.status(), 202);
    problem(app.purchase(drop, 5, "e", 1).await, 409, "SOLD_OUT").await;

    let text = app.metrics().await;
    let outcome = |code: &str| {
        series_value(
            &text,
            &format!("purchase_outcomes_total{{code=\"{code}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(
        [
            outcome("SUCCESS"),
            outcome("REPLAYED"),
            outcome("TOO_EARLY"),
            outcome("THROTTLED"),
            outcome("SOLD_OUT"),
        ],
        [3.0, 1.0, 1.0, 1.0, 1.0],
        "{text}"
    );
    // Every purchase request was timed, and both orders' admission-to-commit.
    let purchases = "method=\"POST\",route=\"/limited-drops/{dropId}/orders\"";
    let timed: f64 = [202, 425, 429, 409]
        .iter()
        .map(|status| {
            series_value(
                &text,
                &format!("http_request_duration_seconds_count{{{purchases},status=\"{status}\"}}"),
            )
            .unwrap_or(0.0)
        })
        .sum();
    assert_eq!(timed, 7.0, "{text}");
    assert_eq!(
        series_value(&text, "purchase_admission_to_commit_seconds_count"),
        Some(3.0),
        "{text}"
    );
    // The throttled purchase waited for a slot and gave up; the buffer is free again.
    assert!(
        series_value(&text, "db_write_wait_seconds_count").is_some_and(|n| n >= 4.0),
        "{text}"
    );
    assert_eq!(series_value(&text, "db_write_slots_in_use"), Some(0.0));
    assert_eq!(series_value(&text, "gate_degraded"), Some(0.0));
    assert!(series_value(&text, "db_transactions_total").is_some_and(|n| n >= 3.0));
}
