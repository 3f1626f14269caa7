//! Payments by the provider's signed events: the only way an order becomes PAID. Signatures,
//! replays, every outcome, the admins' listing, and a buyer who tries to pay for themselves.

use crate::helpers::{SELLER, TestApp, WEBHOOK_SECRET, body, problem};
use goods_domain::ports::Clock as _;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

/// A drop priced at 19.99 EUR; one order of one unit by buyer 7.
async fn priced_order(app: &TestApp) -> Value {
    let product = app.create_product(10).await;
    let now = app.clock.now();
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": crate::helpers::at(now - time::Duration::seconds(1)),
            "closeAt": crate::helpers::at(now + time::Duration::hours(1)),
            "limitedQuantity": 5,
            "priceMinor": 1999,
            "currency": "EUR",
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let drop = body(res).await;
    assert_eq!(
        (drop["priceMinor"].as_i64(), drop["currency"].as_str()),
        (Some(1999), Some("EUR"))
    );
    let res = app
        .purchase(drop["dropId"].as_i64().unwrap(), 7, "buy", 1)
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let order = body(res).await;
    assert_eq!(
        (order["amountMinor"].as_i64(), order["currency"].as_str()),
        (Some(1999), Some("EUR"))
    );
    order
}

fn event(order: &Value, id: &str, amount: i64, reference: &str) -> Value {
    json!({
        "eventId": id,
        "type": "payment.succeeded",
        "orderId": order["orderId"],
        "amountMinor": amount,
        "currency": "EUR",
        "paymentReference": reference,
    })
}

async fn raw_event(app: &TestApp, body: &str, signature: Option<String>) -> Response {
    let mut req = app
        .client
        .post(format!("{}/payments/events", app.address))
        .header("Content-Type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        req = req.header("Payment-Signature", signature);
    }
    req.send().await.unwrap()
}

async fn order_status(app: &TestApp, order: &Value) -> String {
    let id = order["orderId"].as_i64().unwrap();
    body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn payments(app: &TestApp, query: &str) -> Value {
    let res = app
        .get(&format!("/admin/payments{query}"), Some((1, "admin")))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    body(res).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_stale_signature_is_401_and_records_nothing() {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let body_text = event(&order, "evt_1", 1999, "pi_1").to_string();
    let now = app.clock.now().unix_timestamp();
    let sign = |secret: &str, at: i64, text: &str| {
        api_actix::signature::sign(secret.as_bytes(), at, text.as_bytes())
    };
    let forged = [
        None,
        Some("t=1,v1=abc".to_owned()),
        Some(sign(
            "whsec_an-attackers-guess-of-the-secret-K2pL8nR4cW6y",
            now,
            &body_text,
        )),
        Some(sign(WEBHOOK_SECRET, now - 301, &body_text)),
        Some(sign(WEBHOOK_SECRET, now + 301, &body_text)),
        // Signed for another body: an amount changed on the way.
        Some(sign(
            WEBHOOK_SECRET,
            now,
            &event(&order, "evt_1", 1, "pi_1").to_string(),
        )),
    ];
    for signature in forged {
        let res = raw_event(&app, &body_text, signature.clone()).await;
        problem(res, 401, "INVALID_SIGNATURE").await;
    }
    // Not even a malformed body is read without a signature.
    problem(
        raw_event(&app, "not json", None).await,
        401,
        "INVALID_SIGNATURE",
    )
    .await;
    assert_eq!(order_status(&app, &order).await, "PENDING");
    assert_eq!(
        payments(&app, "").await["items"],
        json!([]),
        "nothing recorded"
    );
    // The same body, signed within 300 s, is accepted.
    let res = raw_event(
        &app,
        &body_text,
        Some(sign(WEBHOOK_SECRET, now - 299, &body_text)),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        body(res).await,
        json!({"eventId": "evt_1", "outcome": "PAID"})
    );
}

/// The signature is checked over the bytes as sent, not over a re-serialisation: a provider's
/// body with spaces, its own key order and escaped characters pays when signed as sent, and a
/// signature over the canonical form of the same event is refused for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signature_covers_the_raw_bytes_whatever_their_json_layout() {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let id = order["orderId"].as_i64().unwrap();
    // "pi_\u0031" is "pi_1", "EUR" spelled "\u0045UR": the same event, other bytes.
    let sent = format!(
        "{{ \"paymentReference\" : \"pi_\\u0031\",\n  \"currency\":\"\\u0045UR\", \
         \"amountMinor\": 1999 ,\"orderId\":{id},\t\"type\":\"payment.succeeded\", \
         \"eventId\":\"evt_raw\" }}"
    );
    let canonical = event(&order, "evt_raw", 1999, "pi_1").to_string();
    assert_eq!(
        serde_json::from_str::<Value>(&sent).unwrap(),
        serde_json::from_str::<Value>(&canonical).unwrap(),
        "the same event"
    );
    let now = app.clock.now().unix_timestamp();
    let sign =
        |text: &str| api_actix::signature::sign(WEBHOOK_SECRET.as_bytes(), now, text.as_bytes());
    problem(
        raw_event(&app, &sent, Some(sign(&canonical))).await,
        401,
        "INVALID_SIGNATURE",
    )
    .await;
    assert_eq!(order_status(&app, &order).await, "PENDING");
    let res = raw_event(&app, &sent, Some(sign(&sent))).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        body(res).await,
        json!({"eventId": "evt_raw", "outcome": "PAID"})
    );
    let paid = body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
    assert_eq!(
        (paid["status"].as_str(), paid["paymentReference"].as_str()),
        (Some("PAID"), Some("pi_1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_event_pays_the_order_once_and_a_replay_changes_nothing() {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let id = order["orderId"].as_i64().unwrap();
    let provider = app.provider();
    let res = provider.send(&event(&order, "evt_1", 1999, "pi_1")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        body(res).await,
        json!({"eventId": "evt_1", "outcome": "PAID"})
    );
    let paid = body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
    assert_eq!(
        (paid["status"].as_str(), paid["paymentReference"].as_str()),
        (Some("PAID"), Some("pi_1"))
    );
    assert!(paid["paidAt"].is_string(), "{paid}");
    // The provider delivers again (it does, at least once): the first outcome, nothing new.
    app.clock.advance(time::Duration::seconds(30));
    let again = provider.send(&event(&order, "evt_1", 1999, "pi_1")).await;
    assert_eq!(
        body(again).await,
        json!({"eventId": "evt_1", "outcome": "PAID"})
    );
    problem(
        provider.send(&event(&order, "evt_1", 1999, "pi_2")).await,
        422,
        "EVENT_ID_REUSED",
    )
    .await;
    let read = body(app.get(&format!("/orders/{id}"), Some((7, "buyer"))).await).await;
    assert_eq!(read, paid, "the repeat changed nothing");
    // A second payment by the same reference is the same money; by another, money to return.
    let same = provider.send(&event(&order, "evt_2", 1999, "pi_1")).await;
    assert_eq!(body(same).await["outcome"], "ALREADY_PAID");
    let other = provider.send(&event(&order, "evt_3", 1999, "pi_9")).await;
    assert_eq!(body(other).await["outcome"], "REFUND_REQUIRED");
    let listed = payments(&app, "").await;
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["evt_3", "evt_2", "evt_1"],
        "one record per event, newest first"
    );
    let refunds = payments(&app, "?outcome=REFUND_REQUIRED").await;
    assert_eq!(
        refunds,
        json!({"items": [{
            "eventId": "evt_3", "type": "payment.succeeded", "orderId": id, "amountMinor": 1999,
            "currency": "EUR", "paymentReference": "pi_9", "outcome": "REFUND_REQUIRED",
            "receivedAt": refunds["items"][0]["receivedAt"],
        }], "nextCursor": null})
    );
    let metrics = app.metrics().await;
    for (outcome, n) in [("PAID", 1), ("ALREADY_PAID", 1), ("REFUND_REQUIRED", 1)] {
        assert!(
            metrics.contains(&format!(
                "payment_events_total{{outcome=\"{outcome}\"}} {n}"
            )),
            "{outcome}: {metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amount_mismatch_leaves_the_order_pending_and_is_listed_for_admins() {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let provider = app.provider();
    let short = provider
        .send(&event(&order, "evt_short", 1000, "pi_1"))
        .await;
    assert_eq!(body(short).await["outcome"], "AMOUNT_MISMATCH");
    let mut won = event(&order, "evt_krw", 1999, "pi_1");
    won["currency"] = json!("KRW");
    assert_eq!(
        body(provider.send(&won).await).await["outcome"],
        "AMOUNT_MISMATCH"
    );
    let mut failed = event(&order, "evt_failed", 1999, "pi_1");
    failed["type"] = json!("payment.failed");
    assert_eq!(
        body(provider.send(&failed).await).await["outcome"],
        "FAILED_RECORDED"
    );
    assert_eq!(order_status(&app, &order).await, "PENDING");
    let page = payments(&app, "?outcome=AMOUNT_MISMATCH&limit=1").await;
    assert_eq!(page["items"][0]["eventId"], "evt_krw");
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    let next = payments(
        &app,
        &format!("?outcome=AMOUNT_MISMATCH&limit=1&cursor={cursor}"),
    )
    .await;
    assert_eq!(next["items"][0]["eventId"], "evt_short");
    assert_eq!(next["nextCursor"], json!(null));
    // The right amount still pays it.
    let res = provider.send(&event(&order, "evt_ok", 1999, "pi_1")).await;
    assert_eq!(body(res).await["outcome"], "PAID");
    assert_eq!(order_status(&app, &order).await, "PAID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buyer_cannot_reach_paid() {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let id = order["orderId"].as_i64().unwrap();
    // The old buyer's endpoint is gone.
    let res = app
        .request(
            Method::POST,
            &format!("/orders/{id}/pay"),
            Some((7, "buyer")),
        )
        .header("Idempotency-Key", "p1")
        .json(&json!({"paymentReference": "lol"}))
        .send()
        .await
        .unwrap();
    problem(res, 404, "NOT_FOUND").await;
    // The provider's endpoint takes no user identity: a buyer's headers are not a signature.
    let res = app
        .request(Method::POST, "/payments/events", Some((7, "buyer")))
        .json(&event(&order, "evt_mine", 1999, "lol"))
        .send()
        .await
        .unwrap();
    problem(res, 401, "INVALID_SIGNATURE").await;
    assert_eq!(order_status(&app, &order).await, "PENDING");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_event_with_a_bad_body_or_an_unknown_order_is_refused_and_the_unknown_order_recorded()
 {
    let app = TestApp::spawn().await;
    let order = priced_order(&app).await;
    let provider = app.provider();
    let mut bad = event(&order, "", 1999, "pi_1");
    bad["currency"] = json!("euro");
    bad["amountMinor"] = json!(-1);
    let refused = problem(provider.send(&bad).await, 422, "VALIDATION_FAILED").await;
    let fields: Vec<&str> = refused["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["eventId", "currency"]);
    problem(
        provider.send(&json!({"eventId": "x"})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    let mut unknown = event(&order, "evt_nobody", 1999, "pi_1");
    unknown["orderId"] = json!(order["orderId"].as_i64().unwrap() + 1000);
    let missing = problem(provider.send(&unknown).await, 404, "ORDER_NOT_FOUND").await;
    assert_eq!(missing["outcome"], "ORDER_NOT_FOUND");
    let listed = payments(&app, "?outcome=ORDER_NOT_FOUND").await;
    assert_eq!(listed["items"][0]["eventId"], "evt_nobody");
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_list_payments_and_a_bad_query_is_a_400() {
    let app = TestApp::spawn().await;
    problem(
        app.get("/admin/payments", Some((SELLER, "seller"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(
        app.get("/admin/payments", Some((7, "buyer"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(
        app.get("/admin/payments", None).await,
        401,
        "UNAUTHENTICATED",
    )
    .await;
    for query in [
        "?outcome=PAIDISH",
        "?limit=0",
        "?limit=101",
        "?cursor=-1",
        "?what=1",
    ] {
        problem(
            app.get(&format!("/admin/payments{query}"), Some((1, "admin")))
                .await,
            400,
            "MALFORMED_REQUEST",
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_webhook_secret_payments_are_not_configured() {
    let app = TestApp::spawn_with(&[("PAYMENT_WEBHOOK_SECRET", "")]).await;
    let order = priced_order(&app).await;
    let res = app.pay(&order, "evt_1", "pi_1").await;
    problem(res, 503, "PAYMENTS_NOT_CONFIGURED").await;
    assert_eq!(order_status(&app, &order).await, "PENDING");
}
