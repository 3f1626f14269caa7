use crate::helpers::{SELLER, TestApp, at, body, problem};
use goods_domain::ports::Clock as _;
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
    // Neither stockQuantity nor variants: the rule is the domain's, so a 422 naming the field.
    let neither = problem(
        post(Some((SELLER, "seller")), json!({"name": "x"}))
            .await
            .unwrap(),
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(neither["errors"][0]["field"], "stockQuantity");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_product_in_sizes_keeps_a_stock_per_size_and_their_sum() {
    let app = TestApp::spawn().await;
    let variants = json!([
        {"sku": "US-9", "label": "US 9", "stockQuantity": 3},
        {"sku": "US-10", "label": "  US 10 ", "stockQuantity": 0},
        {"sku": "us-9", "label": "US 9 (narrow)", "stockQuantity": 4},
    ]);
    let res = app
        .request(Method::POST, "/products", Some((SELLER, "seller")))
        .json(&json!({"name": "Sneaker", "variants": variants}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await;
    assert_eq!(created["stockQuantity"], 7);
    // In the seller's order, labels trimmed, skus compared byte for byte.
    assert_eq!(
        created["variants"],
        json!([
            {"sku": "US-9", "label": "US 9", "stockQuantity": 3},
            {"sku": "US-10", "label": "US 10", "stockQuantity": 0},
            {"sku": "us-9", "label": "US 9 (narrow)", "stockQuantity": 4},
        ])
    );
    let id = created["productId"].as_i64().unwrap();
    let read = body(
        app.get(&format!("/products/{id}"), Some((1, "buyer")))
            .await,
    )
    .await;
    assert_eq!(read, created);
    // A product without variants reads as before: no variants field.
    let plain = app.create_product(5).await;
    let plain = body(
        app.get(&format!("/products/{plain}"), Some((1, "buyer")))
            .await,
    )
    .await;
    assert!(plain.get("variants").is_none(), "{plain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_product_in_sizes_is_refused_for_each_broken_rule_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let post = |body: serde_json::Value| {
        app.request(Method::POST, "/products", Some((SELLER, "seller")))
            .json(&body)
            .send()
    };
    let v = |sku: &str, stock: i64| json!({"sku": sku, "label": sku, "stockQuantity": stock});
    let many: Vec<_> = (0..101).map(|i| v(&format!("S{i}"), 1)).collect();
    for (body, message) in [
        (
            json!({"name": "x", "stockQuantity": 1, "variants": [v("A", 1)]}),
            "variants: is given instead of stockQuantity, not with it",
        ),
        (
            json!({"name": "x", "variants": []}),
            "variants: must hold 1 to 100 items, not 0",
        ),
        (
            json!({"name": "x", "variants": many}),
            "variants: must hold 1 to 100 items, not 101",
        ),
        (
            json!({"name": "x", "variants": [v("A", 1), v("A", 2)]}),
            "variants: [1].sku: repeats an earlier item's",
        ),
        (
            json!({"name": "x", "variants": [v("US 9", 1)]}),
            "variants: [0].sku: must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'",
        ),
        (
            json!({"name": "x", "variants": [v("A", -1)]}),
            "variants: [0].stockQuantity: must be between 0 and 2147483647",
        ),
        (
            json!({"name": "x", "variants": [v("A", 2_147_483_647), v("B", 1)]}),
            "variants: stockQuantity must not sum to more than 2147483647",
        ),
        (
            json!({"name": "x", "variants": [{"sku": "A", "label": "\u{202E}A", "stockQuantity": 1}]}),
            "variants: [0].label: must not contain control or bidirectional formatting characters (U+202E)",
        ),
    ] {
        let refused = problem(post(body.clone()).await.unwrap(), 422, "VALIDATION_FAILED").await;
        let errors = &refused["errors"];
        let said = format!(
            "{}: {}",
            errors[0]["field"].as_str().unwrap(),
            errors[0]["message"].as_str().unwrap()
        );
        assert_eq!(
            (said.as_str(), errors.as_array().unwrap().len()),
            (message, 1),
            "{body}"
        );
    }
    // Each field has one type: null is not an absent field.
    for body in [
        json!({"name": "x", "stockQuantity": 1, "variants": null}),
        json!({"name": "x", "stockQuantity": null, "variants": [v("A", 1)]}),
    ] {
        problem(post(body).await.unwrap(), 400, "MALFORMED_REQUEST").await;
    }
    // A variant's unknown field is malformed JSON for this API, as anywhere else.
    problem(
        post(json!({"name": "x", "variants": [{"sku": "A", "label": "a", "stockQuantity": 1, "colour": "red"}]}))
            .await
            .unwrap(),
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    problem(
        app.get("/products/1", Some((1, "buyer"))).await,
        404,
        "PRODUCT_NOT_FOUND",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_of_a_product_in_sizes_must_name_its_sizes() {
    let app = TestApp::spawn().await;
    let res = app
        .request(Method::POST, "/products", Some((SELLER, "seller")))
        .json(&json!({"name": "Sneaker", "variants": [
            {"sku": "US-9", "label": "US 9", "stockQuantity": 3},
        ]}))
        .send()
        .await
        .unwrap();
    let product = body(res).await["productId"].as_i64().unwrap();
    let now = app.clock.now();
    let refused = problem(
        app.post_drop(&json!({
            "productId": product,
            "openAt": at(now + time::Duration::hours(1)),
            "closeAt": at(now + time::Duration::hours(2)),
            "limitedQuantity": 1,
        }))
        .await,
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(refused["errors"][0]["field"], "variants");
    problem(
        app.get("/limited-drops/1", None).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
}
