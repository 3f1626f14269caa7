//! A draw drop in sizes over HTTP, in every mode the suite runs in: each entry names its size,
//! each size's units go to its own best-ranked entries, each size has its own waitlist and
//! cutoff, and `goods-server verify-draw` checks an entry with its size's cutoff.

use crate::draws::{until_drawn, until_status, view};
use crate::helpers::{TestApp, at, body, problem};
use crate::sizes::{drop_variants, product_in_sizes};
use futures::future::join_all;
use goods_domain::ports::Clock as _;
use goods_domain::{DrawCommitment, DrawSeed, UserId};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;

const SIZES: [(&str, i64); 3] = [("US-9", 3), ("US-10", 2), ("US-11", 1)];
const BUYERS: i64 = 30;

/// The size buyer `user` enters for: ten buyers a size.
fn size_of(user: i64) -> &'static str {
    SIZES[usize::try_from(user % 3).unwrap()].0
}

/// A draw drop of [`SIZES`] on a product with as much stock, taking entries from a second ago
/// for ten minutes.
async fn sized_draw(app: &TestApp) -> i64 {
    let product = product_in_sizes(app, &SIZES).await;
    let open = app.clock.now() - time::Duration::seconds(1);
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(open),
            "closeAt": at(open + time::Duration::minutes(70)),
            "variants": drop_variants(&SIZES),
            "mode": "DRAW",
            "entryCloseAt": at(open + time::Duration::minutes(10)),
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    body(res).await["dropId"].as_i64().unwrap()
}

async fn enter(app: &TestApp, drop: i64, user: i64, input: &Value) -> reqwest::Response {
    app.request(
        reqwest::Method::POST,
        &format!("/limited-drops/{drop}/entries"),
        Some((user, "buyer")),
    )
    .json(input)
    .send()
    .await
    .unwrap()
}

async fn my_entry(app: &TestApp, drop: i64, user: i64) -> Value {
    body(
        app.get(
            &format!("/limited-drops/{drop}/entries/me"),
            Some((user, "buyer")),
        )
        .await,
    )
    .await
}

/// `goods-server verify-draw` for `user` with `cutoff`: its last line (`WON` or `NOT_WON`).
fn verify_draw(seed: &str, commitment: &str, user: i64, cutoff: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .args(["verify-draw", "--seed", seed, "--commitment", commitment])
        .args(["--user", &user.to_string(), "--cutoff", cutoff])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().last().unwrap().to_owned()
}

/// 30 buyers race their entries, ten a size (US-9 3 units, US-10 2, US-11 1): each size's best
/// ranked entries win exactly its units, the others wait in their size's own waitlist, the view
/// gives each size's cutoff, verify-draw agrees for every one of the 30 with its size's cutoff,
/// and a unit given back in US-10 goes to US-10's first waitlisted entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_size_of_a_draw_goes_to_its_own_best_ranked_entries_and_waitlist() {
    let app = TestApp::spawn_with(&[
        ("RECONCILE_INTERVAL_MS", "0"),
        ("DB_WRITE_WAIT_MS", "60000"),
    ])
    .await;
    let drop = sized_draw(&app).await;
    // A size is required, and one of the drop's; nothing is entered for a refusal.
    let missing = problem(
        enter(&app, drop, 1, &json!({})).await,
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(missing["errors"][0]["field"], "sku", "{missing}");
    let unknown = problem(
        enter(&app, drop, 1, &json!({"sku": "US-12"})).await,
        422,
        "VALIDATION_FAILED",
    )
    .await;
    assert_eq!(unknown["detail"], "sku: is not one of this drop's sizes");
    assert_eq!(view(&app, drop).await["entryCount"], 0);

    let entries = (1..=BUYERS).map(|user| {
        let app = &app;
        async move {
            let res = enter(app, drop, user, &json!({"sku": size_of(user)})).await;
            (res.status(), body(res).await)
        }
    });
    for (status, entry) in join_all(entries).await {
        assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
        assert_eq!(entry["sku"], size_of(entry["userId"].as_i64().unwrap()));
    }
    // Entering again, even naming another size, answers the buyer's one entry.
    let again = enter(&app, drop, 3, &json!({"sku": "US-10"})).await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(body(again).await["sku"], "US-9");

    let drawn = until_drawn(&app, drop).await;
    assert!(drawn.get("winningRankCutoff").is_none(), "{drawn}");
    let seed_hex = drawn["drawSeed"].as_str().unwrap();
    let commitment = drawn["drawCommitment"].as_str().unwrap();
    let seed = DrawSeed::from_hex(seed_hex).unwrap();
    assert!(seed.opens(&DrawCommitment::from_hex(commitment).unwrap()));
    let cutoffs: HashMap<String, String> =
        serde_json::from_value(drawn["winningRankCutoffs"].clone()).unwrap();
    assert_eq!(cutoffs.len(), 3, "{drawn}");

    let mut by_size: HashMap<&str, Vec<i64>> = HashMap::new();
    for (sku, units) in SIZES {
        let mut ranked: Vec<(String, i64)> = (1..=BUYERS)
            .filter(|u| size_of(*u) == sku)
            .map(|u| (seed.rank_key(UserId::parse(u).unwrap()).to_hex(), u))
            .collect();
        ranked.sort();
        let winners = usize::try_from(units).unwrap();
        assert_eq!(cutoffs[sku], ranked[winners - 1].0, "{sku}'s last winner");
        by_size.insert(sku, ranked.iter().map(|(_, u)| *u).collect());
    }
    let mut won: HashMap<&str, usize> = HashMap::new();
    for user in 1..=BUYERS {
        let sku = size_of(user);
        let entry = my_entry(&app, drop, user).await;
        let rank = by_size[sku].iter().position(|u| *u == user).unwrap();
        let limited = usize::try_from(SIZES.iter().find(|(s, _)| *s == sku).unwrap().1).unwrap();
        let verified = verify_draw(seed_hex, commitment, user, &cutoffs[sku]);
        if rank < limited {
            assert_eq!(entry["status"], "WON", "{entry}");
            assert_eq!(verified, "WON", "user {user}");
            *won.entry(sku).or_default() += 1;
        } else {
            assert_eq!(
                (&entry["status"], &entry["position"]),
                (&json!("WAITLISTED"), &json!(rank - limited + 1)),
                "{entry}"
            );
            assert_eq!(verified, "NOT_WON", "user {user}");
        }
    }
    assert_eq!(
        (won["US-9"], won["US-10"], won["US-11"]),
        (3, 2, 1),
        "each size's units, no more"
    );
    // The draw's events: each won entry's with its size, the completed draw with each size's
    // cutoff.
    let events = crate::draws::drop_events(&app, drop).await;
    let won_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "goods.entry.won")
        .collect();
    assert_eq!(won_events.len(), 6);
    for e in won_events {
        let user = e["data"]["userId"].as_i64().unwrap();
        assert_eq!(e["data"]["sku"], size_of(user), "{e}");
    }
    let completed = events
        .iter()
        .find(|e| e["type"] == "goods.draw.completed")
        .unwrap();
    assert_eq!(
        completed["data"]["winningRankCutoffs"],
        drawn["winningRankCutoffs"]
    );
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (&stats["soldQuantity"], &stats["winnerCount"]),
        (&json!(6), &json!(6)),
        "{stats}"
    );
    // The draw's orders are its awards, not purchases: no size counts a purchase outcome.
    let size = |sku: &str, units: u32| {
        json!({"sku": sku, "successCount": 0, "soldOutRejectCount": 0, "tooEarlyRejectCount": 0,
               "closedRejectCount": 0, "perUserLimitRejectCount": 0, "throttledCount": 0,
               "soldQuantity": units, "remaining": 0, "pendingQuantity": units,
               "paidQuantity": 0, "cancelledQuantity": 0, "expiredQuantity": 0})
    };
    assert_eq!(
        stats["variants"],
        json!([size("US-9", 3), size("US-10", 2), size("US-11", 1)])
    );

    // US-10's first winner cancels: its unit goes to US-10's first waitlisted entry.
    let tens = &by_size["US-10"];
    let first = my_entry(&app, drop, tens[0]).await;
    let res = app
        .request(
            reqwest::Method::POST,
            &format!("/orders/{}/cancel", first["orderId"]),
            Some((tens[0], "buyer")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let promoted = until_status(&app, drop, tens[2], "WON").await;
    assert!(promoted["promotedAt"].is_string(), "{promoted}");
    let order = body(
        app.get(
            &format!("/orders/{}", promoted["orderId"]),
            Some((tens[2], "buyer")),
        )
        .await,
    )
    .await;
    assert_eq!(order["sku"], "US-10", "{order}");
    let next = my_entry(&app, drop, tens[3]).await;
    assert_eq!(next["position"], 1, "{next}");
    let nines = &by_size["US-9"];
    let nine = my_entry(&app, drop, nines[3]).await;
    assert_eq!(
        (&nine["status"], &nine["position"]),
        (&json!("WAITLISTED"), &json!(1)),
        "US-9's waitlist did not move: {nine}"
    );
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (&stats["soldQuantity"], &stats["promotedCount"]),
        (&json!(6), &json!(1)),
        "{stats}"
    );
}

/// A draw drop without sizes takes no size: an entry naming one is refused as an unknown field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_of_a_draw_without_sizes_names_none() {
    let app = TestApp::spawn().await;
    let product = app.create_product(2).await;
    let open = app.clock.now() - time::Duration::seconds(1);
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(open),
            "closeAt": at(open + time::Duration::hours(1)),
            "limitedQuantity": 2,
            "mode": "DRAW",
            "entryCloseAt": at(open + time::Duration::minutes(10)),
        }))
        .await;
    let drop = body(res).await["dropId"].as_i64().unwrap();
    problem(
        enter(&app, drop, 1, &json!({"sku": "US-9"})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    problem(
        enter(&app, drop, 1, &json!({"sku": null})).await,
        400,
        "MALFORMED_REQUEST",
    )
    .await;
    let entered = enter(&app, drop, 1, &json!({})).await;
    assert_eq!(entered.status(), StatusCode::ACCEPTED);
    let entry = body(entered).await;
    assert!(entry.get("sku").is_none(), "{entry}");
    assert_eq!(view(&app, drop).await["entryCount"], 1);
}
