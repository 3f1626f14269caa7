//! Operating a drop: pause, resume and close, by the owning seller or an admin, seen by every
//! instance.

use crate::helpers::{SELLER, TestApp, at, body, problem, series_value};
use reqwest::{Method, Response, StatusCode};
use serde_json::json;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

const OTHER_SELLER: i64 = 900_001;
const ADMIN: i64 = 900_100;

async fn operate(app: &TestApp, drop: i64, op: &str, user: (i64, &str)) -> Response {
    app.request(
        Method::POST,
        &format!("/limited-drops/{drop}/{op}"),
        Some(user),
    )
    .send()
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_drop_refuses_purchases_until_it_is_resumed() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 5, 1).await;
    problem(
        operate(&app, drop, "pause", (OTHER_SELLER, "seller")).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    problem(
        operate(&app, drop, "pause", (7, "buyer")).await,
        403,
        "FORBIDDEN",
    )
    .await;

    let res = operate(&app, drop, "pause", (SELLER, "seller")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["paused"], true);
    let refused = app.purchase(drop, 1, "p-1", 1).await;
    assert!(refused.headers().contains_key("retry-after"));
    problem(refused, 409, "DROP_PAUSED").await;
    assert_eq!(app.remaining(drop).await, 5, "a paused drop sells nothing");

    let res = operate(&app, drop, "resume", (ADMIN, "admin")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["paused"], false);
    assert_eq!(
        app.purchase(drop, 1, "p-1", 1).await.status(),
        StatusCode::ACCEPTED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_ends_the_sale_keeps_replays_and_frees_the_product_for_a_new_drop() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 5, 1).await;
    let first = app.purchase(drop, 1, "c-1", 1).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let order = body(first).await["orderId"].clone();

    problem(
        operate(&app, drop, "close", (OTHER_SELLER, "seller")).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    let res = operate(&app, drop, "close", (SELLER, "seller")).await;
    assert_eq!(res.status(), StatusCode::OK);
    let closed = body(res).await;
    assert_eq!(closed["status"], "CLOSED");
    // Closing again answers the same, and is not counted again.
    let again = body(operate(&app, drop, "close", (ADMIN, "admin")).await).await;
    assert_eq!(again, closed);
    let metrics = app.metrics().await;
    assert_eq!(
        series_value(&metrics, r#"drop_operations_total{operation="closed"}"#),
        Some(1.0)
    );

    problem(app.purchase(drop, 2, "c-2", 1).await, 409, "CLOSED").await;
    // A replay still wins over CLOSED.
    let replay = app.purchase(drop, 1, "c-1", 1).await;
    assert_eq!(replay.status(), StatusCode::ACCEPTED);
    assert_eq!(body(replay).await["orderId"], order);
    // Pausing a closed drop is refused.
    problem(
        operate(&app, drop, "pause", (SELLER, "seller")).await,
        409,
        "CLOSED",
    )
    .await;
    // Units never sold were never taken from the stock: it is the initial stock less the sale.
    assert_eq!(app.stock(product).await, 9);
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(view["status"], "CLOSED");
    // The product is free for a new drop.
    let now = OffsetDateTime::now_utc();
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(now - time::Duration::seconds(1)),
            "closeAt": at(now + time::Duration::hours(1)),
            "limitedQuantity": 5,
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_drop_can_be_closed_before_it_opens() {
    let app = TestApp::spawn().await;
    let (_, drop) = app
        .drop_with(10, 5, 1, time::Duration::hours(1), time::Duration::hours(2))
        .await;
    let res = operate(&app, drop, "close", (SELLER, "seller")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["status"], "CLOSED");
    problem(app.purchase(drop, 2, "s-1", 1).await, 409, "CLOSED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_refuses_a_closed_drop_at_once_and_sees_a_pause_within_a_second() {
    let a = TestApp::spawn().await;
    let b = a.sibling().await;
    let (_, drop) = a.open_drop(10, 5, 1).await;
    // b has the drop cached (and, with a gate, admits through it).
    assert_eq!(
        b.purchase(drop, 1, "f-1", 1).await.status(),
        StatusCode::ACCEPTED
    );

    let paused_at = Instant::now();
    assert_eq!(
        operate(&a, drop, "pause", (SELLER, "seller"))
            .await
            .status(),
        StatusCode::OK
    );
    loop {
        let res = b.purchase(drop, 2, "f-2", 1).await;
        if res.status() == StatusCode::CONFLICT {
            problem(res, 409, "DROP_PAUSED").await;
            break;
        }
        assert_eq!(
            res.status(),
            StatusCode::ACCEPTED,
            "before the pause arrives"
        );
        assert!(
            paused_at.elapsed() < Duration::from_secs(1),
            "the pause did not reach the other instance within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resumed_at = Instant::now();
    assert_eq!(
        operate(&a, drop, "resume", (SELLER, "seller"))
            .await
            .status(),
        StatusCode::OK
    );
    loop {
        let res = b.purchase(drop, 2, "f-2", 1).await;
        if res.status() == StatusCode::ACCEPTED {
            break;
        }
        problem(res, 409, "DROP_PAUSED").await;
        assert!(
            resumed_at.elapsed() < Duration::from_secs(1),
            "the resume did not reach the other instance within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The close is exact: the other instance sells nothing after it, cached state or not.
    assert_eq!(
        operate(&a, drop, "close", (SELLER, "seller"))
            .await
            .status(),
        StatusCode::OK
    );
    problem(b.purchase(drop, 3, "f-3", 1).await, 409, "CLOSED").await;
    let sold = body(
        a.get(
            &format!("/limited-drops/{drop}/stats"),
            Some((SELLER, "seller")),
        )
        .await,
    )
    .await["soldQuantity"]
        .as_i64()
        .unwrap();
    assert_eq!(sold, 2, "buyers 1 and 2, nothing after the close");
}
