//! A drop in sizes over HTTP, in every mode the suite runs in: each size sells exactly its
//! units, a buyer's limit counts across sizes, and a sold-out size answers for itself.

use crate::helpers::{SELLER, TestApp, at, body, problem};
use futures::future::join_all;
use goods_domain::ports::Clock as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use test_support::json::pick;

/// A product in `stocks` variants (sku, stock), as the seller; its id.
pub(crate) async fn product_in_sizes(app: &TestApp, stocks: &[(&str, i64)]) -> i64 {
    let variants: Vec<Value> = stocks
        .iter()
        .map(|(sku, stock)| json!({"sku": sku, "label": format!("Size {sku}"), "stockQuantity": stock}))
        .collect();
    let res = app
        .request(reqwest::Method::POST, "/products", Some((SELLER, "seller")))
        .json(&json!({"name": "Sneaker", "variants": variants}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    body(res).await["productId"].as_i64().unwrap()
}

/// A drop's `variants` as the seller writes them: `sizes` (sku, units).
pub(crate) fn drop_variants(sizes: &[(&str, i64)]) -> Value {
    sizes
        .iter()
        .map(|(sku, units)| json!({"sku": sku, "limitedQuantity": units}))
        .collect()
}

/// An open drop of `sizes` (sku, units) on `product`, `per_user` units per buyer.
async fn drop_in_sizes(app: &TestApp, product: i64, sizes: &[(&str, i64)], per_user: i64) -> i64 {
    let now = app.clock.now();
    let variants = drop_variants(sizes);
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(now - time::Duration::seconds(1)),
            "closeAt": at(now + time::Duration::hours(1)),
            "variants": variants,
            "perUserLimit": per_user,
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await;
    assert_eq!(
        created["limitedQuantity"],
        sizes.iter().map(|(_, n)| n).sum::<i64>(),
        "the drop's total is its sizes' sum"
    );
    created["dropId"].as_i64().unwrap()
}

/// POST /limited-drops/{drop}/orders with `body`, as buyer `user` with `key`.
async fn buy(app: &TestApp, drop: i64, user: i64, key: &str, body: &Value) -> reqwest::Response {
    app.request(
        reqwest::Method::POST,
        &format!("/limited-drops/{drop}/orders"),
        Some((user, "buyer")),
    )
    .header("Idempotency-Key", key)
    .json(body)
    .send()
    .await
    .unwrap()
}

fn of_size(sku: &str) -> Value {
    json!({"quantity": 1, "sku": sku})
}

/// Each variant's stock, by sku.
async fn variant_stocks(app: &TestApp, product: i64) -> HashMap<String, i64> {
    app.seller_json(&format!("/products/{product}")).await["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["sku"].as_str().unwrap().to_owned(),
                v["stockQuantity"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// 120 buyers each race one purchase of every size at once (S, M and L), with a limit of 2
/// across sizes: S sells exactly 10, M 20 and L 5, nobody gets more than 2, every refusal of
/// a size names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_buyers_sell_each_size_exactly_and_none_passes_the_limit_across_sizes() {
    let app = TestApp::spawn_with(&[
        ("DB_WRITE_WAIT_MS", "60000"),
        ("DB_ACQUIRE_TIMEOUT_MS", "10000"),
        ("DB_TX_TIMEOUT_MS", "10000"),
    ])
    .await;
    let product = product_in_sizes(&app, &[("S", 40), ("M", 40), ("L", 40)]).await;
    let drop = drop_in_sizes(&app, product, &[("S", 10), ("M", 20), ("L", 5)], 2).await;
    let url = format!("{}/limited-drops/{drop}/orders", app.address);
    let requests = (1..=120_i64).flat_map(|user| {
        ["S", "M", "L"].map(|sku| {
            let (client, url) = (app.client.clone(), url.clone());
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .header("X-User-Id", user.to_string())
                    .header("Idempotency-Key", format!("buy-{user}-{sku}"))
                    .json(&of_size(sku))
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                let body: Value = res.json().await.unwrap();
                (user, sku, status, body)
            })
        })
    });
    let results: Vec<_> = join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let mut sold: HashMap<&str, usize> = HashMap::new();
    let mut held: HashMap<i64, usize> = HashMap::new();
    let mut sold_out: HashMap<&str, usize> = HashMap::new();
    let mut limited: HashMap<&str, usize> = HashMap::new();
    for (user, sku, status, body) in &results {
        match (status.as_u16(), body["code"].as_str()) {
            (202, _) => {
                assert_eq!(body["sku"], *sku, "{body}");
                *sold.entry(sku).or_default() += 1;
                *held.entry(*user).or_default() += 1;
            }
            (409, Some("SOLD_OUT")) => {
                assert_eq!(body["sku"], *sku, "{body}");
                *sold_out.entry(sku).or_default() += 1;
            }
            (403, Some("PER_USER_LIMIT_EXCEEDED")) => *limited.entry(sku).or_default() += 1,
            _ => panic!("buyer {user}, {sku}: {status} {body}"),
        }
    }
    assert_eq!(
        (sold["S"], sold["M"], sold["L"]),
        (10, 20, 5),
        "each size sells exactly its units"
    );
    assert!(
        held.values().all(|units| *units <= 2),
        "a buyer holds at most 2 across sizes: {held:?}"
    );
    assert_eq!(
        variant_stocks(&app, product).await,
        HashMap::from([("S".into(), 30), ("M".into(), 20), ("L".into(), 35)])
    );
    assert_eq!(app.stock(product).await, 85);
    let recon = app
        .seller_json(&format!("/limited-drops/{drop}/reconciliation"))
        .await;
    assert_eq!(
        (recon["soldQuantity"].clone(), recon["oversold"].clone()),
        (json!(35), json!(false))
    );
    assert_eq!(app.remaining(drop).await, 0);
    // Each size's view, stats and reconciliation.
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(view["status"], "SOLD_OUT", "every size is sold out");
    assert_eq!(
        view["variants"],
        json!([
            {"sku": "S", "label": "Size S", "limitedQuantity": 10, "remaining": 0, "status": "SOLD_OUT"},
            {"sku": "M", "label": "Size M", "limitedQuantity": 20, "remaining": 0, "status": "SOLD_OUT"},
            {"sku": "L", "label": "Size L", "limitedQuantity": 5, "remaining": 0, "status": "SOLD_OUT"},
        ])
    );
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    // Each size's counters are its own answers, exactly: its 202s, its SOLD_OUTs and its
    // refusals for the limit across sizes; the drop's are their sums.
    let size_stats = |sku: &str, units: usize| {
        json!({
            "sku": sku,
            "successCount": sold[sku],
            "soldOutRejectCount": sold_out.get(sku).copied().unwrap_or(0),
            "tooEarlyRejectCount": 0,
            "closedRejectCount": 0,
            "perUserLimitRejectCount": limited.get(sku).copied().unwrap_or(0),
            "throttledCount": 0,
            "soldQuantity": units,
            "remaining": 0,
            "pendingQuantity": units,
            "paidQuantity": 0,
            "cancelledQuantity": 0,
            "expiredQuantity": 0,
        })
    };
    assert_eq!(
        stats["variants"],
        json!([size_stats("S", 10), size_stats("M", 20), size_stats("L", 5)])
    );
    assert_eq!(
        (
            stats["successCount"].clone(),
            stats["soldOutRejectCount"].clone(),
            stats["perUserLimitRejectCount"].clone()
        ),
        (
            json!(35),
            json!(sold_out.values().sum::<usize>()),
            json!(limited.values().sum::<usize>())
        )
    );
    assert_eq!(
        pick(&recon["variants"], &["sku", "soldQuantity", "oversold"]),
        json!([["S", 10, false], ["M", 20, false], ["L", 5, false]])
    );
    // The events: 35 orders placed, each size's sell-out once, the drop's once, after its last
    // size's; numbered 1..=40 with no gap.
    let events = crate::events::events_of(&app, drop).await;
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(
        (
            count("goods.order.placed"),
            count("goods.variant.sold_out"),
            count("goods.drop.sold_out")
        ),
        (35, 3, 1)
    );
    let mut sold_out_sizes: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "goods.variant.sold_out")
        .map(|e| e["subject"].as_str().unwrap().to_owned())
        .collect();
    sold_out_sizes.sort();
    assert_eq!(
        sold_out_sizes,
        ["L", "M", "S"].map(|s| format!("drops/{drop}/variants/{s}"))
    );
    let last_size = events
        .iter()
        .rposition(|e| e["type"] == "goods.variant.sold_out")
        .unwrap();
    assert_eq!(events[last_size + 1]["type"], "goods.drop.sold_out");
    assert_eq!(
        events
            .iter()
            .map(|e| e["dropseq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=40).collect::<Vec<u64>>()
    );
}

/// A sold-out size answers 409 with its sku while another sells; the same key for another
/// size is a reuse; a cancel or an expiry gives the unit back to its own size, which sells again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_size_answers_for_itself_and_a_cancel_or_expiry_gives_back_to_its_own_size() {
    let app = TestApp::spawn().await;
    let product = product_in_sizes(&app, &[("US-9", 5), ("US-10", 5)]).await;
    let drop = drop_in_sizes(&app, product, &[("US-9", 1), ("US-10", 2)], 3).await;
    let other = buy(&app, drop, 2, "b", &of_size("US-10")).await;
    assert_eq!(other.status(), StatusCode::ACCEPTED);
    let other_order = body(other).await;
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(
        pick(&view["variants"], &["sku", "remaining", "status"]),
        json!([["US-9", 1, "OPEN"], ["US-10", 1, "OPEN"]])
    );
    // While US-9 still sells (a sold-out size may answer a reused key as sold out: docs/api.md).
    problem(
        buy(&app, drop, 2, "b", &of_size("US-9")).await,
        422,
        "IDEMPOTENCY_KEY_REUSED",
    )
    .await;
    let again = buy(&app, drop, 2, "b", &of_size("US-10")).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["Idempotent-Replayed"], "true");
    let first = buy(&app, drop, 1, "a", &of_size("US-9")).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first = body(first).await;
    assert_eq!(
        (first["sku"].clone(), first["label"].clone()),
        (json!("US-9"), json!("Size US-9"))
    );
    let read = body(
        app.get(&format!("/orders/{}", first["orderId"]), Some((1, "buyer")))
            .await,
    )
    .await;
    assert_eq!(read, first, "the order reads as it was answered");
    let mine = body(app.get("/orders", Some((1, "buyer"))).await).await;
    assert_eq!(mine["items"][0]["label"], "Size US-9");
    let refused = problem(
        buy(&app, drop, 2, "a", &of_size("US-9")).await,
        409,
        "SOLD_OUT",
    )
    .await;
    assert_eq!(
        (refused["sku"].clone(), refused["remaining"].clone()),
        (json!("US-9"), json!(0))
    );
    let more = buy(&app, drop, 2, "c", &of_size("US-10")).await;
    assert_eq!(more.status(), StatusCode::ACCEPTED, "US-10 still sells");
    problem(
        buy(&app, drop, 3, "a", &of_size("US-10")).await,
        409,
        "SOLD_OUT",
    )
    .await;
    assert_eq!(app.remaining(drop).await, 0);
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(view["status"], "SOLD_OUT", "every size is");
    // The events carry the sizes: the drop's, and each order's.
    let events = crate::events::events_of(&app, drop).await;
    assert_eq!(events[0]["type"], "goods.drop.created");
    assert_eq!(
        events[0]["data"]["variants"],
        json!([{"sku": "US-9", "limitedQuantity": 1}, {"sku": "US-10", "limitedQuantity": 2}])
    );
    let placed: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "goods.order.placed")
        .map(|e| (e["data"]["orderId"].clone(), e["data"]["sku"].clone()))
        .collect();
    assert_eq!(placed.len(), 3, "{events:?}");
    assert!(
        placed.contains(&(first["orderId"].clone(), json!("US-9"))),
        "{placed:?}"
    );
    let cancelled = app.cancel(&first, 1).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    assert_eq!(
        variant_stocks(&app, product).await,
        HashMap::from([("US-9".into(), 5), ("US-10".into(), 3)])
    );
    let back = buy(&app, drop, 3, "a", &of_size("US-9")).await;
    assert_eq!(
        back.status(),
        StatusCode::ACCEPTED,
        "US-9's unit came back to US-9"
    );
    problem(
        buy(&app, drop, 4, "a", &of_size("US-9")).await,
        409,
        "SOLD_OUT",
    )
    .await;
    // Each size's units by state, in the stats and the reconciliation alike: US-9's cancelled
    // unit and its new one, US-10's two.
    for path in ["stats", "reconciliation"] {
        let read = app
            .seller_json(&format!("/limited-drops/{drop}/{path}"))
            .await;
        assert_eq!(
            pick(
                &read["variants"],
                &["sku", "pendingQuantity", "cancelledQuantity"]
            ),
            json!([["US-9", 1, 1], ["US-10", 2, 0]]),
            "{path}: {read}"
        );
        assert_eq!(
            (
                read["pendingQuantity"].clone(),
                read["cancelledQuantity"].clone()
            ),
            (json!(3), json!(1)),
            "{path}: {read}"
        );
    }
    // An expiry gives back to its own size too: buyer 2's US-10 order, unpaid past the payment
    // window, expires when read (the healing pass is off here), and its unit sells again as
    // US-10 and only as US-10.
    app.clock.advance(time::Duration::seconds(600));
    let expired = body(
        app.get(
            &format!("/orders/{}", other_order["orderId"].as_i64().unwrap()),
            Some((2, "buyer")),
        )
        .await,
    )
    .await;
    assert_eq!(
        (expired["status"].clone(), expired["sku"].clone()),
        (json!("EXPIRED"), json!("US-10"))
    );
    let refused = problem(
        buy(&app, drop, 5, "a", &of_size("US-9")).await,
        409,
        "SOLD_OUT",
    )
    .await;
    assert_eq!(refused["sku"], "US-9");
    let resold = buy(&app, drop, 5, "b", &of_size("US-10")).await;
    assert_eq!(
        resold.status(),
        StatusCode::ACCEPTED,
        "US-10's unit came back"
    );
    let refused = problem(
        buy(&app, drop, 6, "a", &of_size("US-10")).await,
        409,
        "SOLD_OUT",
    )
    .await;
    assert_eq!(refused["sku"], "US-10");
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        pick(
            &stats["variants"],
            &["sku", "soldQuantity", "remaining", "expiredQuantity"]
        ),
        json!([["US-9", 1, 0, 0], ["US-10", 2, 0, 1]]),
        "{stats}"
    );
}

/// A size that is not one of the drop's: 422 naming `sku` (missing or unknown) for a drop in
/// sizes, 400 for a drop without sizes; nothing is sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_names_one_of_the_drops_sizes_or_none() {
    let app = TestApp::spawn().await;
    let product = product_in_sizes(&app, &[("US-9", 5)]).await;
    let sized = drop_in_sizes(&app, product, &[("US-9", 2)], 1).await;
    for (body, message) in [
        (
            json!({"quantity": 1}),
            "sku: is required: this drop sells sizes",
        ),
        (of_size("US-11"), "sku: is not one of this drop's sizes"),
        (of_size("US 9"), "sku: is not one of this drop's sizes"),
    ] {
        let refused = problem(
            buy(&app, sized, 1, "k", &body).await,
            422,
            "VALIDATION_FAILED",
        )
        .await;
        assert_eq!(refused["errors"][0]["field"], "sku", "{refused}");
        assert_eq!(refused["detail"], message);
    }
    problem(
        buy(&app, sized, 1, "k", &json!({"quantity": 1, "sku": null})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    let (_, plain) = app.open_drop(5, 5, 1).await;
    problem(
        buy(&app, plain, 1, "k", &of_size("US-9")).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    assert_eq!(app.remaining(sized).await, 2);
    assert_eq!(app.remaining(plain).await, 5);
    assert_eq!(
        variant_stocks(&app, product).await,
        HashMap::from([("US-9".into(), 5)])
    );
}

/// A drop of a product in variants gives its sizes from them; a drop of a product without
/// variants gives none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_sells_sizes_of_its_products_variants_only() {
    let app = TestApp::spawn().await;
    let product = product_in_sizes(&app, &[("US-9", 5), ("US-10", 1)]).await;
    let now = app.clock.now();
    let drop = |extra: Value| {
        let mut body = json!({
            "productId": product,
            "openAt": at(now + time::Duration::hours(1)),
            "closeAt": at(now + time::Duration::hours(2)),
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, message) in [
        (
            json!({"limitedQuantity": 1}),
            "variants: is required: the product is sold in variants",
        ),
        (
            json!({"variants": [{"sku": "US-11", "limitedQuantity": 1}]}),
            "variants: [0].sku: is not one of the product's variants",
        ),
        (
            json!({"variants": [{"sku": "US-10", "limitedQuantity": 2}]}),
            "variants: [0].limitedQuantity: must not exceed the variant's stock (1)",
        ),
    ] {
        let refused = problem(app.post_drop(&drop(extra)).await, 422, "VALIDATION_FAILED").await;
        assert_eq!(refused["detail"], message, "{refused}");
    }
    let plain = app.create_product(5).await;
    let refused = problem(
        app.post_drop(&json!({
            "productId": plain,
            "openAt": at(now + time::Duration::hours(1)),
            "closeAt": at(now + time::Duration::hours(2)),
            "variants": [{"sku": "US-9", "limitedQuantity": 1}],
        }))
        .await,
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(
        refused["detail"],
        "variants: the product has no variants: give limitedQuantity"
    );
}
