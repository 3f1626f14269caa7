//! `/webhook-endpoints`: a seller's endpoints over HTTP, with their secret shown once.

use crate::helpers::{SELLER, TestApp, body, problem};
use base64::Engine as _;
use goods_domain::ports::Clock as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use test_support::receiver::{self, Behaviour, Received};

/// Another seller.
const OTHER: i64 = SELLER + 1;

/// A lab's settings: endpoints on loopback and over plain HTTP allowed, and rounds every 50 ms.
const LAB: [(&str, &str); 3] = [
    ("WEBHOOK_ALLOW_PRIVATE", "true"),
    ("WEBHOOK_ALLOW_HTTP", "true"),
    ("WEBHOOK_POLL_MS", "50"),
];

async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    user: (i64, &str),
    json: Option<Value>,
) -> reqwest::Response {
    let req = app.request(method, path, Some(user));
    let req = match json {
        Some(json) => req.json(&json),
        None => req,
    };
    req.send().await.unwrap()
}

async fn create(app: &TestApp, seller: i64, json: Value) -> reqwest::Response {
    call(
        app,
        Method::POST,
        "/webhook-endpoints",
        (seller, "seller"),
        Some(json),
    )
    .await
}

/// `whsec_` and the base64 of 32 bytes.
fn secret_bytes(secret: &Value) -> Vec<u8> {
    let text = secret.as_str().unwrap();
    let encoded = text.strip_prefix("whsec_").unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(bytes.len(), 32, "{text}");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seller_creates_reads_changes_rotates_and_deletes_an_endpoint() {
    let app = TestApp::spawn_with(&LAB).await;
    let res = create(
        &app,
        SELLER,
        json!({"url": "http://127.0.0.1:9/hooks", "types": ["goods.order.placed"], "description": "Warehouse"}),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let created = body(res).await;
    let id = created["endpointId"].as_i64().unwrap();
    assert_eq!(location, format!("/webhook-endpoints/{id}"));
    let first_secret = secret_bytes(&created["secret"]);
    let path = format!("/webhook-endpoints/{id}");
    let view = json!({
        "endpointId": id,
        "url": "http://127.0.0.1:9/hooks",
        "types": ["goods.order.placed"],
        "description": "Warehouse",
        "enabled": true,
        "createdAt": created["createdAt"],
    });
    let mut shown = created.clone();
    shown.as_object_mut().unwrap().remove("secret");
    assert_eq!(shown, view);
    // The secret is shown once: never in a read or a list.
    let read = body(call(&app, Method::GET, &path, (SELLER, "seller"), None).await).await;
    assert_eq!(read, view);
    let list = body(
        call(
            &app,
            Method::GET,
            "/webhook-endpoints",
            (SELLER, "seller"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(list, json!({"items": [view]}));

    // Another seller finds nothing of it, and a buyer may not ask.
    for (method, suffix, json) in [
        (Method::GET, "", None),
        (Method::PATCH, "", Some(json!({"enabled": false}))),
        (Method::DELETE, "", None),
        (Method::POST, "/rotate-secret", None),
    ] {
        let res = call(
            &app,
            method.clone(),
            &format!("{path}{suffix}"),
            (OTHER, "seller"),
            json,
        )
        .await;
        problem(res, 404, "ENDPOINT_NOT_FOUND").await;
    }
    let theirs = body(
        call(
            &app,
            Method::GET,
            "/webhook-endpoints",
            (OTHER, "seller"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(theirs, json!({"items": []}));
    problem(
        call(&app, Method::GET, "/webhook-endpoints", (5, "buyer"), None).await,
        403,
        "FORBIDDEN",
    )
    .await;

    // A change writes the fields it names; a null description removes it.
    let changed = body(
        call(
            &app,
            Method::PATCH,
            &path,
            (SELLER, "seller"),
            Some(json!({"enabled": false, "description": null})),
        )
        .await,
    )
    .await;
    assert_eq!(
        (
            &changed["enabled"],
            &changed["description"],
            &changed["types"]
        ),
        (&json!(false), &Value::Null, &json!(["goods.order.placed"]))
    );
    let changed = body(
        call(
            &app,
            Method::PATCH,
            &path,
            (SELLER, "seller"),
            Some(json!({"types": ["goods.order.paid", "goods.drop.sold_out"]})),
        )
        .await,
    )
    .await;
    assert_eq!(
        changed["types"],
        json!(["goods.drop.sold_out", "goods.order.paid"])
    );
    assert_eq!(changed["enabled"], false);

    // A rotation shows a new secret, once.
    let res = call(
        &app,
        Method::POST,
        &format!("{path}/rotate-secret"),
        (SELLER, "seller"),
        None,
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    let rotated = body(res).await;
    assert_eq!(rotated.as_object().unwrap().len(), 1, "{rotated}");
    assert_ne!(secret_bytes(&rotated["secret"]), first_secret);

    // A method the resource does not answer is a 405 naming every one it does.
    for (path, allow) in [
        ("/webhook-endpoints".to_owned(), "GET, POST"),
        (path.clone(), "GET, PATCH, DELETE"),
    ] {
        let res = call(&app, Method::PUT, &path, (SELLER, "seller"), None).await;
        assert_eq!(res.headers()["allow"], allow);
        problem(res, 405, "METHOD_NOT_ALLOWED").await;
    }

    let res = call(&app, Method::DELETE, &path, (SELLER, "seller"), None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    problem(
        call(&app, Method::GET, &path, (SELLER, "seller"), None).await,
        404,
        "ENDPOINT_NOT_FOUND",
    )
    .await;
    problem(
        call(
            &app,
            Method::GET,
            "/webhook-endpoints/x",
            (SELLER, "seller"),
            None,
        )
        .await,
        404,
        "ENDPOINT_NOT_FOUND",
    )
    .await;
}

/// With the defaults, an endpoint must be https:// on a public address: each other URL is a
/// 422 naming the field, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_outside_the_rules_is_refused_and_nothing_is_created() {
    let app = TestApp::spawn().await;
    let long = format!("https://shop.example/{}", "a".repeat(2030));
    for (json, field, detail) in [
        (
            json!({"url": "http://93.184.215.14/h"}),
            "url",
            "url: must be https://",
        ),
        (
            json!({"url": "https://127.0.0.1/h"}),
            "url",
            "url: reaches a loopback address: 127.0.0.1",
        ),
        (
            json!({"url": "https://localhost/h"}),
            "url",
            "url: reaches a loopback address: 127.0.0.1",
        ),
        (
            json!({"url": "https://169.254.169.254/latest"}),
            "url",
            "url: reaches the instance metadata address: 169.254.169.254",
        ),
        (
            json!({"url": "https://[::1]/h"}),
            "url",
            "url: reaches a loopback address: ::1",
        ),
        (
            json!({"url": "https://me:pw@93.184.215.14/h"}),
            "url",
            "url: must not carry a user or a password",
        ),
        (
            json!({"url": long}),
            "url",
            "url: must be at most 2048 characters",
        ),
        (
            json!({"url": "https://93.184.215.14/h", "types": ["goods.order.shipped"]}),
            "types",
            "types: \"goods.order.shipped\" is not an event type",
        ),
        (
            json!({"url": "https://93.184.215.14/h", "types": []}),
            "types",
            "types: must name at least one event type (leave it out for every type)",
        ),
        (
            json!({"url": "https://93.184.215.14/h", "description": ""}),
            "description",
            "description: must be 1 to 256 characters",
        ),
    ] {
        let refused = problem(
            create(&app, SELLER, json.clone()).await,
            422,
            "VALIDATION_FAILED",
        )
        .await;
        assert_eq!(refused["errors"][0]["field"], field, "{json}: {refused}");
        let said = format!(
            "{}: {}",
            refused["errors"][0]["field"].as_str().unwrap(),
            refused["errors"][0]["message"].as_str().unwrap()
        );
        // localhost may resolve to ::1 first on some systems: either loopback is the same refusal.
        if json["url"] == "https://localhost/h" {
            assert!(
                said.starts_with("url: reaches a loopback address"),
                "{said}"
            );
        } else {
            assert_eq!(said, detail, "{json}");
        }
    }
    for malformed in [
        json!({}),
        json!({"url": 5}),
        json!({"url": "https://93.184.215.14/h", "secret": "mine"}),
        json!({"url": "https://93.184.215.14/h", "types": null}),
    ] {
        problem(
            create(&app, SELLER, malformed).await,
            400,
            "MALFORMED_REQUEST",
        )
        .await;
    }
    let list = body(
        call(
            &app,
            Method::GET,
            "/webhook-endpoints",
            (SELLER, "seller"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(list, json!({"items": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seller_past_the_endpoint_quota_is_refused_and_a_deletion_frees_a_place() {
    let mut vars = LAB.to_vec();
    vars.push(("WEBHOOK_MAX_ENDPOINTS", "2"));
    let app = TestApp::spawn_with(&vars).await;
    let url = json!({"url": "https://127.0.0.1/h"});
    let mut ids = Vec::new();
    for _ in 0..2 {
        let res = create(&app, SELLER, url.clone()).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        ids.push(body(res).await["endpointId"].as_i64().unwrap());
    }
    let refused = problem(
        create(&app, SELLER, url.clone()).await,
        409,
        "QUOTA_EXCEEDED",
    )
    .await;
    assert_eq!(refused["limit"], 2);
    assert_eq!(
        create(&app, OTHER, url.clone()).await.status(),
        StatusCode::CREATED
    );
    let res = call(
        &app,
        Method::DELETE,
        &format!("/webhook-endpoints/{}", ids[0]),
        (SELLER, "seller"),
        None,
    )
    .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        create(&app, SELLER, url).await.status(),
        StatusCode::CREATED
    );
}

/// A receiver answering 204 at once.
async fn receiver() -> (std::net::SocketAddr, Received) {
    receiver::start(Behaviour::default()).await
}

/// Until `received` holds `n` requests (the rounds run every 50 ms on their own).
async fn until_received(received: &Received, n: usize) {
    receiver::until_received(received, n, std::time::Duration::from_secs(20)).await;
}

/// What a sale, a payment, a cancel and an expiry sent to the seller's endpoint.
struct SaleDelivered {
    /// The endpoint's secret.
    secret: String,
    /// The drop's events as `/admin/events` serves them.
    logged: Vec<Value>,
    /// The requests sent before the test clock moved past the unpaid order's window, and the
    /// clock's time then (the test clock stands still between its moves).
    before: (Vec<receiver::Request>, time::OffsetDateTime),
    /// The requests sent after it (the expiry's event), and the clock's time then.
    after: (Vec<receiver::Request>, time::OffsetDateTime),
    /// What another seller's endpoint received.
    not_theirs: Received,
}

/// The drop's events as `/admin/events` serves them.
async fn logged(app: &TestApp, drop: i64) -> Vec<Value> {
    let res = app
        .request(
            Method::GET,
            &format!("/admin/events?dropId={drop}&limit=100"),
            Some((1, "admin")),
        )
        .send()
        .await
        .unwrap();
    body(res).await["items"].as_array().unwrap().clone()
}

/// A seller's endpoint and another seller's; a drop of 3 that sells out to 3 of 4 buyers;
/// buyer 1 pays, buyer 2 cancels, buyer 3's order expires unpaid (read after its window, the
/// test clock advanced 601 s once every earlier event has arrived).
async fn a_sale_delivered(app: &TestApp) -> SaleDelivered {
    let (mine, received) = receiver().await;
    let (theirs, not_theirs) = receiver().await;
    let created =
        body(create(app, SELLER, json!({"url": format!("http://{mine}/hooks")})).await).await;
    let secret = created["secret"].as_str().unwrap().to_owned();
    let other = create(app, OTHER, json!({"url": format!("http://{theirs}/hooks")})).await;
    assert_eq!(other.status(), StatusCode::CREATED);
    let (_, drop) = app.open_drop(10, 3, 1).await;
    let mut orders = Vec::new();
    for user in 1..=4 {
        let res = app.purchase(drop, user, "k", 1).await;
        if res.status() == StatusCode::ACCEPTED {
            orders.push((user, body(res).await));
        }
    }
    assert_eq!(orders.len(), 3);
    assert_eq!(
        app.pay(&orders[0].1, "evt_webhooks", "pi_webhooks")
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.cancel(&orders[1].1, orders[1].0).await.status(),
        StatusCode::OK
    );
    let so_far = logged(app, drop).await.len();
    until_received(&received, so_far).await;
    let before = (received.lock().unwrap().clone(), app.clock.now());
    app.clock.advance(time::Duration::seconds(601));
    let expired = body(
        app.get(
            &format!("/orders/{}", orders[2].1["orderId"]),
            Some((orders[2].0, "buyer")),
        )
        .await,
    )
    .await;
    assert_eq!(expired["status"], "EXPIRED");
    // The drop's log: created, three orders placed, sold out, paid, cancelled, expired.
    let logged = logged(app, drop).await;
    let types: Vec<&str> = logged.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for kind in [
        "goods.drop.created",
        "goods.order.placed",
        "goods.drop.sold_out",
        "goods.order.paid",
        "goods.order.cancelled",
        "goods.order.expired",
    ] {
        assert!(types.contains(&kind), "{kind} in {types:?}");
    }
    until_received(&received, logged.len()).await;
    let after = received.lock().unwrap()[before.0.len()..].to_vec();
    SaleDelivered {
        secret,
        logged,
        before,
        after: (after, app.clock.now()),
        not_theirs,
    }
}

/// A sale, a payment, a cancel and an expiry: their events reach the seller's endpoint, each
/// once, signed by its secret as Standard Webhooks signs; another seller's endpoint gets none of
/// them. (Python's `standardwebhooks` verifies the same scenario's requests in `needs_python`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sales_events_reach_its_sellers_endpoint_signed_and_no_other() {
    let app = TestApp::spawn_with(&LAB).await;
    let sale = a_sale_delivered(&app).await;
    let verifier = standardwebhooks::Webhook::new(&sale.secret).unwrap();
    let mut ids: Vec<String> = Vec::new();
    for request in sale.before.0.iter().chain(&sale.after.0) {
        // The reference crate's signature of what arrived (its verify also checks the
        // timestamp against the real clock, which this test's clock runs ahead of).
        let id = request.header("webhook-id").unwrap();
        let timestamp: i64 = request
            .header("webhook-timestamp")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            request.header("webhook-signature").unwrap(),
            verifier
                .sign(id, timestamp, request.body.as_bytes())
                .unwrap()
        );
        assert_eq!(request.header("content-type"), Some("application/json"));
        let event: Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(request.header("webhook-id"), event["id"].as_str());
        ids.push(event["id"].as_str().unwrap().to_owned());
        // Byte for byte the CloudEvent the log serves.
        let served = sale.logged.iter().find(|e| e["id"] == event["id"]).unwrap();
        assert_eq!(&event, served);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), sale.logged.len(), "each event once");
    assert!(
        sale.not_theirs.lock().unwrap().is_empty(),
        "another seller's endpoint got an event"
    );
}

/// The endpoint's deliveries (at `deliveries`) once there are two and both have `attempts`
/// recorded.
async fn until_attempts(app: &TestApp, deliveries: &str, attempts: i64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let listed = body(call(app, Method::GET, deliveries, (SELLER, "seller"), None).await).await;
        let items = listed["items"].as_array().unwrap();
        if items.len() == 2 && items.iter().all(|d| d["attempts"] == attempts) {
            return listed;
        }
        assert!(std::time::Instant::now() < deadline, "{listed}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A receiver down for the first three attempts gets every event afterwards, on the schedule
/// (the clock advanced, not slept): 5 s, 5 min and 30 min after the failures, each up to a
/// tenth longer. The deliveries say so, and a manual retry sends a delivered one again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_three_attempts_gets_every_event_afterwards() {
    let app = TestApp::spawn_with(&LAB).await;
    let (address, received) = receiver::start(Behaviour {
        failures: 3,
        ..Behaviour::default()
    })
    .await;
    let created = body(
        create(
            &app,
            SELLER,
            json!({"url": format!("http://{address}/hooks")}),
        )
        .await,
    )
    .await;
    let deliveries = format!("/webhook-endpoints/{}/deliveries", created["endpointId"]);
    let (_, drop) = app.open_drop(10, 5, 1).await;
    assert_eq!(
        app.purchase(drop, 1, "k", 1).await.status(),
        StatusCode::ACCEPTED
    );
    // Two events (the drop created, the order placed), each attempted once and refused (the
    // attempts recorded: the receiver answers before the server writes what it answered).
    let listed = until_attempts(&app, &deliveries, 1).await;
    let count = received.lock().unwrap().len();
    assert_eq!(count, 2, "{listed}");
    let start = app.clock.now();
    for delivery in listed["items"].as_array().unwrap() {
        assert_eq!(
            (
                &delivery["status"],
                &delivery["attempts"],
                &delivery["lastStatusCode"]
            ),
            (&json!("PENDING"), &json!(1), &json!(500)),
            "{listed}"
        );
        let next = time::OffsetDateTime::parse(
            delivery["nextAttemptAt"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let wait = next - start;
        assert!(
            wait >= time::Duration::seconds(5) && wait <= time::Duration::milliseconds(5_500),
            "{wait}"
        );
    }
    // Nothing more is sent until the clock reaches the next attempt.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(received.lock().unwrap().len(), 2, "a retry before its time");
    for (wait, total) in [
        (time::Duration::milliseconds(5_500), 4_usize),
        (time::Duration::seconds(330), 6),
        (time::Duration::seconds(1_980), 8),
    ] {
        app.clock.advance(wait);
        let listed = until_attempts(&app, &deliveries, i64::try_from(total / 2).unwrap()).await;
        let count = received.lock().unwrap().len();
        assert_eq!(count, total, "{listed}");
    }
    let listed = body(call(&app, Method::GET, &deliveries, (SELLER, "seller"), None).await).await;
    let states: Vec<(Value, Value, Value)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["status"].clone(),
                d["attempts"].clone(),
                d["lastStatusCode"].clone(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (json!("DELIVERED"), json!(4), json!(204)),
            (json!("DELIVERED"), json!(4), json!(204))
        ]
    );
    let delivered = body(
        call(
            &app,
            Method::GET,
            &format!("{deliveries}?status=DELIVERED&limit=1"),
            (SELLER, "seller"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(delivered["items"].as_array().unwrap().len(), 1);
    let cursor = delivered["nextCursor"].as_str().unwrap();
    let rest = body(
        call(
            &app,
            Method::GET,
            &format!("{deliveries}?limit=1&cursor={cursor}"),
            (SELLER, "seller"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    assert_ne!(
        rest["items"][0]["eventId"],
        delivered["items"][0]["eventId"]
    );
    // A manual retry sends a delivered event again: a fifth request with its id.
    let event = delivered["items"][0]["eventId"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = call(
        &app,
        Method::POST,
        &format!("{deliveries}/{event}/retry"),
        (SELLER, "seller"),
        None,
    )
    .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    until_received(&received, 9).await;
    let last = received.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.header("webhook-id"), Some(event.as_str()));
    problem(
        call(
            &app,
            Method::POST,
            &format!("{deliveries}/drop-0-0/retry"),
            (SELLER, "seller"),
            None,
        )
        .await,
        404,
        "DELIVERY_NOT_FOUND",
    )
    .await;
    problem(
        call(&app, Method::GET, &deliveries, (OTHER, "seller"), None).await,
        404,
        "ENDPOINT_NOT_FOUND",
    )
    .await;
    problem(
        call(
            &app,
            Method::GET,
            &format!("{deliveries}?status=LOST"),
            (SELLER, "seller"),
            None,
        )
        .await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
}

/// Python's `standardwebhooks`, the reference library a seller's receiver uses.
mod needs_python {
    use super::*;

    /// `received`'s requests as the verifier reads them.
    fn as_json(received: &[receiver::Request]) -> Value {
        received
            .iter()
            .map(|r| json!({"headers": r.headers, "body": r.body}))
            .collect()
    }

    /// Every request verifies with Python's `standardwebhooks`: by the first secret before a
    /// rotation; by the new one and by the old one after it, while both sign.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reference_python_library_verifies_every_signature_across_a_rotation() {
        let app = TestApp::spawn_with(&LAB).await;
        let (address, received) = receiver().await;
        let created = body(
            create(
                &app,
                SELLER,
                json!({"url": format!("http://{address}/hooks")}),
            )
            .await,
        )
        .await;
        let first = created["secret"].as_str().unwrap().to_owned();
        let (_, drop) = app.open_drop(10, 5, 1).await;
        app.purchase(drop, 1, "k", 1).await;
        until_received(&received, 2).await;
        let before = as_json(&received.lock().unwrap());
        let rotated = body(
            call(
                &app,
                Method::POST,
                &format!("/webhook-endpoints/{}/rotate-secret", created["endpointId"]),
                (SELLER, "seller"),
                None,
            )
            .await,
        )
        .await;
        let second = rotated["secret"].as_str().unwrap().to_owned();
        app.purchase(drop, 2, "k", 1).await;
        app.purchase(drop, 3, "k", 1).await;
        until_received(&received, 4).await;
        let after = as_json(&received.lock().unwrap()[2..]);
        assert_eq!(
            test_support::python::verified_by_standardwebhooks(&first, &before),
            2
        );
        assert_eq!(
            test_support::python::verified_by_standardwebhooks(&second, &after),
            2
        );
        assert_eq!(
            test_support::python::verified_by_standardwebhooks(&first, &after),
            2,
            "the old secret signs beside the new for 24 h"
        );
        let signatures = after[0]["headers"]["webhook-signature"].as_str().unwrap();
        assert_eq!(signatures.split(' ').count(), 2, "{signatures}");
    }

    /// Every request of a sale, a payment, a cancel and an expiry verifies with Python's
    /// `standardwebhooks`, its timestamps judged against the test's clock when each was sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reference_python_library_verifies_every_event_of_a_sale() {
        let app = TestApp::spawn_with(&LAB).await;
        let sale = a_sale_delivered(&app).await;
        let (before, at_sale) = &sale.before;
        let (after, at_expiry) = &sale.after;
        assert_eq!(before.len() + after.len(), sale.logged.len());
        assert_eq!(
            test_support::python::verified_by_standardwebhooks_at(
                &sale.secret,
                &as_json(before),
                *at_sale
            ),
            before.len()
        );
        assert_eq!(
            test_support::python::verified_by_standardwebhooks_at(
                &sale.secret,
                &as_json(after),
                *at_expiry
            ),
            after.len()
        );
        assert!(
            !after.is_empty(),
            "the expiry's event came after the clock moved"
        );
    }
}
