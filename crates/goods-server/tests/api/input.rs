//! One rule for bad input on every route (docs/api.md, Conventions): 415 for a body that is not
//! JSON, 400 naming the field for one that cannot be read as the operation's JSON (unknown
//! fields included), 422 with `errors[]` for values out of range; and none of it changes
//! anything.

use crate::helpers::{SELLER, TestApp, WEBHOOK_SECRET, at, body, problem};
use goods_domain::ports::Clock as _;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const BUYER: (i64, &str) = (7, "buyer");
const ADMIN: (i64, &str) = (99, "admin");

/// An operation that reads a body, with what each case needs.
struct Route {
    /// As docs/openapi.yaml names it.
    method: Method,
    template: &'static str,
    path: String,
    user: Option<(i64, &'static str)>,
    headers: Vec<(&'static str, String)>,
    /// A body the operation takes.
    valid: Value,
    /// A field and a body where it has a wrong type.
    wrong_type: Option<(&'static str, Value)>,
    /// A field and a readable body where it is out of range.
    out_of_range: Option<(&'static str, Value)>,
    /// The payment provider's: every body is signed.
    signed: bool,
}

/// Every POST, PUT and PATCH docs/openapi.yaml describes, as `METHOD /template` (a DELETE
/// takes no body).
fn described_writes() -> BTreeSet<String> {
    let spec = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.yaml"),
    )
    .unwrap();
    let mut path = "";
    let mut writes = BTreeSet::new();
    for line in spec.lines() {
        if let Some(p) = line.strip_prefix("  /") {
            path = p.trim_end_matches(':');
        } else if let Some(method) = ["post", "put", "patch"]
            .into_iter()
            .find(|m| line == format!("    {m}:"))
        {
            writes.insert(format!("{} /{path}", method.to_uppercase()));
        }
    }
    writes
}

async fn send(
    app: &TestApp,
    route: &Route,
    content_type: Option<&str>,
    body: &str,
) -> reqwest::Response {
    let mut req = app
        .request(route.method.clone(), &route.path, route.user)
        .body(body.to_owned());
    if let Some(content_type) = content_type {
        req = req.header("Content-Type", content_type);
    }
    for (name, value) in &route.headers {
        req = req.header(*name, value);
    }
    if route.signed {
        let signature = api_actix::signature::sign(
            WEBHOOK_SECRET.as_bytes(),
            app.clock.now().unix_timestamp(),
            body.as_bytes(),
        );
        req = req.header("Payment-Signature", signature);
    }
    req.send().await.unwrap()
}

/// What a client can see of everything the routes could change.
async fn everything(app: &TestApp, ids: &[String]) -> Vec<Value> {
    let seller = Some((SELLER, "seller"));
    let mut seen = Vec::new();
    for path in ids {
        let res = app
            .get(
                path,
                if path.starts_with("/admin") {
                    Some(ADMIN)
                } else if path.starts_with("/orders") {
                    Some(BUYER)
                } else {
                    seller
                },
            )
            .await;
        seen.push(json!({"path": path, "status": res.status().as_u16(), "body": body(res).await}));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_reads_bad_input_by_one_rule() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 10, 2).await;
    let ordered = body(app.purchase(drop, BUYER.0, "placed", 1).await).await;
    let order = ordered["orderId"].as_i64().unwrap();
    let spare = app.create_product(5).await;
    let now = app.clock.now();
    let draw = body(
        app.post_drop(&json!({
            "productId": app.create_product(3).await, "openAt": at(now - time::Duration::seconds(1)),
            "closeAt": at(now + time::Duration::hours(2)), "limitedQuantity": 3,
            "mode": "DRAW", "entryCloseAt": at(now + time::Duration::hours(1)),
        }))
        .await,
    )
    .await["dropId"]
        .as_i64()
        .unwrap();
    let seller = Some((SELLER, "seller"));
    let drop_body = json!({
        "productId": spare, "openAt": at(now + time::Duration::hours(1)),
        "closeAt": at(now + time::Duration::hours(2)), "limitedQuantity": 5,
    });
    let event = json!({
        "eventId": "evt_input", "type": "payment.succeeded", "orderId": order,
        "amountMinor": 0, "currency": "XXX", "paymentReference": "pi_input",
    });
    let no_body = |method, template, path: String, user| Route {
        method,
        template,
        path,
        user,
        headers: Vec::new(),
        valid: json!({}),
        wrong_type: None,
        out_of_range: None,
        signed: false,
    };
    let endpoint = body(
        app.request(Method::POST, "/webhook-endpoints", seller)
            .json(&json!({"url": "https://93.184.215.14/h"}))
            .send()
            .await
            .unwrap(),
    )
    .await["endpointId"]
        .as_i64()
        .unwrap();
    let routes = vec![
        Route {
            method: Method::POST,
            template: "/webhook-endpoints",
            path: "/webhook-endpoints".into(),
            user: seller,
            headers: Vec::new(),
            valid: json!({"url": "https://93.184.215.14/h"}),
            wrong_type: Some(("url", json!({"url": 5}))),
            out_of_range: Some((
                "description",
                json!({"url": "https://93.184.215.14/h", "description": " "}),
            )),
            signed: false,
        },
        Route {
            method: Method::PATCH,
            template: "/webhook-endpoints/{endpointId}",
            path: format!("/webhook-endpoints/{endpoint}"),
            user: seller,
            headers: Vec::new(),
            valid: json!({"description": "Warehouse"}),
            wrong_type: Some(("enabled", json!({"enabled": "yes"}))),
            out_of_range: Some(("types", json!({"types": []}))),
            signed: false,
        },
        no_body(
            Method::POST,
            "/webhook-endpoints/{endpointId}/rotate-secret",
            format!("/webhook-endpoints/{endpoint}/rotate-secret"),
            seller,
        ),
        no_body(
            Method::POST,
            "/webhook-endpoints/{endpointId}/deliveries/{eventId}/retry",
            format!("/webhook-endpoints/{endpoint}/deliveries/drop-1-1/retry"),
            seller,
        ),
        Route {
            method: Method::POST,
            template: "/products",
            path: "/products".into(),
            user: seller,
            headers: Vec::new(),
            valid: json!({"name": "Spare", "stockQuantity": 4}),
            wrong_type: Some((
                "stockQuantity",
                json!({"name": "Spare", "stockQuantity": "4"}),
            )),
            out_of_range: Some((
                "stockQuantity",
                json!({"name": "Spare", "stockQuantity": -1}),
            )),
            signed: false,
        },
        Route {
            method: Method::POST,
            template: "/limited-drops",
            path: "/limited-drops".into(),
            user: seller,
            headers: Vec::new(),
            valid: drop_body.clone(),
            wrong_type: Some(("openAt", {
                let mut b = drop_body.clone();
                b["openAt"] = json!("tomorrow at nine");
                b
            })),
            out_of_range: Some(("closeAt", {
                let mut b = drop_body.clone();
                b["closeAt"] = json!(at(now + time::Duration::minutes(30)));
                b
            })),
            signed: false,
        },
        Route {
            method: Method::POST,
            template: "/limited-drops/{dropId}/orders",
            path: format!("/limited-drops/{drop}/orders"),
            user: Some(BUYER),
            headers: vec![("Idempotency-Key", "input-rule".into())],
            valid: json!({"quantity": 1}),
            wrong_type: Some(("quantity", json!({"quantity": "1"}))),
            out_of_range: Some(("quantity", json!({"quantity": 0}))),
            signed: false,
        },
        no_body(
            Method::POST,
            "/limited-drops/{dropId}/entries",
            format!("/limited-drops/{draw}/entries"),
            Some(BUYER),
        ),
        no_body(
            Method::POST,
            "/limited-drops/{dropId}/pause",
            format!("/limited-drops/{drop}/pause"),
            seller,
        ),
        no_body(
            Method::POST,
            "/limited-drops/{dropId}/resume",
            format!("/limited-drops/{drop}/resume"),
            seller,
        ),
        no_body(
            Method::POST,
            "/limited-drops/{dropId}/close",
            format!("/limited-drops/{drop}/close"),
            seller,
        ),
        no_body(
            Method::POST,
            "/orders/{orderId}/cancel",
            format!("/orders/{order}/cancel"),
            Some(BUYER),
        ),
        Route {
            method: Method::PUT,
            template: "/admin/flags/{name}",
            path: "/admin/flags/limited-drop.enabled".into(),
            user: Some(ADMIN),
            headers: Vec::new(),
            valid: json!({"enabled": false}),
            wrong_type: Some(("enabled", json!({"enabled": "false"}))),
            out_of_range: None,
            signed: false,
        },
        Route {
            method: Method::POST,
            template: "/payments/events",
            path: "/payments/events".into(),
            user: None,
            headers: Vec::new(),
            valid: event.clone(),
            wrong_type: Some(("orderId", {
                let mut b = event.clone();
                b["orderId"] = json!(order.to_string());
                b
            })),
            out_of_range: Some(("amountMinor", {
                let mut b = event.clone();
                b["amountMinor"] = json!(-1);
                b
            })),
            signed: true,
        },
    ];
    // The table covers every operation that writes, so a new one cannot miss the rule.
    let covered: BTreeSet<String> = routes
        .iter()
        .map(|r| format!("{} {}", r.method, r.template))
        .collect();
    assert_eq!(
        covered,
        described_writes(),
        "the table against docs/openapi.yaml"
    );

    let watched = [
        format!("/products/{product}"),
        format!("/products/{spare}"),
        format!("/products/{}", spare + 2),
        format!("/limited-drops/{drop}"),
        format!("/limited-drops/{draw}"),
        format!("/limited-drops/{}", draw + 1),
        format!("/limited-drops/{drop}/stats"),
        format!("/orders/{order}"),
        "/orders".to_owned(),
        "/admin/flags".to_owned(),
        "/admin/payments".to_owned(),
        "/webhook-endpoints".to_owned(),
    ];
    let before = everything(&app, &watched).await;
    let mut cases = 0;
    for route in &routes {
        let name = format!("{} {}", route.method, route.template);
        let valid = route.valid.to_string();
        // 415: not JSON, whatever the body holds.
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            None,
        ] {
            let res = send(&app, route, content_type, &valid).await;
            let p = problem(res, 415, "UNSUPPORTED_MEDIA_TYPE").await;
            assert!(
                p["detail"].as_str().unwrap().contains("application/json"),
                "{name}: {p}"
            );
            cases += 1;
        }
        // 400: not the operation's JSON.
        for unreadable in [&valid[..valid.len() - 1], "[]", "null"] {
            let res = send(&app, route, Some("application/json"), unreadable).await;
            let p = problem(res, 400, "MALFORMED_REQUEST").await;
            assert!(p.get("field").is_none(), "{name} {unreadable}: {p}");
            cases += 1;
        }
        let mut unknown = route.valid.clone();
        unknown["colour"] = json!("red");
        let mut wrong = vec![("colour", unknown)];
        wrong.extend(route.wrong_type.clone());
        for (field, bad) in wrong {
            let res = send(&app, route, Some("application/json"), &bad.to_string()).await;
            let p = problem(res, 400, "MALFORMED_REQUEST").await;
            assert_eq!(p["field"], field, "{name} {bad}: {p}");
            assert!(
                p["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{field}: ")),
                "{name}: {p}"
            );
            cases += 1;
        }
        // 422: readable, out of range.
        if let Some((field, bad)) = &route.out_of_range {
            let res = send(&app, route, Some("application/json"), &bad.to_string()).await;
            let p = problem(res, 422, "VALIDATION_FAILED").await;
            let fields: Vec<&str> = p["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["field"].as_str().unwrap())
                .collect();
            assert_eq!(fields, [*field], "{name}: {p}");
            cases += 1;
        }
    }
    // 14 routes x 7, 7 wrong types, 6 out of range.
    assert_eq!(cases, 111, "cases run");
    assert_eq!(
        everything(&app, &watched).await,
        before,
        "bad input changed something"
    );
}
