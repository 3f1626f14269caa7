use crate::helpers::{SELLER, TestApp, body, problem};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seller_creates_a_product_and_anyone_signed_in_reads_it() {
    let app = TestApp::spawn().await;
    let res = app
        .request(Method::POST, "/products", Some((SELLER, "seller")))
        .json(&json!({"name": "Sneaker", "stockQuantity": 150}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await;
    assert_eq!(created["name"], "Sneaker");
    assert_eq!(created["stockQuantity"], 150);
    let id = created["productId"].as_i64().unwrap();
    let read = body(
        app.get(&format!("/products/{id}"), Some((1, "buyer")))
            .await,
    )
    .await;
    assert_eq!(read, created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn product_errors_are_problems_and_change_nothing() {
    let app = TestApp::spawn().await;
    let post = |user, body: serde_json::Value| {
        app.request(Method::POST, "/products", user)
            .json(&body)
            .send()
    };
    problem(
        post(None, json!({"name": "x", "stockQuantity": 1}))
            .await
            .unwrap(),
        401,
        "UNAUTHENTICATED",
    )
    .await;
    problem(
        post(Some((1, "buyer")), json!({"name": "x", "stockQuantity": 1}))
            .await
            .unwrap(),
        403,
        "FORBIDDEN",
    )
    .await;
    problem(
        post(Some((SELLER, "seller")), json!({"name": "x"}))
            .await
            .unwrap(),
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    let invalid = problem(
        post(
            Some((SELLER, "seller")),
            json!({"name": " ", "stockQuantity": -1}),
        )
        .await
        .unwrap(),
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(invalid["errors"][0]["field"], "name");
    assert_eq!(invalid["errors"][1]["field"], "stockQuantity");
    // A name that would display other than it reads (a right-to-left override turns
    // "Sneaker \u{202E}gpj.exe" into "Sneaker exe.jpg"), or that holds a control character.
    for name in [
        "Sneaker \u{202E}gpj.exe",
        "Snea\u{2066}ker",
        "Sneaker\u{7}",
        "Sneak\ner",
    ] {
        let refused = problem(
            post(
                Some((SELLER, "seller")),
                json!({"name": name, "stockQuantity": 1}),
            )
            .await
            .unwrap(),
            422,
            "VALIDATION_FAILED",
        )
        .await;
        assert_eq!(refused["errors"][0]["field"], "name", "{name:?}");
    }
    problem(
        app.get("/products/1", Some((1, "buyer"))).await,
        404,
        "PRODUCT_NOT_FOUND",
    )
    .await;
    problem(
        app.get("/products/abc", Some((1, "buyer"))).await,
        404,
        "PRODUCT_NOT_FOUND",
    )
    .await;
    problem(app.get("/products/1", None).await, 401, "UNAUTHENTICATED").await;
}
