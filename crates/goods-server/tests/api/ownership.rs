//! Seller ownership: a product belongs to the seller who created it; another seller does not
//! see it, its drops' stats and reconciliation, nor its orders; admins see everything.

use crate::helpers::{SELLER, TestApp, at, body, problem};
use reqwest::{Method, StatusCode};
use serde_json::json;
use time::OffsetDateTime;

const OTHER_SELLER: i64 = 900_001;
const ADMIN: i64 = 900_100;
const BUYER: i64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_seller_finds_nothing_and_an_admin_finds_everything() {
    let app = TestApp::spawn().await;
    let product = app.create_product(10).await;
    let read = body(
        app.get(&format!("/products/{product}"), Some((SELLER, "seller")))
            .await,
    )
    .await;
    assert_eq!(read["ownerId"], SELLER);

    // The other seller: the product does not exist, and no drop can be made of it.
    problem(
        app.get(
            &format!("/products/{product}"),
            Some((OTHER_SELLER, "seller")),
        )
        .await,
        404,
        "PRODUCT_NOT_FOUND",
    )
    .await;
    let now = OffsetDateTime::now_utc();
    let drop_body = json!({
        "productId": product,
        "openAt": at(now - time::Duration::seconds(1)),
        "closeAt": at(now + time::Duration::hours(1)),
        "limitedQuantity": 5,
    });
    problem(
        app.request(
            Method::POST,
            "/limited-drops",
            Some((OTHER_SELLER, "seller")),
        )
        .json(&drop_body)
        .send()
        .await
        .unwrap(),
        404,
        "PRODUCT_NOT_FOUND",
    )
    .await;
    // Nothing was created: the owner's drop is the product's first (no DROP_ALREADY_ACTIVE).
    let res = app.post_drop(&drop_body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let drop = body(res).await["dropId"].as_i64().unwrap();

    for path in [
        format!("/limited-drops/{drop}/stats"),
        format!("/limited-drops/{drop}/reconciliation"),
    ] {
        problem(
            app.get(&path, Some((OTHER_SELLER, "seller"))).await,
            404,
            "DROP_NOT_FOUND",
        )
        .await;
        for owner in [(SELLER, "seller"), (ADMIN, "admin")] {
            let res = app.get(&path, Some(owner)).await;
            assert_eq!(res.status(), StatusCode::OK, "{path} as {owner:?}");
            assert_eq!(body(res).await["dropId"], drop);
        }
    }
    // An admin reads the product too, and may create products of its own.
    let res = app
        .get(&format!("/products/{product}"), Some((ADMIN, "admin")))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .request(Method::POST, "/products", Some((ADMIN, "admin")))
        .json(&json!({"name": "Admin's", "stockQuantity": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(body(res).await["ownerId"], ADMIN);
    // Admins do not buy.
    problem(
        app.request(
            Method::POST,
            &format!("/limited-drops/{drop}/orders"),
            Some((ADMIN, "admin")),
        )
        .header("Idempotency-Key", "admin-1")
        .json(&json!({"quantity": 1}))
        .send()
        .await
        .unwrap(),
        403,
        "FORBIDDEN",
    )
    .await;
    // Buyers still read the product (it is on sale).
    let res = app
        .get(&format!("/products/{product}"), Some((BUYER, "buyer")))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_is_seen_by_its_buyer_the_owning_seller_and_admins_only() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 5, 1).await;
    let res = app.purchase(drop, BUYER, "own-1", 1).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let order = body(res).await["orderId"].as_i64().unwrap();
    let path = format!("/orders/{order}");
    for reader in [(BUYER, "buyer"), (SELLER, "seller"), (ADMIN, "admin")] {
        let res = app.get(&path, Some(reader)).await;
        assert_eq!(res.status(), StatusCode::OK, "as {reader:?}");
        assert_eq!(body(res).await["orderId"], order);
    }
    let missing = problem(
        app.get("/orders/999999", Some((BUYER, "buyer"))).await,
        404,
        "ORDER_NOT_FOUND",
    )
    .await;
    for stranger in [(BUYER + 1, "buyer"), (OTHER_SELLER, "seller")] {
        let theirs = problem(app.get(&path, Some(stranger)).await, 404, "ORDER_NOT_FOUND").await;
        assert_eq!(theirs, missing, "as {stranger:?}: no existence oracle");
    }
}
