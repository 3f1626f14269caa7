use crate::helpers::{SELLER, TestApp, body, gate_on, problem};
use reqwest::{Method, StatusCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_is_readable_by_its_buyer_and_sellers_only() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 10, 1).await;
    let order = body(app.purchase(drop, 7, "k", 1).await).await;
    let path = format!("/orders/{}", order["orderId"]);
    assert_eq!(body(app.get(&path, Some((7, "buyer"))).await).await, order);
    assert_eq!(
        app.get(&path, Some((SELLER, "seller"))).await.status(),
        StatusCode::OK
    );
    problem(app.get(&path, None).await, 401, "UNAUTHENTICATED").await;
    // Another buyer's order answers exactly as an order that does not exist.
    let missing = problem(
        app.get("/orders/999999", Some((7, "buyer"))).await,
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
    let theirs = problem(
        app.get(&path, Some((8, "buyer"))).await,
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
    assert_eq!(theirs, missing);
    problem(
        app.get("/orders/zero", Some((7, "buyer"))).await,
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_gives_the_unit_back_to_stock_drop_and_buyer_exactly_once() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(5, 1, 1).await;
    let order = body(app.purchase(drop, 7, "k", 1).await).await;
    problem(app.purchase(drop, 8, "k", 1).await, 409, "SOLD_OUT").await;
    let cancel = format!("/orders/{}/cancel", order["orderId"]);
    // Another buyer's cancel: as if the order did not exist, and nothing changes.
    problem(
        app.request(Method::POST, &cancel, Some((8, "buyer")))
            .send()
            .await
            .unwrap(),
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
    for _ in 0..2 {
        let res = app
            .request(Method::POST, &cancel, Some((7, "buyer")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let cancelled = body(res).await;
        assert_eq!(cancelled["status"], "CANCELLED");
        assert_eq!(cancelled["orderId"], order["orderId"]);
    }
    assert_eq!(app.stock(product).await, 5, "one unit back, not two");
    assert_eq!(app.remaining(drop).await, 1);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(recon["soldQuantity"], 0);
    // The buyer's count went back too: the same buyer may buy again (with a new key).
    assert_eq!(
        app.purchase(drop, 7, "k2", 1).await.status(),
        StatusCode::ACCEPTED
    );
    problem(app.purchase(drop, 8, "k3", 1).await, 409, "SOLD_OUT").await;
    assert_eq!(app.stock(product).await, 4);
    problem(
        app.request(Method::POST, "/orders/424242/cancel", Some((7, "buyer")))
            .send()
            .await
            .unwrap(),
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_cancels_of_a_multi_unit_order_give_its_units_back_exactly_once() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 5, 3).await;
    let order = body(app.purchase(drop, 7, "big", 3).await).await;
    assert_eq!(app.remaining(drop).await, 2);
    let cancel = format!("/orders/{}/cancel", order["orderId"]);
    let cancels = (0..32).map(|_| {
        app.request(Method::POST, &cancel, Some((7, "buyer")))
            .send()
    });
    for res in futures::future::join_all(cancels).await {
        let res = res.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(body(res).await["status"], "CANCELLED");
    }
    // Stock, drop and the gate got the 3 units back once.
    assert_eq!(app.stock(product).await, 10);
    assert_eq!(app.remaining(drop).await, 5);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(recon["soldQuantity"], 0);
    if gate_on() {
        assert_eq!(
            (recon["gateRemaining"].as_i64(), recon["drift"].as_i64()),
            (Some(5), Some(0))
        );
    }
    // And the buyer's holding: the full limit again, not more.
    assert_eq!(
        app.purchase(drop, 7, "again", 3).await.status(),
        StatusCode::ACCEPTED
    );
    problem(
        app.purchase(drop, 7, "over", 1).await,
        403,
        "PER_USER_LIMIT_EXCEEDED",
    )
    .await;
}
