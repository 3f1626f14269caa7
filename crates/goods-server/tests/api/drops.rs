use crate::helpers::{TestApp, at, body, problem};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use time::OffsetDateTime;

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_is_created_scheduled_with_a_default_per_user_limit_of_one() {
    let app = TestApp::spawn().await;
    let product = app.create_product(150).await;
    // A whole hour some days ahead, sent once in UTC and once with an offset.
    let day = (OffsetDateTime::now_utc() + time::Duration::days(3)).date();
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": format!("{day}T09:00:00Z"),
            "closeAt": format!("{day}T11:00:00+01:00"),
            "limitedQuantity": 100,
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let drop = body(res).await;
    assert_eq!(drop["status"], "SCHEDULED");
    assert_eq!(drop["perUserLimit"], 1);
    assert_eq!(drop["remaining"], 100);
    assert_eq!(drop["openAt"], format!("{day}T09:00:00Z"));
    assert_eq!(
        drop["closeAt"],
        format!("{day}T10:00:00Z"),
        "timestamps come back in UTC"
    );
    let id = drop["dropId"].as_i64().unwrap();
    let read = body(app.get(&format!("/limited-drops/{id}"), None).await).await;
    assert_eq!(read, drop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_creation_rule_is_a_422_naming_its_field() {
    let app = TestApp::spawn().await;
    let product = app.create_product(10).await;
    let now = OffsetDateTime::now_utc();
    let base = json!({
        "productId": product,
        "openAt": at(now + HOUR),
        "closeAt": at(now + 2 * HOUR),
        "limitedQuantity": 10,
        "perUserLimit": 1,
    });
    let cases = [
        ("closeAt", json!({"closeAt": at(now + HOUR)})),
        (
            "closeAt",
            json!({"openAt": at(now - 2 * HOUR), "closeAt": at(now - HOUR)}),
        ),
        ("perUserLimit", json!({"perUserLimit": 11})),
        ("perUserLimit", json!({"perUserLimit": 0})),
        ("limitedQuantity", json!({"limitedQuantity": 0})),
        (
            "limitedQuantity",
            json!({"limitedQuantity": 11, "perUserLimit": 1}),
        ),
        // Valid RFC 3339 instants far outside the horizon: refused, never a crash.
        ("closeAt", json!({"closeAt": "9999-12-31T22:00:00-05:00"})),
        ("openAt", json!({"openAt": "0000-01-01T00:00:00+01:00"})),
        (
            "openAt",
            json!({"openAt": "9999-12-31T23:00:00Z", "closeAt": "9999-12-31T23:30:00Z"}),
        ),
    ];
    for (field, change) in cases {
        let mut input = base.clone();
        input
            .as_object_mut()
            .unwrap()
            .extend(change.as_object().unwrap().clone());
        let body = problem(app.post_drop(&input).await, 422, "VALIDATION_FAILED").await;
        let fields: Vec<_> = body["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].clone())
            .collect();
        assert!(fields.contains(&json!(field)), "{input} -> {body}");
    }
    problem(
        app.post_drop(&json!({"productId": product})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    problem(
        app.post_drop(&json!({"productId": product, "openAt": "tomorrow", "closeAt": at(now + HOUR), "limitedQuantity": 1})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    let mut missing = base.clone();
    missing["productId"] = json!(999_999);
    problem(app.post_drop(&missing).await, 404, "PRODUCT_NOT_FOUND").await;
    // Nothing above created a drop: the product can still get one.
    assert_eq!(app.post_drop(&base).await.status(), StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_product_with_a_drop_that_is_not_closed_cannot_get_another() {
    let app = TestApp::spawn().await;
    let product = app.create_product(10).await;
    let now = OffsetDateTime::now_utc();
    let drop = json!({"productId": product, "openAt": at(now + HOUR), "closeAt": at(now + 2 * HOUR), "limitedQuantity": 5});
    assert_eq!(app.post_drop(&drop).await.status(), StatusCode::CREATED);
    problem(app.post_drop(&drop).await, 409, "DROP_ALREADY_ACTIVE").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_reads_are_public_and_unknown_drops_are_404() {
    let app = TestApp::spawn().await;
    problem(
        app.get("/limited-drops/42", None).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    problem(
        app.get("/limited-drops/-1", None).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    let (_, drop) = app.open_drop(5, 5, 1).await;
    let view = body(app.get(&format!("/limited-drops/{drop}"), None).await).await;
    assert_eq!(view["status"], "OPEN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_sellers_create_drops() {
    let app = TestApp::spawn().await;
    let res = app
        .request(reqwest::Method::POST, "/limited-drops", Some((5, "buyer")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    problem(res, 403, "FORBIDDEN").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_follows_the_clock_from_scheduled_to_open_to_closed() {
    let app = TestApp::spawn().await;
    let (_, drop) = app
        .drop_with(
            5,
            5,
            1,
            time::Duration::milliseconds(300),
            time::Duration::milliseconds(1800),
        )
        .await;
    let status = || async {
        body(app.get(&format!("/limited-drops/{drop}"), None).await).await["status"].clone()
    };
    // The server's clock moves; nothing sleeps. Each boundary is exact to the millisecond.
    assert_eq!(status().await, "SCHEDULED");
    app.clock.advance(time::Duration::milliseconds(299));
    assert_eq!(status().await, "SCHEDULED");
    app.clock.advance(time::Duration::milliseconds(1));
    assert_eq!(status().await, "OPEN");
    app.clock.advance(time::Duration::milliseconds(1499));
    assert_eq!(status().await, "OPEN");
    app.clock.advance(time::Duration::milliseconds(1));
    assert_eq!(status().await, "CLOSED");
}

/// `SELLER_MAX_ACTIVE_DROPS`: a seller's drops not yet closed are counted at creation; one past
/// the quota is 409 `QUOTA_EXCEEDED` with the limit, and creates nothing; closing one frees a
/// place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seller_past_the_quota_of_drops_not_yet_closed_is_409_until_one_closes() {
    let app = TestApp::spawn_with(&[("SELLER_MAX_ACTIVE_DROPS", "2")]).await;
    let now = OffsetDateTime::now_utc();
    let drop_of = |product: i64| json!({"productId": product, "openAt": at(now + HOUR), "closeAt": at(now + 2 * HOUR), "limitedQuantity": 5});
    let mut created = Vec::new();
    for _ in 0..2 {
        let product = app.create_product(10).await;
        let res = app.post_drop(&drop_of(product)).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        created.push(body(res).await["dropId"].as_i64().unwrap());
    }
    let third = app.create_product(10).await;
    let refused = problem(app.post_drop(&drop_of(third)).await, 409, "QUOTA_EXCEEDED").await;
    assert_eq!(refused["limit"], 2);
    let closed = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{}/close", created[0]),
            Some((crate::helpers::SELLER, "seller")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), StatusCode::OK);
    // The refused creation left nothing on the product: it gets its drop now (a drop left
    // behind would make this DROP_ALREADY_ACTIVE).
    assert_eq!(
        app.post_drop(&drop_of(third)).await.status(),
        StatusCode::CREATED
    );
}
