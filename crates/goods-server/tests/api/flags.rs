//! Runtime feature flags: admins read and set them; the kill switch hides every drop route;
//! the gate flag sends purchases to the database and brings the gate back resynced; a flip
//! reaches another instance within a second, by a Redis notice when there is one.

use crate::helpers::{SELLER, TestApp, at, body, gate_on, problem, series_value};
use goods_domain::ports::Clock as _;
use reqwest::{Method, Response, StatusCode};
use serde_json::json;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

const ADMIN: (i64, &str) = (900_100, "admin");

async fn set(app: &TestApp, name: &str, enabled: bool, who: (i64, &str)) -> Response {
    app.request(Method::PUT, &format!("/admin/flags/{name}"), Some(who))
        .json(&json!({ "enabled": enabled }))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_read_and_set_flags_and_nobody_else_does() {
    let app = TestApp::spawn().await;
    problem(
        app.get("/admin/flags", Some((SELLER, "seller"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(app.get("/admin/flags", None).await, 401, "UNAUTHENTICATED").await;
    let flags = body(app.get("/admin/flags", Some(ADMIN)).await).await;
    assert_eq!(
        flags,
        json!([
            {"name": "limited-drop.enabled", "enabled": true, "updatedAt": null, "updatedBy": null},
            {"name": "limited-drop.redis-gate.enabled", "enabled": true, "updatedAt": null, "updatedBy": null},
        ])
    );
    problem(
        set(&app, "limited-drop.enabled", false, (SELLER, "seller")).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(
        set(&app, "no.such.flag", false, ADMIN).await,
        404,
        "FLAG_NOT_FOUND",
    )
    .await;
    let bad = app
        .request(
            Method::PUT,
            "/admin/flags/limited-drop.enabled",
            Some(ADMIN),
        )
        .json(&json!({"enabled": "no"}))
        .send()
        .await
        .unwrap();
    problem(bad, 400, "MALFORMED_REQUEST").await;
    // Nothing changed so far.
    assert_eq!(
        body(app.get("/admin/flags", Some(ADMIN)).await).await,
        flags
    );

    let res = set(&app, "limited-drop.redis-gate.enabled", false, ADMIN).await;
    assert_eq!(res.status(), StatusCode::OK);
    let flag = body(res).await;
    assert_eq!(flag["enabled"], false);
    assert_eq!(flag["updatedBy"], ADMIN.0);
    assert!(flag["updatedAt"].is_string());
    let metrics = app.metrics().await;
    assert_eq!(
        series_value(
            &metrics,
            r#"flag_changes_total{flag="limited-drop.redis-gate.enabled",enabled="false"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kill_switch_hides_every_drop_route_until_it_is_turned_back_on() {
    let app = TestApp::spawn().await;
    let (product, drop) = app.open_drop(10, 5, 1).await;
    assert_eq!(
        set(&app, "limited-drop.enabled", false, ADMIN)
            .await
            .status(),
        StatusCode::OK
    );
    problem(
        app.get(&format!("/limited-drops/{drop}"), None).await,
        404,
        "DROP_NOT_FOUND",
    )
    .await;
    problem(app.purchase(drop, 1, "k-1", 1).await, 404, "DROP_NOT_FOUND").await;
    for path in ["stats", "reconciliation"] {
        problem(
            app.get(
                &format!("/limited-drops/{drop}/{path}"),
                Some((SELLER, "seller")),
            )
            .await,
            404,
            "DROP_NOT_FOUND",
        )
        .await;
    }
    let now = OffsetDateTime::now_utc();
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(now),
            "closeAt": at(now + time::Duration::hours(1)),
            "limitedQuantity": 1,
        }))
        .await;
    problem(res, 404, "DROP_NOT_FOUND").await;

    assert_eq!(
        set(&app, "limited-drop.enabled", true, ADMIN)
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(app.remaining(drop).await, 5, "nothing was sold while off");
    assert_eq!(
        app.purchase(drop, 1, "k-1", 1).await.status(),
        StatusCode::ACCEPTED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_flag_off_the_database_sells_and_the_gate_returns_resynced() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 4, 1).await;
    assert_eq!(
        app.purchase(drop, 1, "g-1", 1).await.status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(
        set(&app, "limited-drop.redis-gate.enabled", false, ADMIN)
            .await
            .status(),
        StatusCode::OK
    );
    for buyer in 2..=3 {
        assert_eq!(
            app.purchase(drop, buyer, "g", 1).await.status(),
            StatusCode::ACCEPTED
        );
    }
    if gate_on() {
        let metrics = app.metrics().await;
        assert_eq!(
            series_value(&metrics, r#"gate_fallbacks_total{reason="flag_off"}"#),
            Some(2.0),
            "both purchases went to the database alone"
        );
    }
    assert_eq!(
        set(&app, "limited-drop.redis-gate.enabled", true, ADMIN)
            .await
            .status(),
        StatusCode::OK
    );
    // The gate was resynced before admitting: it knows of the database's three sales, so it
    // admits exactly the last unit and no more.
    let recon = body(
        app.get(
            &format!("/limited-drops/{drop}/reconciliation"),
            Some((SELLER, "seller")),
        )
        .await,
    )
    .await;
    assert_eq!(recon["soldQuantity"], 3);
    if gate_on() {
        assert_eq!(recon["gateRemaining"], 1, "{recon}");
        assert_eq!(recon["drift"], 0, "{recon}");
    }
    assert_eq!(
        app.purchase(drop, 4, "g", 1).await.status(),
        StatusCode::ACCEPTED
    );
    problem(app.purchase(drop, 5, "g", 1).await, 409, "SOLD_OUT").await;
}

/// Waits until `app` hides `drop` (the kill switch arrived), failing a second after `flipped`.
async fn hidden_within_a_second(app: &TestApp, drop: i64, flipped: Instant) {
    loop {
        let res = app.get(&format!("/limited-drops/{drop}"), None).await;
        if res.status() == StatusCode::NOT_FOUND {
            problem(res, 404, "DROP_NOT_FOUND").await;
            return;
        }
        assert!(
            flipped.elapsed() < Duration::from_secs(1),
            "the other instance still serves drops a second after the kill switch"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_flip_reaches_another_instance_within_a_second() {
    let a = TestApp::spawn().await;
    let b = a.sibling().await;
    let (_, drop) = a.open_drop(10, 5, 1).await;
    assert_eq!(
        b.get(&format!("/limited-drops/{drop}"), None)
            .await
            .status(),
        StatusCode::OK
    );
    let flipped = Instant::now();
    assert_eq!(
        set(&a, "limited-drop.enabled", false, ADMIN).await.status(),
        StatusCode::OK
    );
    hidden_within_a_second(&b, drop, flipped).await;
    // And the flag list of every instance agrees.
    let flags = body(b.get("/admin/flags", Some(ADMIN)).await).await;
    assert_eq!(flags[0]["enabled"], false);
}

/// The design document's release plan: the code ships dark (`FLAGS_AT_FIRST_START=off`): on a
/// database whose flags were never set, both start off and every drop route answers as if the
/// feature did not exist; an admin turns the feature on, and a restart with the same
/// configuration keeps it on (only flags never set are set by the configuration).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_shipped_dark_serves_no_drop_until_an_admin_turns_it_on_and_a_restart_keeps_it() {
    let app = TestApp::spawn_with(&[("FLAGS_AT_FIRST_START", "off")]).await;
    let flags = body(app.get("/admin/flags", Some(ADMIN)).await).await;
    for (flag, name) in flags
        .as_array()
        .unwrap()
        .iter()
        .zip(["limited-drop.enabled", "limited-drop.redis-gate.enabled"])
    {
        assert_eq!(
            (&flag["name"], &flag["enabled"], &flag["updatedBy"]),
            (&json!(name), &json!(false), &json!(null)),
            "{flags}"
        );
        assert!(flag["updatedAt"].is_string(), "{flags}");
    }
    let product = app.create_product(10).await;
    // The server's clock, not the wall's: it stands still from the spawn on.
    let now = app.clock.now();
    let drop_body = json!({
        "productId": product,
        "openAt": at(now - time::Duration::seconds(1)),
        "closeAt": at(now + time::Duration::hours(1)),
        "limitedQuantity": 5,
    });
    problem(app.post_drop(&drop_body).await, 404, "DROP_NOT_FOUND").await;

    assert_eq!(
        set(&app, "limited-drop.enabled", true, ADMIN)
            .await
            .status(),
        StatusCode::OK
    );
    let created = app.post_drop(&drop_body).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let drop = body(created).await["dropId"].as_i64().unwrap();

    let app = app.restart().await;
    let view = app.get(&format!("/limited-drops/{drop}"), None).await;
    assert_eq!(
        view.status(),
        StatusCode::OK,
        "the feature stays on after a restart"
    );
    let flags = body(app.get("/admin/flags", Some(ADMIN)).await).await;
    assert_eq!(flags[0]["enabled"], json!(true), "{flags}");
    assert_eq!(flags[1]["enabled"], json!(false), "{flags}");
    let res = app.purchase(drop, 1, "k-1", 1).await;
    assert_eq!(
        res.status(),
        StatusCode::ACCEPTED,
        "the database-only path sells"
    );
}

/// Two instances on the shared test Redis.
mod needs_redis {
    use super::*;

    /// With a shared Redis the change arrives by a notice: the other instance polls only every ten
    /// minutes here, yet sees a pause and the kill switch within a second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_a_shared_redis_a_change_arrives_by_notice_long_before_the_poll() {
        let (a, b) = TestApp::pair_on_shared_redis(&[("DROP_REFRESH_MS", "600000")]).await;
        let (_, drop) = a.open_drop(10, 5, 1).await;
        assert_eq!(
            b.purchase(drop, 1, "n-1", 1).await.status(),
            StatusCode::ACCEPTED,
            "b has the drop cached"
        );

        let paused_at = Instant::now();
        let res = a
            .request(
                Method::POST,
                &format!("/limited-drops/{drop}/pause"),
                Some((SELLER, "seller")),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        loop {
            let res = b.purchase(drop, 2, "n-2", 1).await;
            if res.status() == StatusCode::CONFLICT {
                problem(res, 409, "DROP_PAUSED").await;
                break;
            }
            assert_eq!(res.status(), StatusCode::ACCEPTED, "before the notice");
            assert!(
                paused_at.elapsed() < Duration::from_secs(1),
                "no notice within a second (the poll is ten minutes away)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let flipped = Instant::now();
        assert_eq!(
            set(&a, "limited-drop.enabled", false, ADMIN).await.status(),
            StatusCode::OK
        );
        hidden_within_a_second(&b, drop, flipped).await;
    }
}
