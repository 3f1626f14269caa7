use crate::helpers::{TestApp, body, problem};
use jsonwebtoken::{EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::{Value, json};

pub const SECRET: &str = "jwt_5Hq8vR2nX7cK4mT9wB3zL6pD1fG0sJyE";

pub fn token(claims: &Value, secret: &str) -> String {
    api_actix::install_jwt_crypto();
    encode(
        &Header::default(),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

pub fn exp(offset: i64) -> i64 {
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
    let admin = token(&json!({"sub": 8, "role": "admin", "exp": exp(600)}), SECRET);
    // A token for just under the bound is accepted.
    let day = token(
        &json!({"sub": "5", "role": "seller", "exp": exp(86_400 - 60)}),
        SECRET,
    );
    assert_eq!(
        post(Some(format!("Bearer {day}"))).await.unwrap().status(),
        StatusCode::CREATED
    );
    let created = post(Some(format!("Bearer {admin}"))).await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(body(created).await["ownerId"], 8);
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
                &json!({"sub": "5", "role": "root", "exp": exp(600)}),
                SECRET
            )
        )),
        // Valid for longer than AUTH_JWT_MAX_TTL_S (a day by default) allows.
        Some(format!(
            "Bearer {}",
            token(
                &json!({"sub": "5", "role": "seller", "exp": exp(86_400 + 120)}),
                SECRET
            )
        )),
        // Not valid yet.
        Some(format!(
            "Bearer {}",
            token(
                &json!({"sub": "5", "role": "seller", "exp": exp(600), "nbf": exp(300)}),
                SECRET
            )
        )),
    ];
    for bearer in refused {
        let refusal = problem(post(bearer.clone()).await.unwrap(), 401, "UNAUTHENTICATED").await;
        assert!(
            !refusal["detail"].as_str().unwrap().contains("Error"),
            "no library internals: {refusal}"
        );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_issuer_and_audience_are_checked_when_configured() {
    let app = TestApp::spawn_with(&[
        ("AUTH_MODE", "jwt"),
        ("AUTH_JWT_SECRET", SECRET),
        ("AUTH_JWT_ISSUER", "https://id.example"),
        ("AUTH_JWT_AUDIENCE", "goods"),
    ])
    .await;
    let get = |claims: Value| {
        app.client
            .get(format!("{}/products/1", app.address))
            .header(
                "Authorization",
                format!("Bearer {}", token(&claims, SECRET)),
            )
            .send()
    };
    let good = json!({"sub": "5", "exp": exp(600), "iss": "https://id.example", "aud": "goods"});
    assert_eq!(
        get(good).await.unwrap().status().as_u16(),
        404,
        "authenticated: no product 1"
    );
    for claims in [
        json!({"sub": "5", "exp": exp(600), "iss": "https://evil.example", "aud": "goods"}),
        json!({"sub": "5", "exp": exp(600), "iss": "https://id.example", "aud": "other"}),
        json!({"sub": "5", "exp": exp(600)}),
    ] {
        problem(get(claims).await.unwrap(), 401, "UNAUTHENTICATED").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_identity_header_is_refused() {
    let app = TestApp::spawn().await;
    // reqwest appends: the second value is sent as a second header line.
    for (name, again) in [("X-User-Id", "6"), ("X-User-Role", "seller")] {
        let req = app
            .client
            .get(format!("{}/products/1", app.address))
            .header("X-User-Id", "5")
            .header("X-User-Role", "buyer")
            .header(name, again);
        problem(req.send().await.unwrap(), 401, "UNAUTHENTICATED").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_headers_from_outside_the_trusted_proxies_are_refused() {
    // The test client calls from loopback, which this server does not trust.
    let app = TestApp::spawn_with(&[
        ("AUTH_MODE", "trusted-header"),
        ("AUTH_TRUSTED_PROXIES", "10.0.0.0/8"),
    ])
    .await;
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
}
