//! The order's life after the purchase: payment and its replay, expiry of unpaid orders (by the
//! healing pass and lazily), units coming back for other buyers, and the buyer's listing. Time
//! moves on the server's clock; nothing sleeps through a payment window.

use crate::helpers::{SELLER, TestApp, body, problem, series_value};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The default payment window (`PAYMENT_WINDOW_S`).
const WINDOW: time::Duration = time::Duration::seconds(600);

async fn bought(app: &TestApp, drop: i64, user: i64, key: &str) -> Value {
    let res = app.purchase(drop, user, key, 1).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    body(res).await
}

async fn stats(app: &TestApp, drop: i64) -> Value {
    app.seller_json(&format!("/limited-drops/{drop}/stats"))
        .await
}

/// 32 payment events for one order race its deadline (the clock crosses it while they run,
/// and a healing pass races them): one outcome, paid or expired, never both; every event that
/// lost to the expiry says so (`REFUND_REQUIRED`). Rounds alternate when the clock crosses
/// (at once, or after the payments had 20 ms), until each outcome has won a round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_payments_at_the_deadline_have_one_outcome() {
    let app = TestApp::spawn_with(&[("RECONCILE_INTERVAL_MS", "10")]).await;
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..20 {
        let head_start = if round % 2 == 0 { 0 } else { 20 };
        seen.insert(payment_race(&app, round, Duration::from_millis(head_start)).await);
        if seen.len() == 2 {
            return;
        }
    }
    panic!("20 rounds saw only {seen:?}");
}

/// One round: an order's 32 payments race its deadline, the clock crossing it `head_start`
/// after they were sent; how the order ended, once every invariant of that ending held.
async fn payment_race(app: &TestApp, round: usize, head_start: Duration) -> &'static str {
    let (product, drop) = app.open_drop(10, 5, 3).await;
    let res = app.purchase(drop, 7, &format!("big-{round}"), 3).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let order = body(res).await;
    let id = order["orderId"].as_i64().unwrap();
    app.clock.advance(WINDOW - time::Duration::milliseconds(5));
    let payments: Vec<_> = (0..32)
        .map(|i| {
            let provider = app.provider();
            let order = order.clone();
            let event = format!("evt_{round}_{i}");
            tokio::spawn(async move { provider.pay(&order, &event, "pi_1").await })
        })
        .collect();
    tokio::time::sleep(head_start).await;
    for _ in 0..10 {
        app.clock.advance(time::Duration::milliseconds(1));
        tokio::task::yield_now().await;
    }
    let mut outcomes: Vec<String> = Vec::new();
    for res in join_all(payments).await {
        let res = res.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        outcomes.push(body(res).await["outcome"].as_str().unwrap().to_owned());
    }
    let count = |o: &str| outcomes.iter().filter(|x| *x == o).count();
    let order = body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
    let stats = stats(app, drop).await;
    let ended = match order["status"].as_str().unwrap() {
        "PAID" => {
            assert_eq!(count("PAID"), 1, "exactly one payment won: {outcomes:?}");
            assert_eq!(
                count("PAID") + count("ALREADY_PAID") + count("REFUND_REQUIRED"),
                32
            );
            assert_eq!(stats["paidQuantity"], 3);
            assert_eq!(app.stock(product).await, 7);
            "PAID"
        }
        "EXPIRED" => {
            assert_eq!(
                count("REFUND_REQUIRED"),
                32,
                "no payment after the expiry: {outcomes:?}"
            );
            assert_eq!(stats["expiredQuantity"], 3);
            assert_eq!(app.stock(product).await, 10);
            "EXPIRED"
        }
        other => panic!("the order ended {other}"),
    };
    assert_eq!(
        stats["soldQuantity"].as_i64().unwrap(),
        stats["paidQuantity"].as_i64().unwrap() + stats["pendingQuantity"].as_i64().unwrap()
    );
    ended
}

/// The healing pass expires an unpaid order, and the unit reaches another buyer within one
/// interval, through the gate (whose sold-out flag comes down) or the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_unit_is_bought_by_another_buyer_within_one_heal_interval() {
    let app = TestApp::spawn_with(&[("RECONCILE_INTERVAL_MS", "200")]).await;
    let (_, drop) = app.open_drop(5, 1, 1).await;
    let order = bought(&app, drop, 7, "first").await;
    problem(app.purchase(drop, 8, "second", 1).await, 409, "SOLD_OUT").await;
    app.clock.advance(WINDOW);
    let expired_at = Instant::now();
    loop {
        let res = app
            .purchase(
                drop,
                8,
                &format!("try-{}", expired_at.elapsed().as_millis()),
                1,
            )
            .await;
        if res.status() == StatusCode::ACCEPTED {
            break;
        }
        problem(res, 409, "SOLD_OUT").await;
        assert!(
            expired_at.elapsed() < Duration::from_millis(200 + 400),
            "the unit did not come back within one heal interval"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let id = order["orderId"].as_i64().unwrap();
    let first = body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
    assert_eq!(first["status"], "EXPIRED");
    let late = app.pay(&first, "evt_late", "pi_late").await;
    assert_eq!(late.status(), StatusCode::OK);
    assert_eq!(body(late).await["outcome"], "REFUND_REQUIRED");
    problem(app.purchase(drop, 9, "third", 1).await, 409, "SOLD_OUT").await;
}

/// A drop sells out; 15 winners pay, 5 do not and expire; exactly 5 more orders sell it out
/// again among 30 racing buyers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_drop_with_five_expired_orders_sells_exactly_five_more() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(40, 20, 1).await;
    let mut views = Vec::new();
    for user in 1..=20 {
        views.push(bought(&app, drop, user, "a").await);
    }
    let orders: Vec<i64> = views
        .iter()
        .map(|o| o["orderId"].as_i64().unwrap())
        .collect();
    problem(app.purchase(drop, 21, "a", 1).await, 409, "SOLD_OUT").await;
    for (i, order) in views.iter().enumerate().take(15) {
        let res = app
            .pay(order, &format!("evt_{i}"), &format!("pi_{i}"))
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(body(res).await["outcome"], "PAID");
    }
    app.clock.advance(WINDOW);
    // The healing pass is off here: reading each unpaid order expires it (lazily), and its
    // unit goes back to the drop and the gate.
    for (i, id) in orders.iter().enumerate().skip(15) {
        let user = i64::try_from(i).unwrap() + 1;
        let order = body(
            app.get(&format!("/orders/{id}"), Some((user, "buyer")))
                .await,
        )
        .await;
        assert_eq!(order["status"], "EXPIRED");
    }
    let racers = (100..130).map(|user| {
        let app_request = app
            .request(
                Method::POST,
                &format!("/limited-drops/{drop}/orders"),
                Some((user, "buyer")),
            )
            .header("Idempotency-Key", "b")
            .json(&json!({ "quantity": 1 }));
        tokio::spawn(async move { app_request.send().await.unwrap() })
    });
    let mut accepted = 0;
    for res in join_all(racers).await {
        let res = res.unwrap();
        match res.status() {
            StatusCode::ACCEPTED => accepted += 1,
            _ => {
                problem(res, 409, "SOLD_OUT").await;
            }
        }
    }
    assert_eq!(accepted, 5);
    let stats = stats(&app, drop).await;
    assert_eq!(
        (
            stats["soldQuantity"].as_i64(),
            stats["paidQuantity"].as_i64(),
            stats["pendingQuantity"].as_i64(),
            stats["expiredQuantity"].as_i64(),
            stats["remaining"].as_i64()
        ),
        (Some(20), Some(15), Some(5), Some(5), Some(0))
    );
    assert_eq!(app.stock(product).await, 20);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(recon["oversold"], false);
    if recon["gateRemaining"].is_number() {
        assert_eq!(recon["drift"], 0, "{recon}");
    }
}

/// A buyer pages through their orders while they keep buying: every order that existed when
/// the first page was read appears exactly once, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_pages_without_duplicates_or_gaps_under_concurrent_purchases() {
    let app = TestApp::spawn().await;
    let (_, a) = app.open_drop(200, 100, 50).await;
    let (_, b) = app.open_drop(200, 100, 50).await;
    let mut before = Vec::new();
    for i in 0..25 {
        let drop = if i % 2 == 0 { a } else { b };
        before.push(
            bought(&app, drop, 7, &format!("k{i}")).await["orderId"]
                .as_i64()
                .unwrap(),
        );
        bought(&app, drop, 8, &format!("k{i}")).await;
    }
    let list = |query: String| {
        let app = &app;
        async move {
            let res = app
                .get(&format!("/orders?{query}"), Some((7, "buyer")))
                .await;
            assert_eq!(res.status(), StatusCode::OK, "{query}");
            body(res).await
        }
    };
    // More purchases while the pages are read.
    let buying = {
        let requests: Vec<_> = (0..20)
            .map(|i| {
                app.request(
                    Method::POST,
                    &format!("/limited-drops/{a}/orders"),
                    Some((7, "buyer")),
                )
                .header("Idempotency-Key", format!("later-{i}"))
                .json(&json!({ "quantity": 1 }))
            })
            .collect();
        tokio::spawn(async move {
            for request in requests {
                assert_eq!(request.send().await.unwrap().status(), StatusCode::ACCEPTED);
            }
        })
    };
    let mut seen = Vec::new();
    let mut page = list("limit=7".into()).await;
    let newest_at_start = page["items"][0]["orderId"].as_i64().unwrap();
    loop {
        for item in page["items"].as_array().unwrap() {
            assert_eq!(item["userId"], 7);
            seen.push(item["orderId"].as_i64().unwrap());
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => page = list(format!("limit=7&cursor={cursor}")).await,
            None => break,
        }
    }
    buying.await.unwrap();
    let unique: HashSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no duplicates");
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first");
    let expected: Vec<i64> = {
        let mut all: Vec<i64> = before.clone();
        all.retain(|id| *id <= newest_at_start);
        all.reverse();
        all
    };
    let from_before: Vec<i64> = seen
        .iter()
        .copied()
        .filter(|id| before.contains(id))
        .collect();
    assert_eq!(from_before, expected, "every earlier order, once, in order");

    // Filters, and bad parameters are refused with 400.
    let in_b = list(format!("dropId={b}&limit=100")).await;
    assert_eq!(in_b["items"].as_array().unwrap().len(), 12);
    assert!(in_b["nextCursor"].is_null());
    let paid = list("status=PAID".into()).await;
    assert!(paid["items"].as_array().unwrap().is_empty());
    for bad in [
        "limit=0",
        "limit=101",
        "limit=x",
        "cursor=abc",
        "cursor=-1",
        "status=SHIPPED",
        "dropId=0",
        "dropId=9007199254740992",
        "colour=red",
    ] {
        problem(
            app.get(&format!("/orders?{bad}"), Some((7, "buyer"))).await,
            400,
            "MALFORMED_REQUEST",
        )
        .await;
    }
    problem(
        app.get("/orders", Some((SELLER, "seller"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(app.get("/orders", None).await, 401, "UNAUTHENTICATED").await;
}

/// Past its deadline an order shows EXPIRED in every answer that carries it, whoever asks
/// first: a replay of its purchase, the buyer's listing, a cancel (refused); the healing pass
/// is off, so each of these expires it lazily.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overdue_order_is_expired_by_a_replay_a_listing_or_a_cancel() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 5, 1).await;
    let first = bought(&app, drop, 7, "a").await;
    let second = bought(&app, drop, 8, "a").await;
    let third = bought(&app, drop, 9, "a").await;
    app.clock.advance(WINDOW);

    let replay = app.purchase(drop, 7, "a", 1).await;
    assert_eq!(replay.status(), StatusCode::ACCEPTED);
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    let replay = body(replay).await;
    assert_eq!(
        (&replay["orderId"], &replay["status"]),
        (&first["orderId"], &json!("EXPIRED"))
    );

    let listed = body(app.get("/orders", Some((8, "buyer"))).await).await;
    assert_eq!(listed["items"][0]["orderId"], second["orderId"]);
    assert_eq!(listed["items"][0]["status"], "EXPIRED");

    let id = third["orderId"].as_i64().unwrap();
    let res = app
        .request(
            Method::POST,
            &format!("/orders/{id}/cancel"),
            Some((9, "buyer")),
        )
        .send()
        .await
        .unwrap();
    problem(res, 409, "ORDER_NOT_CANCELLABLE").await;

    let stats = stats(&app, drop).await;
    assert_eq!(
        (
            stats["expiredQuantity"].as_i64(),
            stats["soldQuantity"].as_i64()
        ),
        (Some(3), Some(0)),
        "{stats}"
    );
}

/// A drop's own payment window: shown in its view, fixed as each order's `expiresAt`, and the
/// order expires then, not at the service's default (`PAYMENT_WINDOW_S=600` here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drops_payment_window_fixes_its_orders_deadline() {
    let app = TestApp::spawn_with(&[("PAYMENT_WINDOW_S", "600")]).await;
    let product = app.create_product(5).await;
    let now = goods_domain::ports::Clock::now(app.clock.as_ref());
    let mut spec = json!({
        "productId": product,
        "openAt": crate::helpers::at(now - time::Duration::seconds(1)),
        "closeAt": crate::helpers::at(now + time::Duration::days(3)),
        "limitedQuantity": 2,
        "paymentWindowSeconds": 59,
    });
    let refused = problem(app.post_drop(&spec).await, 422, "VALIDATION_FAILED").await;
    assert_eq!(
        refused["errors"][0]["field"], "paymentWindowSeconds",
        "{refused}"
    );
    spec["paymentWindowSeconds"] = json!(86_400);
    let res = app.post_drop(&spec).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let drop = body(res).await;
    assert_eq!(drop["paymentWindowSeconds"], 86_400);
    let id = drop["dropId"].as_i64().unwrap();
    let order = body(app.purchase(id, 7, "k", 1).await).await;
    let created = time::OffsetDateTime::parse(
        order["createdAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let expires = time::OffsetDateTime::parse(
        order["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(expires - created, time::Duration::days(1), "{order}");
    let path = format!("/orders/{}", order["orderId"]);
    // Past the default ten minutes: still PENDING.
    app.clock.advance(time::Duration::minutes(11));
    let read = body(app.get(&path, Some((7, "buyer"))).await).await;
    assert_eq!(read["status"], "PENDING", "{read}");
    // At its own deadline: EXPIRED.
    app.clock.advance(time::Duration::days(1));
    let read = body(app.get(&path, Some((7, "buyer"))).await).await;
    assert_eq!(read["status"], "EXPIRED", "{read}");
    // A drop without one shows the service's.
    let (_, plain) = app.open_drop(1, 1, 1).await;
    let view = body(app.get(&format!("/limited-drops/{plain}"), None).await).await;
    assert_eq!(view["paymentWindowSeconds"], 600);
}

/// Two instances on the shared test Redis.
mod needs_redis {
    use super::*;

    /// Two instances on one Redis: the second has raised its sold-out flag (it answers SOLD_OUT
    /// without asking Redis); an expiry made through the first brings it down within a second, by
    /// the gate's restock message, well before the flag's own expiry.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_expiry_on_one_instance_brings_the_sold_out_flag_down_on_another_sharing_redis() {
        let (a, b) = TestApp::pair_on_shared_redis(&[]).await;
        let (_, drop) = a.open_drop(5, 1, 1).await;
        let order = bought(&a, drop, 7, "first").await;
        // b learns of the sell-out from Redis, then keeps answering it alone: its flag is seen
        // raised (the counter, shared by the two in-process instances, is b's: a never refused).
        let flags = |change: &'static str| {
            let b = &b;
            async move {
                let text = b.metrics().await;
                series_value(
                    &text,
                    &format!("gate_sold_out_flag_changes_total{{change=\"{change}\"}}"),
                )
                .unwrap_or(0.0)
            }
        };
        let mut i = 0;
        while flags("raised").await < 1.0 {
            problem(
                b.purchase(drop, 8, &format!("no-{i}"), 1).await,
                409,
                "SOLD_OUT",
            )
            .await;
            i += 1;
            assert!(i < 100, "b never raised its sold-out flag");
        }
        assert_eq!(flags("lowered").await, 0.0);
        a.clock.advance(WINDOW);
        let id = order["orderId"].as_i64().unwrap();
        let read = body(a.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
        assert_eq!(read["status"], "EXPIRED");
        let expired_at = Instant::now();
        loop {
            let res = b
                .purchase(
                    drop,
                    8,
                    &format!("yes-{}", expired_at.elapsed().as_millis()),
                    1,
                )
                .await;
            if res.status() == StatusCode::ACCEPTED {
                break;
            }
            problem(res, 409, "SOLD_OUT").await;
            assert!(
                expired_at.elapsed() < Duration::from_secs(1),
                "the other instance still answers SOLD_OUT a second after the expiry"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            flags("lowered").await >= 1.0,
            "the restock brought b's raised flag down before its expiry"
        );
    }
}
