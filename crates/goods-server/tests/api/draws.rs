//! Draw drops over HTTP: entries as the contract says, the draw (exact winners, the waitlist
//! in rank order, a seed that opens the commitment and reproduces every rank), promotions off
//! the waitlist exactly once, and draw orders paid like any order.

use crate::helpers::*;
use futures::StreamExt as _;
use goods_domain::ports::Clock as _;
use goods_domain::{DrawCommitment, DrawSeed, UserId};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// A draw drop of `limited` units on a new product with as much stock, opening `open_in` from
/// the server's now, its entries closing `entries_for` later, closing an hour after that.
async fn draw_drop(
    app: &TestApp,
    limited: i64,
    open_in: time::Duration,
    entries_for: time::Duration,
) -> i64 {
    let product = app.create_product(limited).await;
    let open = app.clock.now() + open_in;
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(open),
            "closeAt": at(open + entries_for + time::Duration::hours(1)),
            "limitedQuantity": limited,
            "mode": "DRAW",
            "entryCloseAt": at(open + entries_for),
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let view = body(res).await;
    assert_eq!(view["mode"], "DRAW");
    view["dropId"].as_i64().unwrap()
}

/// A draw drop of `limited` units taking entries from a second ago for ten minutes.
async fn open_draw(app: &TestApp, limited: i64) -> i64 {
    draw_drop(
        app,
        limited,
        time::Duration::seconds(-1),
        time::Duration::minutes(10),
    )
    .await
}

async fn enter(app: &TestApp, drop: i64, user: i64) -> reqwest::Response {
    app.request(
        reqwest::Method::POST,
        &format!("/limited-drops/{drop}/entries"),
        Some((user, "buyer")),
    )
    .send()
    .await
    .unwrap()
}

async fn my_entry(app: &TestApp, drop: i64, user: i64) -> reqwest::Response {
    app.get(
        &format!("/limited-drops/{drop}/entries/me"),
        Some((user, "buyer")),
    )
    .await
}

async fn cancel(app: &TestApp, order: i64, user: i64) -> reqwest::Response {
    app.request(
        reqwest::Method::POST,
        &format!("/orders/{order}/cancel"),
        Some((user, "buyer")),
    )
    .send()
    .await
    .unwrap()
}

pub(crate) async fn view(app: &TestApp, drop: i64) -> Value {
    body(app.get(&format!("/limited-drops/{drop}"), None).await).await
}

/// Moves the server's clock past the entries' close and waits for the healing pass to draw.
pub(crate) async fn until_drawn(app: &TestApp, drop: i64) -> Value {
    app.clock.advance(time::Duration::minutes(11));
    for _ in 0..400 {
        let v = view(app, drop).await;
        if v.get("drawnAt").is_some() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the draw was not made within 10 s");
}

/// Servers whose healing pass is off: draws keep their own schedule whatever
/// `RECONCILE_INTERVAL_MS` is, 0 included.
async fn drawing_app() -> TestApp {
    TestApp::spawn_with(&[("RECONCILE_INTERVAL_MS", "0")]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_follow_the_contract_before_during_and_after_their_window() {
    let app = drawing_app().await;
    let drop = draw_drop(
        &app,
        2,
        time::Duration::minutes(1),
        time::Duration::minutes(10),
    )
    .await;
    let created = view(&app, drop).await;
    assert_eq!(created["entryCount"], 0);
    let commitment = created["drawCommitment"].as_str().unwrap().to_owned();
    assert!(DrawCommitment::from_hex(&commitment).is_ok(), "{created}");
    assert!(
        created.get("drawSeed").is_none(),
        "the seed is secret until the draw"
    );

    let early = problem(enter(&app, drop, 1).await, 425, "TOO_EARLY").await;
    assert!(early["openAt"].is_string());

    app.clock.advance(time::Duration::minutes(1));
    let res = enter(&app, drop, 1).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let entered = body(res).await;
    assert_eq!(
        (&entered["dropId"], &entered["userId"], &entered["status"]),
        (&json!(drop), &json!(1), &json!("ENTERED"))
    );
    let again = enter(&app, drop, 1).await;
    assert_eq!(again.status(), StatusCode::OK, "the same buyer again");
    assert_eq!(body(again).await["enteredAt"], entered["enteredAt"]);
    let mine = body(my_entry(&app, drop, 1).await).await;
    assert_eq!(
        (&mine["status"], &mine["enteredAt"]),
        (&json!("ENTERED"), &entered["enteredAt"])
    );
    problem(my_entry(&app, drop, 2).await, 404, "ENTRY_NOT_FOUND").await;
    assert_eq!(view(&app, drop).await["entryCount"], 1);

    // Purchases are not how a draw sells.
    problem(app.purchase(drop, 3, "k-3", 1).await, 409, "DRAW_DROP").await;
    // A first-come drop takes no entry.
    let (_, first_come) = app.open_drop(5, 5, 1).await;
    problem(enter(&app, first_come, 1).await, 409, "NOT_A_DRAW").await;
    // Only buyers enter.
    let anonymous = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/entries"),
            None,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let seller = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/entries"),
            Some((SELLER, "seller")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(seller.status(), StatusCode::FORBIDDEN);
    // A body, if any, is an empty object.
    let bad = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/entries"),
            Some((4, "buyer")),
        )
        .json(&json!({"quantity": 2}))
        .send()
        .await
        .unwrap();
    problem(bad, 400, "MALFORMED_REQUEST").await;

    let paused = app
        .request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/pause"),
            Some((SELLER, "seller")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), StatusCode::OK);
    problem(enter(&app, drop, 2).await, 409, "DROP_PAUSED").await;
    app.request(
        reqwest::Method::POST,
        &format!("/limited-drops/{drop}/resume"),
        Some((SELLER, "seller")),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(enter(&app, drop, 2).await.status(), StatusCode::ACCEPTED);

    app.clock.advance(time::Duration::minutes(10));
    problem(enter(&app, drop, 3).await, 409, "ENTRIES_CLOSED").await;
    assert_eq!(
        enter(&app, drop, 1).await.status(),
        StatusCode::OK,
        "an entrant still sees theirs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_drop_is_created_only_with_its_rules() {
    let app = TestApp::spawn().await;
    let product = app.create_product(5).await;
    let now = app.clock.now();
    let base = json!({
        "productId": product,
        "openAt": at(now),
        "closeAt": at(now + time::Duration::hours(1)),
        "limitedQuantity": 5,
        "mode": "DRAW",
        "entryCloseAt": at(now + time::Duration::minutes(30)),
    });
    let with = |changes: Value| {
        let mut body = base.clone();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        body
    };
    for (changes, field) in [
        (json!({"entryCloseAt": null}), "entryCloseAt"),
        (json!({"entryCloseAt": at(now)}), "entryCloseAt"),
        (
            json!({"entryCloseAt": at(now + time::Duration::hours(2))}),
            "entryCloseAt",
        ),
        (json!({"perUserLimit": 2}), "perUserLimit"),
        (json!({"mode": "RAFFLE"}), "mode"),
        (json!({"mode": "FIRST_COME"}), "entryCloseAt"),
    ] {
        let res = app.post_drop(&with(changes.clone())).await;
        let problem = problem(res, 422, "VALIDATION_FAILED").await;
        assert!(
            problem["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "{changes}: {problem}"
        );
    }
    assert_eq!(app.post_drop(&base).await.status(), StatusCode::CREATED);
}

/// The seed-spike's shape at test size: 5,000 buyers enter a drop of 300. Exactly 300 orders,
/// no buyer twice, the seed opens the commitment, and every buyer's result is what anyone
/// recomputes from the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_thousand_entries_for_three_hundred_units_make_exactly_three_hundred_orders() {
    const ENTRANTS: i64 = 5000;
    const LIMITED: usize = 300;
    let app = drawing_app().await;
    let drop = open_draw(&app, LIMITED as i64).await;
    let statuses: Vec<StatusCode> = futures::stream::iter(1..=ENTRANTS)
        .map(|user| {
            let app = &app;
            async move { enter(app, drop, user).await.status() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(
        statuses.iter().all(|s| *s == StatusCode::ACCEPTED),
        "every entry accepted once"
    );
    assert_eq!(view(&app, drop).await["entryCount"], ENTRANTS);

    let drawn = until_drawn(&app, drop).await;
    let seed = DrawSeed::from_hex(drawn["drawSeed"].as_str().unwrap()).unwrap();
    assert_eq!(
        seed.commitment().to_hex(),
        drawn["drawCommitment"].as_str().unwrap(),
        "SHA-256(drawSeed) = drawCommitment"
    );
    // Everyone's rank, recomputed from the seed alone.
    let mut ranked: Vec<(String, i64)> = (1..=ENTRANTS)
        .map(|u| (seed.rank_key(UserId::parse(u).unwrap()).to_hex(), u))
        .collect();
    ranked.sort();
    assert_eq!(drawn["winningRankCutoff"], json!(ranked[LIMITED - 1].0));
    let rank_of: HashMap<i64, usize> = ranked
        .iter()
        .enumerate()
        .map(|(i, (_, u))| (*u, i + 1))
        .collect();

    let entries: Vec<(i64, Value)> = futures::stream::iter(1..=ENTRANTS)
        .map(|user| {
            let app = &app;
            async move { (user, body(my_entry(app, drop, user).await).await) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut orders = HashSet::new();
    for (user, entry) in &entries {
        let rank = rank_of[user];
        assert_eq!(entry["rankKey"], json!(ranked[rank - 1].0), "user {user}");
        if rank <= LIMITED {
            assert_eq!(entry["status"], "WON", "user {user} ranked {rank}: {entry}");
            assert!(
                orders.insert(entry["orderId"].as_i64().unwrap()),
                "an order twice"
            );
        } else {
            assert_eq!(
                entry["status"], "WAITLISTED",
                "user {user} ranked {rank}: {entry}"
            );
            assert_eq!(
                entry["position"],
                json!(rank - LIMITED),
                "the waitlist in rank order"
            );
        }
    }
    assert_eq!(orders.len(), LIMITED, "exactly one order per winner");
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (
            &stats["entryCount"],
            &stats["winnerCount"],
            &stats["promotedCount"],
            &stats["soldQuantity"]
        ),
        (
            &json!(ENTRANTS),
            &json!(LIMITED),
            &json!(0),
            &json!(LIMITED)
        ),
        "{stats}"
    );
    // A winner's order is theirs, PENDING, one unit, its window from the draw.
    let (winner, entry) = entries.iter().find(|(_, e)| e["status"] == "WON").unwrap();
    let order = body(
        app.get(
            &format!("/orders/{}", entry["orderId"]),
            Some((*winner, "buyer")),
        )
        .await,
    )
    .await;
    assert_eq!(
        (&order["status"], &order["quantity"]),
        (&json!("PENDING"), &json!(1))
    );
}

/// Winners giving back: a cancel and expiries (with a cancel racing the expiry of the same
/// order) each pass one unit to the next waitlisted entry, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_unit_given_back_goes_to_the_next_waitlisted_entry_exactly_once() {
    const LIMITED: usize = 3;
    let app =
        TestApp::spawn_with(&[("RECONCILE_INTERVAL_MS", "0"), ("PAYMENT_WINDOW_S", "60")]).await;
    let drop = open_draw(&app, LIMITED as i64).await;
    for user in 1..=10 {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let drawn = until_drawn(&app, drop).await;
    let seed = DrawSeed::from_hex(drawn["drawSeed"].as_str().unwrap()).unwrap();
    let mut ranked: Vec<(String, i64)> = (1..=10)
        .map(|u| (seed.rank_key(UserId::parse(u).unwrap()).to_hex(), u))
        .collect();
    ranked.sort();
    let by_rank: Vec<i64> = ranked.iter().map(|(_, u)| *u).collect();
    let order_of = |entry: &Value| entry["orderId"].as_i64().unwrap();

    // The first winner cancels: the first waitlisted entry wins.
    let first = body(my_entry(&app, drop, by_rank[0]).await).await;
    assert_eq!(
        cancel(&app, order_of(&first), by_rank[0]).await.status(),
        StatusCode::OK
    );
    let promoted = until_status(&app, drop, by_rank[LIMITED], "WON").await;
    assert_ne!(order_of(&promoted), order_of(&first));
    assert!(promoted["promotedAt"].is_string(), "{promoted}");
    let forfeited = body(my_entry(&app, drop, by_rank[0]).await).await;
    assert_eq!(
        (&forfeited["status"], &forfeited["orderId"]),
        (&json!("FORFEITED"), &first["orderId"]),
        "a winner who gave the unit back, its order kept"
    );
    let next = body(my_entry(&app, drop, by_rank[LIMITED + 1]).await).await;
    assert_eq!(
        (&next["status"], &next["position"]),
        (&json!("WAITLISTED"), &json!(1))
    );

    // Past the payment window every live order expires: the two other winners' and the
    // promoted one's. The second winner cancels at the same time, racing the expiry.
    app.clock.advance(time::Duration::seconds(61));
    let second = body(my_entry(&app, drop, by_rank[1]).await).await;
    let racing = (0..5).map(|_| cancel(&app, order_of(&second), by_rank[1]));
    for res in futures::future::join_all(racing).await {
        let status = res.status();
        assert!(
            status == StatusCode::OK || status == StatusCode::CONFLICT,
            "{status}"
        );
    }
    // Three units went back after the cancel's: the next three waitlisted entries win.
    for user in &by_rank[LIMITED + 1..LIMITED + 4] {
        until_status(&app, drop, *user, "WON").await;
    }
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (
            &stats["winnerCount"],
            &stats["promotedCount"],
            &stats["soldQuantity"]
        ),
        (&json!(LIMITED + 4), &json!(4), &json!(LIMITED)),
        "one promotion per unit given back: {stats}"
    );
    assert_eq!(
        (
            &stats["cancelledQuantity"],
            &stats["expiredQuantity"],
            &stats["pendingQuantity"]
        ),
        (&json!(1), &json!(3), &json!(3)),
        "{stats}"
    );
    let after = body(my_entry(&app, drop, by_rank[LIMITED + 4]).await).await;
    assert_eq!(
        (&after["status"], &after["position"]),
        (&json!("WAITLISTED"), &json!(1))
    );
    // At closeAt the waitlist is lost.
    app.clock.advance(time::Duration::hours(2));
    let lost = body(my_entry(&app, drop, by_rank[9]).await).await;
    assert_eq!(lost["status"], "LOST");
}

pub(crate) async fn until_status(app: &TestApp, drop: i64, user: i64, status: &str) -> Value {
    for _ in 0..400 {
        let entry = body(my_entry(app, drop, user).await).await;
        if entry["status"] == status {
            return entry;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("user {user}'s entry never became {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_order_is_paid_by_the_providers_event_like_any_order() {
    let app = drawing_app().await;
    let drop = open_draw(&app, 1).await;
    assert_eq!(enter(&app, drop, 5).await.status(), StatusCode::ACCEPTED);
    until_drawn(&app, drop).await;
    let entry = body(my_entry(&app, drop, 5).await).await;
    assert_eq!(entry["status"], "WON");
    let order = body(
        app.get(&format!("/orders/{}", entry["orderId"]), Some((5, "buyer")))
            .await,
    )
    .await;
    let paid = app.pay(&order, "evt-draw-1", "ref-draw-1").await;
    assert_eq!(paid.status(), StatusCode::OK);
    assert_eq!(body(paid).await["outcome"], "PAID");
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(stats["paidQuantity"], 1, "{stats}");
}

/// An independent RFC 6962 section 2.1 Merkle tree hash (no tree library).
fn rfc6962_root(leaves: &[Vec<u8>]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    match leaves.len() {
        0 => Sha256::digest(b"").into(),
        1 => Sha256::digest([&[0_u8][..], &leaves[0]].concat()).into(),
        n => {
            let mut k = 1;
            while k * 2 < n {
                k *= 2;
            }
            let (l, r) = (rfc6962_root(&leaves[..k]), rfc6962_root(&leaves[k..]));
            Sha256::digest([&[1_u8][..], &l, &r].concat()).into()
        }
    }
}

/// The root an audit path leads to (RFC 6962 section 2.1.1, walked from the leaf up).
fn root_from_path(index: usize, size: usize, leaf: &[u8], path: &[[u8; 32]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    fn up(m: usize, n: usize, leaf: [u8; 32], path: &[[u8; 32]]) -> [u8; 32] {
        if n == 1 {
            return leaf;
        }
        let mut k = 1;
        while k * 2 < n {
            k *= 2;
        }
        let (last, rest) = path
            .split_last()
            .expect("a path as long as the tree is deep");
        if m < k {
            let left = up(m, k, leaf, rest);
            Sha256::digest([&[1_u8][..], &left, last].concat()).into()
        } else {
            let right = up(m - k, n - k, leaf, rest);
            Sha256::digest([&[1_u8][..], last, &right].concat()).into()
        }
    }
    let leaf: [u8; 32] = Sha256::digest([&[0_u8][..], leaf].concat()).into();
    up(index, size, leaf, path)
}

/// The entry set is fixed before the reveal: `entriesRoot` is RFC 6962's hash over the
/// entrants in numeric order, and every entry's proof leads to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entries_root_and_every_inclusion_proof_match_rfc_6962() {
    let app = drawing_app().await;
    let drop = open_draw(&app, 2).await;
    // Ids whose text order differs from their numeric order (10 < 9 as text).
    let users = [9_i64, 10, 11, 100, 2, 35, 7];
    for user in users {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let before = body(my_entry(&app, drop, 9).await).await;
    assert!(
        before.get("inclusionProof").is_none(),
        "no proof while entries are open"
    );
    let drawn = until_drawn(&app, drop).await;
    let mut sorted = users.to_vec();
    sorted.sort_unstable();
    let leaves: Vec<Vec<u8>> = sorted.iter().map(|u| u.to_string().into_bytes()).collect();
    assert_eq!(
        drawn["entriesRoot"],
        hex::encode(rfc6962_root(&leaves)),
        "{drawn}"
    );
    assert_eq!(drawn["entryCount"], users.len());
    for (index, user) in sorted.iter().enumerate() {
        let entry = body(my_entry(&app, drop, *user).await).await;
        let proof = &entry["inclusionProof"];
        assert_eq!(
            (&proof["leafIndex"], &proof["treeSize"]),
            (&json!(index), &json!(users.len())),
            "{entry}"
        );
        let path: Vec<[u8; 32]> = proof["auditPath"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                hex::decode(h.as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap()
            })
            .collect();
        let root = root_from_path(index, users.len(), user.to_string().as_bytes(), &path);
        assert_eq!(
            hex::encode(root),
            drawn["entriesRoot"].as_str().unwrap(),
            "user {user}"
        );
    }
}

/// Every entrant first spends the key the old release gave draw orders (`draw-{dropId}`) on
/// another drop, and tries to send the service's own key: no award changes, nobody is voided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_entrant_can_stop_a_draw_by_planting_its_order_key() {
    const LIMITED: i64 = 3;
    const ENTRANTS: i64 = 8;
    let app = drawing_app().await;
    let draw = open_draw(&app, LIMITED).await;
    let (_, other) = app.open_drop(ENTRANTS, ENTRANTS, 1).await;
    for user in 1..=ENTRANTS {
        let planted = format!("draw-{draw}");
        let res = app.purchase(other, user, &planted, 1).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED, "user {user}");
        let order = body(res).await["orderId"].as_i64().unwrap();
        assert_eq!(cancel(&app, order, user).await.status(), StatusCode::OK);
        // The service's own key cannot even be sent: it starts with a control character.
        let service_key = format!("\u{1}draw:{draw}");
        let refused = app
            .request(
                reqwest::Method::POST,
                &format!("/limited-drops/{other}/orders"),
                Some((user, "buyer")),
            )
            .header("Idempotency-Key", service_key.as_str())
            .json(&json!({"quantity": 1}))
            .send()
            .await;
        assert!(
            refused.is_err() || refused.as_ref().unwrap().status() == StatusCode::BAD_REQUEST,
            "{refused:?}"
        );
        assert_eq!(enter(&app, draw, user).await.status(), StatusCode::ACCEPTED);
    }
    until_drawn(&app, draw).await;
    let mut won = 0;
    for user in 1..=ENTRANTS {
        let entry = body(my_entry(&app, draw, user).await).await;
        assert_ne!(entry["status"], "VOID", "user {user}: {entry}");
        won += i64::from(entry["status"] == "WON");
    }
    assert_eq!(won, LIMITED);
    let stats = app
        .seller_json(&format!("/limited-drops/{draw}/stats"))
        .await;
    assert_eq!(
        (&stats["winnerCount"], &stats["soldQuantity"]),
        (&json!(LIMITED), &json!(LIMITED)),
        "{stats}"
    );
}

/// Before the reveal the database holds no trace of the seed: not in hex (either case), not in
/// base64, not as its 32 bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_the_database_before_the_reveal_holds_no_trace_of_the_seed() {
    let app = drawing_app().await;
    let drop = open_draw(&app, 1).await;
    for user in 1..=3 {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let copy = app.backend.dump().await;
    assert!(copy.len() > 1000, "a dump of {} bytes", copy.len());
    let drawn = until_drawn(&app, drop).await;
    let seed = hex::decode(drawn["drawSeed"].as_str().unwrap()).unwrap();
    use base64::Engine as _;
    let traces = [
        hex::encode(&seed).into_bytes(),
        hex::encode_upper(&seed).into_bytes(),
        base64::engine::general_purpose::STANDARD
            .encode(&seed)
            .into_bytes(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(&seed)
            .into_bytes(),
        seed.clone(),
    ];
    for trace in &traces {
        // Any 16 consecutive bytes of a trace would give it away.
        let found = trace
            .windows(16)
            .any(|piece| copy.windows(piece.len()).any(|w| w == piece));
        assert!(!found, "the copy holds {}", String::from_utf8_lossy(trace));
    }
    // The copy after the reveal does hold it: the search can find what is there.
    let after = app.backend.dump().await;
    let hex_seed = hex::encode(&seed).into_bytes();
    assert!(after.windows(hex_seed.len()).any(|w| w == hex_seed));
}

/// A winner's payment window is the drop's `paymentWindowSeconds`, from the award: the order
/// expires then (whatever `PAYMENT_WINDOW_S`), the winner reads FORFEITED and the next WON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_winners_order_expires_the_drops_payment_window_after_the_award() {
    let app = drawing_app().await;
    let product = app.create_product(1).await;
    let open = app.clock.now() - time::Duration::seconds(1);
    let res = app
        .post_drop(&json!({
            "productId": product,
            "openAt": at(open),
            "closeAt": at(open + time::Duration::days(3)),
            "limitedQuantity": 1,
            "mode": "DRAW",
            "entryCloseAt": at(open + time::Duration::minutes(10)),
            "paymentWindowSeconds": 86_400,
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let drop = body(res).await;
    assert_eq!(drop["paymentWindowSeconds"], 86_400);
    let drop = drop["dropId"].as_i64().unwrap();
    for user in [1, 2] {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let drawn = until_drawn(&app, drop).await;
    let awarded_at = time::OffsetDateTime::parse(
        drawn["drawnAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let seed = DrawSeed::from_hex(drawn["drawSeed"].as_str().unwrap()).unwrap();
    let (winner, next) = {
        let (a, b) = (UserId::parse(1).unwrap(), UserId::parse(2).unwrap());
        if seed.rank_key(a) < seed.rank_key(b) {
            (1, 2)
        } else {
            (2, 1)
        }
    };
    let won = body(my_entry(&app, drop, winner).await).await;
    let order = body(
        app.get(
            &format!("/orders/{}", won["orderId"]),
            Some((winner, "buyer")),
        )
        .await,
    )
    .await;
    let expires = time::OffsetDateTime::parse(
        order["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(expires, awarded_at + time::Duration::days(1), "{order}");
    // Ten minutes (the service's default) change nothing; the day does.
    app.clock.advance(time::Duration::minutes(11));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        body(my_entry(&app, drop, winner).await).await["status"],
        "WON"
    );
    app.clock.advance(time::Duration::days(1));
    let forfeited = until_status(&app, drop, winner, "FORFEITED").await;
    assert_eq!(forfeited["orderId"], won["orderId"]);
    let promoted = until_status(&app, drop, next, "WON").await;
    assert!(promoted["promotedAt"].is_string(), "{promoted}");
}

/// Entries whose award the ledger refuses (here: each already has an order under the draw's
/// own key, for another quantity, planted in the database as no client can) read VOID with the
/// reason, are counted, and their units go to the next entries by rank. The seed is opened
/// beforehand as an insider with the seal key could, so the refused entries are the first two
/// by rank: the winners are ranks 3 and 4, whatever the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_award_voids_that_entry_and_the_next_by_rank_wins() {
    const LIMITED: usize = 2;
    let app = drawing_app().await;
    let drop = open_draw(&app, LIMITED as i64).await;
    let product = view(&app, drop).await["productId"].as_i64().unwrap();
    for user in 1..=6 {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let seed = app.backend.open_seed(drop).await;
    let mut by_rank: Vec<i64> = (1..=6).collect();
    by_rank.sort_by_key(|u| seed.rank_key(UserId::parse(*u).unwrap()));
    let (refused, rest) = by_rank.split_at(2);
    let key = app.backend.byte_then(1, &format!("draw:{drop}"));
    for user in refused {
        app.backend
            .exec(&format!(
                "INSERT INTO orders (drop_id, product_id, user_id, quantity, status, \
                 idempotency_key, created_at, amount_minor, currency) VALUES \
                 ({drop}, {product}, {user}, 2, 'CANCELLED', {key}, '2026-01-01 00:00:00', 0, 'XXX')"
            ))
            .await;
    }
    let voided_before =
        series_value(&app.metrics().await, "draw_entries_voided_total").unwrap_or(0.0);
    let drawn = until_drawn(&app, drop).await;
    assert_eq!(drawn["drawSeed"], seed.to_hex());
    for user in refused {
        let entry = body(my_entry(&app, drop, *user).await).await;
        assert_eq!(
            (&entry["status"], &entry["reason"]),
            (&json!("VOID"), &json!("IDEMPOTENCY_KEY_REUSED")),
            "{entry}"
        );
    }
    for user in &rest[..LIMITED] {
        assert_eq!(
            body(my_entry(&app, drop, *user).await).await["status"],
            "WON"
        );
    }
    let first_waiting = body(my_entry(&app, drop, rest[LIMITED]).await).await;
    assert_eq!(
        (&first_waiting["status"], &first_waiting["position"]),
        (&json!("WAITLISTED"), &json!(1))
    );
    let stats = app
        .seller_json(&format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (&stats["winnerCount"], &stats["soldQuantity"]),
        (&json!(LIMITED), &json!(LIMITED)),
        "{stats}"
    );
    let voided_after = series_value(&app.metrics().await, "draw_entries_voided_total").unwrap();
    assert_eq!(voided_after - voided_before, 2.0);
    let voided: Vec<Value> = drop_events(&app, drop)
        .await
        .into_iter()
        .filter(|e| e["type"] == "goods.entry.voided")
        .collect();
    assert_eq!(voided.len(), 2, "one goods.entry.voided per voided entry");
    assert!(
        voided
            .iter()
            .all(|e| e["data"]["reason"] == "IDEMPOTENCY_KEY_REUSED"),
        "{voided:?}"
    );
    assert_eq!(
        drawn["winningRankCutoff"],
        seed.rank_key(UserId::parse(rest[LIMITED - 1]).unwrap())
            .to_hex(),
        "the cutoff is the last winner's rank key"
    );
}

/// The cost of the views of a draw drop does not grow with its entries: a drop with 100,000
/// entries (planted in the database, its count kept beside the draw as entries keep it) is
/// viewed, its stats read and an entry read with the same number of statements as an empty
/// one's. docs/benchmarks.md has the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_of_a_draw_with_100000_entries_cost_what_an_empty_ones_cost() {
    const ENTRIES: i64 = 100_000;
    // No periodic refresh inside the measurements: only the requests' statements count.
    let app = TestApp::spawn_with(&[
        ("RECONCILE_INTERVAL_MS", "0"),
        ("DROP_REFRESH_MS", "600000"),
    ])
    .await;
    let empty = draw_drop(
        &app,
        10,
        time::Duration::seconds(-1),
        time::Duration::hours(1),
    )
    .await;
    let full = draw_drop(
        &app,
        10,
        time::Duration::seconds(-1),
        time::Duration::hours(1),
    )
    .await;
    for drop in [empty, full] {
        assert_eq!(enter(&app, drop, 1).await.status(), StatusCode::ACCEPTED);
    }
    let digits = format!(
        "({})",
        (0..10)
            .map(|i| format!("SELECT {i} AS i"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    );
    app.backend
        .exec(&format!(
            "INSERT INTO draw_entries (drop_id, user_id, entered_at, entry_token) \
             SELECT {full}, 2 + a.i + 10 * b.i + 100 * c.i + 1000 * d.i + 10000 * e.i, \
             '2026-01-01 00:00:00', 0 FROM {digits} a, {digits} b, {digits} c, {digits} d, \
             {digits} e WHERE 2 + a.i + 10 * b.i + 100 * c.i + 1000 * d.i + 10000 * e.i \
             <= {ENTRIES}; \
             UPDATE drop_draws SET entry_count = {ENTRIES} WHERE drop_id = {full}"
        ))
        .await;
    // Rows the database read from the entries (MariaDB's user statistics, per table of this
    // test's own database); SQLite keeps no such count, so there only statements are compared.
    let entry_rows = || async {
        match &app.backend {
            Backend::Mysql { .. } => {
                app.backend.exec("SET GLOBAL userstat = 1").await;
                app.backend
                    .number(
                        "SELECT CAST(COALESCE(SUM(ROWS_READ), 0) AS SIGNED) AS n \
                         FROM information_schema.TABLE_STATISTICS \
                         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'draw_entries'",
                    )
                    .await
            }
            Backend::Sqlite(_) => 0,
        }
    };
    // Each drop's first reads after the planting (views are kept 500 ms, so each is read once).
    let mut costs = Vec::new();
    for drop in [empty, full] {
        let before = app.db_statements_settled().await;
        let rows_before = entry_rows().await;
        let v = view(&app, drop).await;
        let stats = app
            .seller_json(&format!("/limited-drops/{drop}/stats"))
            .await;
        let mine = body(my_entry(&app, drop, 1).await).await;
        assert_eq!(mine["status"], "ENTERED");
        let after = app.db_statements_settled().await;
        let rows = entry_rows().await - rows_before;
        costs.push((
            v["entryCount"].clone(),
            stats["entryCount"].clone(),
            after - before,
            rows,
        ));
    }
    assert_eq!(costs[0].0, 1);
    assert_eq!(
        (&costs[1].0, &costs[1].1),
        (&json!(ENTRIES), &json!(ENTRIES))
    );
    assert_eq!(
        costs[0].2, costs[1].2,
        "statements: empty vs {ENTRIES} entries: {costs:?}"
    );
    assert_eq!(
        costs[0].3, costs[1].3,
        "entry rows read: empty vs {ENTRIES} entries: {costs:?}"
    );
    eprintln!("(entryCount in view, in stats, statements, entry rows read): {costs:?}");
}

/// A draw's decisions are events too, numbered with the drop's others: each winner's order
/// placed and its entry won, then the draw completed with the revealed seed; a cancelled
/// winner's unit goes to the waitlist as `goods.entry.promoted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draws_decisions_are_events_in_commit_order() {
    let app = drawing_app().await;
    let drop = open_draw(&app, 2).await;
    for user in 1..=4 {
        assert_eq!(enter(&app, drop, user).await.status(), StatusCode::ACCEPTED);
    }
    let drawn = until_drawn(&app, drop).await;
    let seen = drop_events(&app, drop).await;
    let types: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "goods.drop.created",
            "goods.order.placed",
            "goods.order.placed",
            "goods.drop.sold_out",
            "goods.entry.won",
            "goods.entry.won",
            "goods.draw.completed",
        ]
    );
    let seqs: Vec<u64> = seen
        .iter()
        .map(|e| e["dropseq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());
    let completed = &seen[6]["data"];
    assert_eq!(completed["drawSeed"], drawn["drawSeed"]);
    assert_eq!(completed["entriesRoot"], drawn["entriesRoot"]);
    assert_eq!(
        (&completed["entryCount"], &completed["winnerCount"]),
        (&json!(4), &json!(2))
    );
    let won = &seen[4];
    let winner = won["data"]["userId"].as_i64().unwrap();
    assert_eq!(won["subject"], format!("entries/{drop}/{winner}"));
    assert_eq!(won["data"]["promoted"], false);

    // The winner cancels: the unit goes to the first of the waitlist, promoted.
    let order = won["data"]["orderId"].as_i64().unwrap();
    assert_eq!(cancel(&app, order, winner).await.status(), StatusCode::OK);
    for _ in 0..400 {
        let seen = drop_events(&app, drop).await;
        if seen.iter().any(|e| e["type"] == "goods.entry.promoted") {
            let tail: Vec<&str> = seen[7..]
                .iter()
                .map(|e| e["type"].as_str().unwrap())
                .collect();
            assert_eq!(
                tail,
                [
                    "goods.order.cancelled",
                    "goods.order.placed",
                    "goods.drop.sold_out",
                    "goods.entry.promoted"
                ]
            );
            let promoted = &seen[seen.len() - 1]["data"];
            assert_eq!(promoted["promoted"], true);
            assert_ne!(promoted["userId"], json!(winner));
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no promotion within 10 s");
}

/// Every event of `drop`, oldest first (one page: a draw's test has few).
pub(crate) async fn drop_events(app: &TestApp, drop: i64) -> Vec<Value> {
    body(
        app.get(
            &format!("/admin/events?dropId={drop}&limit=100"),
            Some((99, "admin")),
        )
        .await,
    )
    .await["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Two instances on the shared test Redis.
mod needs_redis {
    use super::*;

    /// A fleet of two with `RECONCILE_INTERVAL_MS=0`: a draw drop created and entered through one
    /// instance is drawn by the other once the first has stopped (it learns of the drop from its
    /// scan of new ids, and takes the draws' lease when the first one's lapses).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_draw_is_made_by_another_instance_than_the_one_that_took_its_entries_sharing_redis() {
        let (a, b) = TestApp::pair_on_shared_redis(&[("RECONCILE_INTERVAL_MS", "0")]).await;
        let drop = open_draw(&a, 1).await;
        for user in [1, 2] {
            assert_eq!(enter(&a, drop, user).await.status(), StatusCode::ACCEPTED);
        }
        a.handle.stop(true).await;
        // Nothing asks `b` for the drop before it is drawn (a view would make `b` hold it): the
        // draw is watched in the database.
        b.clock.advance(time::Duration::minutes(11));
        let drawn = format!(
            "SELECT COUNT(*) AS n FROM drop_draws WHERE drop_id = {drop} AND drawn_at IS NOT NULL"
        );
        // Alone it takes about 2 s (the first instance's lease lapsing, then the next draws tick);
        // CI once took past 10 s with the whole suite running beside it.
        let mut made = false;
        for _ in 0..800 {
            if b.backend.number(&drawn).await == 1 {
                made = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(made, "the draw was not made within 20 s");
        let stats = b.seller_json(&format!("/limited-drops/{drop}/stats")).await;
        assert_eq!(
            (&stats["entryCount"], &stats["winnerCount"]),
            (&json!(2), &json!(1)),
            "{stats}"
        );
    }
}
