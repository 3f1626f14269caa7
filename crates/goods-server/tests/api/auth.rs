use crate::helpers::{TestApp, body, problem};
use jsonwebtoken::{EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::{Value, json};

const SECRET: &str = "a-test-secret-of-32-bytes-length";

fn token(claims: &Value, secret: &str) -> String {
    encode(
        &Header::default(),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn exp(offset: i64) -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp() + offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_mode_accepts_signed_tokens_and_refuses_everything_else() {
    let app = TestApp::spawn_with(&[("AUTH_MODE", "jwt"), ("AUTH_JWT_SECRET", SECRET)]).await;
    let post = |bearer: Option<String>| {
        let mut req = app
            .client
            .post(format!("{}/products", app.address))
            .json(&json!({"name": "P", "stockQuantity": 1}));
        if let Some(b) = bearer {
            req = req.header("Authorization", b);
        }
        req.send()
    };
    let seller = token(
        &json!({"sub": "5", "role": "seller", "exp": exp(600)}),
        SECRET,
    );
    assert_eq!(
        post(Some(format!("Bearer {seller}")))
            .await
            .unwrap()
            .status(),
        StatusCode::CREATED
    );
    let numeric = token(
        &json!({"sub": 5, "role": "seller", "exp": exp(600)}),
        SECRET,
    );
    assert_eq!(
        post(Some(format!("Bearer {numeric}")))
            .await
            .unwrap()
            .status(),
        StatusCode::CREATED
    );
    let buyer = token(&json!({"sub": "6", "exp": exp(600)}), SECRET);
    problem(
        post(Some(format!("Bearer {buyer}"))).await.unwrap(),
        403,
        "FORBIDDEN",
    )
    .await;
    let refused = [
        None,
        Some("Basic abc".to_owned()),
        Some(format!(
            "Bearer {}",
            token(
                &json!({"sub": "5", "role": "seller", "exp": exp(-600)}),
                SECRET
            )
        )),
        Some(format!(
            "Bearer {}",
            token(
                &json!({"sub": "5", "role": "seller", "exp": exp(600)}),
                "another-secret-of-enough-length"
            )
        )),
        Some(format!(
            "Bearer {}",
            token(&json!({"sub": "5", "role": "seller"}), SECRET)
        )),
        Some(format!(
            "Bearer {}",
            token(&json!({"sub": "-3", "exp": exp(600)}), SECRET)
        )),
        Some(format!(
            "Bearer {}",
            token(
                &json!({"sub": "5", "role": "admin", "exp": exp(600)}),
                SECRET
            )
        )),
    ];
    for bearer in refused {
        problem(post(bearer.clone()).await.unwrap(), 401, "UNAUTHENTICATED").await;
    }
    // Identity headers mean nothing in JWT mode.
    let spoofed = app
        .client
        .post(format!("{}/products", app.address))
        .header("X-User-Id", "5")
        .header("X-User-Role", "seller")
        .json(&json!({"name": "P", "stockQuantity": 1}))
        .send()
        .await
        .unwrap();
    problem(spoofed, 401, "UNAUTHENTICATED").await;
    let products = body(
        app.client
            .get(format!("{}/products/1", app.address))
            .header("Authorization", format!("Bearer {buyer}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(products["productId"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_header_mode_refuses_missing_or_malformed_identities() {
    let app = TestApp::spawn().await;
    for (id, role) in [("0", "buyer"), ("abc", "buyer"), ("5", "root")] {
        let res = app
            .client
            .get(format!("{}/products/1", app.address))
            .header("X-User-Id", id)
            .header("X-User-Role", role)
            .send()
            .await
            .unwrap();
        problem(res, 401, "UNAUTHENTICATED").await;
    }
}
