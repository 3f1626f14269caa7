use crate::helpers::{SELLER, TestApp, body, gate_on, problem};
use reqwest::{Method, StatusCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_creates_a_pending_order_and_takes_the_stock() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(150, 100, 2).await;
    let res = app.purchase(drop, 7, "order-1", 2).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    assert!(res.headers().get("Idempotent-Replayed").is_none());
    let order = body(res).await;
    assert_eq!(order["status"], "PENDING");
    assert_eq!(
        (order["dropId"].as_i64(), order["productId"].as_i64()),
        (Some(drop), Some(product))
    );
    assert_eq!(
        (order["userId"].as_i64(), order["quantity"].as_i64()),
        (Some(7), Some(2))
    );
    assert!(order["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(app.stock(product).await, 148);
    assert_eq!(app.remaining(drop).await, 98);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_twice_replays_one_order_and_a_different_body_is_refused() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 3).await;
    let first = body(app.purchase(drop, 7, "same", 1).await).await;
    let again = app.purchase(drop, 7, "same", 1).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["Idempotent-Replayed"], "true");
    assert_eq!(body(again).await["orderId"], first["orderId"]);
    problem(
        app.purchase(drop, 7, "same", 2).await,
        422,
        "IDEMPOTENCY_KEY_REUSED",
    )
    .await;
    // Another buyer may use the same key: keys are per buyer.
    assert_eq!(
        app.purchase(drop, 8, "same", 1).await.status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(app.stock(product).await, 8);
}

type Identity = Option<(i64, &'static str)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_400_in_the_contracts_order_and_change_nothing() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 1).await;
    let path = format!("/limited-drops/{drop}/orders");
    let post =
        |user: Option<(i64, &'static str)>, key: Option<&'static str>, body: &'static str| {
            let mut req = app
                .request(Method::POST, &path, user)
                .body(body)
                .header("content-type", "application/json");
            if let Some(key) = key {
                req = req.header("Idempotency-Key", key);
            }
            req.send()
        };
    let long: &'static str = Box::leak("k".repeat(256).into_boxed_str());
    let buyer = Some((7, "buyer"));
    // (identity, Idempotency-Key, body, status, code)
    type Case = (
        Identity,
        Option<&'static str>,
        &'static str,
        u16,
        &'static str,
    );
    let cases: [Case; 8] = [
        (None, Some("k"), "{\"quantity\":1}", 401, "UNAUTHENTICATED"),
        (
            Some((SELLER, "seller")),
            Some("k"),
            "{\"quantity\":1}",
            403,
            "FORBIDDEN",
        ),
        (buyer, Some("k"), "{\"quantity\":", 400, "MALFORMED_REQUEST"),
        (
            buyer,
            Some("k"),
            "{\"quantity\":0}",
            422,
            "VALIDATION_FAILED",
        ),
        (
            buyer,
            Some("k"),
            "{\"quantity\":1.5}",
            400,
            "MALFORMED_REQUEST",
        ),
        (buyer, Some("k"), "[]", 400, "MALFORMED_REQUEST"),
        (
            buyer,
            None,
            "{\"quantity\":1}",
            400,
            "IDEMPOTENCY_KEY_REQUIRED",
        ),
        (
            buyer,
            Some(long),
            "{\"quantity\":1}",
            400,
            "IDEMPOTENCY_KEY_REQUIRED",
        ),
    ];
    for (user, key, body, status, code) in cases {
        problem(post(user, key, body).await.unwrap(), status, code).await;
    }
    problem(
        app.purchase(drop + 1000, 7, "k", 1).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    assert_eq!(app.stock(product).await, 10);
    assert_eq!(app.remaining(drop).await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_open_at_the_answer_is_425_with_open_at_and_nothing_is_touched() {
    let app = TestApp::spawn().await;
    let (product, drop) = app
        .drop_with(
            10,
            10,
            1,
            time::Duration::hours(1),
            time::Duration::hours(2),
        )
        .await;
    let res = app.purchase(drop, 7, "early", 1).await;
    let retry_after: u64 = res.headers()["Retry-After"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3500..=3600).contains(&retry_after), "{retry_after}");
    let problem = problem(res, 425, "TOO_EARLY").await;
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(problem["openAt"], view["openAt"]);
    assert_eq!(
        (app.stock(product).await, app.remaining(drop).await),
        (10, 10)
    );
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(stats["tooEarlyRejectCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_sold_out_every_buyer_gets_409_with_what_remains() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 3, 2).await;
    assert_eq!(
        app.purchase(drop, 1, "a", 2).await.status(),
        StatusCode::ACCEPTED
    );
    let partial = problem(app.purchase(drop, 2, "b", 2).await, 409, "SOLD_OUT").await;
    assert_eq!(partial["remaining"], 1);
    assert_eq!(
        app.purchase(drop, 2, "c", 1).await.status(),
        StatusCode::ACCEPTED
    );
    let none = problem(app.purchase(drop, 3, "d", 1).await, 409, "SOLD_OUT").await;
    assert_eq!(none["remaining"], 0);
    assert_eq!(app.stock(product).await, 7);
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(view["status"], "SOLD_OUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_past_the_per_user_limit_gets_403_with_the_limit() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 2).await;
    assert_eq!(
        app.purchase(drop, 7, "a", 1).await.status(),
        StatusCode::ACCEPTED
    );
    let over = problem(
        app.purchase(drop, 7, "b", 2).await,
        403,
        "PER_USER_LIMIT_EXCEEDED",
    )
    .await;
    assert_eq!(over["limit"], 2);
    assert_eq!(
        app.purchase(drop, 7, "c", 1).await.status(),
        StatusCode::ACCEPTED
    );
    problem(
        app.purchase(drop, 7, "d", 1).await,
        403,
        "PER_USER_LIMIT_EXCEEDED",
    )
    .await;
    assert_eq!(app.stock(product).await, 8);
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (
            stats["successCount"].as_i64(),
            stats["perUserLimitRejectCount"].as_i64()
        ),
        (Some(2), Some(2))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_close_at_new_purchases_are_409_closed_but_replays_still_answer() {
    let app = TestApp::spawn().await;
    let (_, drop) = app
        .drop_with(
            10,
            10,
            1,
            time::Duration::seconds(-1),
            time::Duration::milliseconds(2000),
        )
        .await;
    let first = body(app.purchase(drop, 7, "before-close", 1).await).await;
    app.clock.advance(time::Duration::milliseconds(2000));
    problem(app.purchase(drop, 8, "after-close", 1).await, 409, "CLOSED").await;
    let replay = app.purchase(drop, 7, "before-close", 1).await;
    assert_eq!(replay.status(), StatusCode::ACCEPTED);
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    assert_eq!(body(replay).await["orderId"], first["orderId"]);
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(stats["closedRejectCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_purchase_with_no_write_slot_in_time_is_429_and_gives_the_unit_back() {
    let app = TestApp::spawn_with(&[("DB_WRITE_PERMITS", "1"), ("DB_WRITE_WAIT_MS", "50")]).await;
    let (product, drop) = app.open_drop(10, 10, 1).await;
    let lock = app.lock_drop(drop).await;
    let first = app.purchase_in_background(drop, 1, "slow");
    app.until_write_slots_available(0).await;
    let throttled = app.purchase(drop, 2, "fast", 1).await;
    assert_eq!(throttled.headers()["Retry-After"], "1");
    problem(throttled, 429, "THROTTLED").await;
    lock.release().await;
    assert_eq!(first.await.unwrap().status(), StatusCode::ACCEPTED);
    assert_eq!(app.stock(product).await, 9);
    assert_eq!(app.remaining(drop).await, 9, "the throttled unit went back");
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(stats["throttledCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_the_first_request_is_in_flight_is_409_in_progress() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 1).await;
    let lock = app.lock_drop(drop).await;
    let first = app.purchase_in_background(drop, 1, "once");
    app.until_in_flight(drop, 9).await;
    if gate_on() {
        let retry = app.purchase(drop, 1, "once", 1).await;
        assert_eq!(retry.headers()["Retry-After"], "1");
        problem(retry, 409, "IDEMPOTENCY_KEY_IN_PROGRESS").await;
        lock.release().await;
        let created = body(first.await.unwrap()).await;
        let replay = body(app.purchase(drop, 1, "once", 1).await).await;
        assert_eq!(replay["orderId"], created["orderId"]);
    } else {
        // Without a gate nothing marks the key in flight: the retry queues behind the first
        // request in the database and replays its order.
        let retry = app.purchase_in_background(drop, 1, "once");
        lock.release().await;
        let created = body(first.await.unwrap()).await;
        let retry = retry.await.unwrap();
        assert_eq!(retry.status(), StatusCode::ACCEPTED);
        assert_eq!(body(retry).await["orderId"], created["orderId"]);
    }
    assert_eq!(app.stock(product).await, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sell_out_refusals_send_no_database_statement_unless_there_is_no_gate() {
    // The background refresh of flags and drops sends statements of its own every
    // DROP_REFRESH_MS; this counts only what purchases send, so it is kept out of the window.
    let app = TestApp::spawn_with(&[("DROP_REFRESH_MS", "3600000")]).await;
    let (_, drop) = app.open_drop(10, 2, 1).await;
    for user in 1..=2 {
        assert_eq!(
            app.purchase(drop, user, "k", 1).await.status(),
            StatusCode::ACCEPTED
        );
    }
    problem(app.purchase(drop, 3, "k", 1).await, 409, "SOLD_OUT").await;
    // The new drop's notice runs one refresh too: let it finish before counting.
    let before = app.db_statements_settled().await;
    for user in 10..60 {
        problem(app.purchase(drop, user, "k", 1).await, 409, "SOLD_OUT").await;
    }
    let sent = app.db_statements().await - before;
    if gate_on() {
        assert_eq!(sent, 0, "the gate answered every refusal");
    } else {
        // Strategy B: the database decides every purchase, refusals included.
        assert!(sent >= 50, "{sent}");
    }
}
