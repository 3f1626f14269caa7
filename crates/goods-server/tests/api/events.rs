//! Every decision is one event, written in the decision's transaction (docs/events.md): a
//! drop's events numbered 1, 2, 3, ... in commit order with no gaps, as CloudEvents at
//! `/admin/events`; nothing for a decision that was refused.

use crate::helpers::{TestApp, body, problem};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;

const ADMIN: (i64, &str) = (99, "admin");

/// Every event of `drop`, oldest first, read page by page as a client would.
pub(crate) async fn events_of(app: &TestApp, drop: i64) -> Vec<Value> {
    let mut events = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let after = cursor.map(|c| format!("&after={c}")).unwrap_or_default();
        let res = app
            .get(
                &format!("/admin/events?dropId={drop}&limit=7{after}"),
                Some(ADMIN),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        let page = body(res).await;
        events.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return events,
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The CloudEvents 1.0 required attributes and the contract's, and `dropseq` 1..=n in order.
fn assert_cloud_events(events: &[Value]) {
    let mut ids = HashSet::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["specversion"], "1.0", "{e}");
        assert_eq!(e["source"], "/limited-drops", "{e}");
        assert_eq!(e["datacontenttype"], "application/json", "{e}");
        assert!(e["time"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(e["data"].is_object(), "{e}");
        assert_eq!(
            e["dropseq"],
            json!(i + 1),
            "numbered in commit order, no gaps: {e}"
        );
        assert!(
            ids.insert(e["id"].as_str().unwrap().to_owned()),
            "a repeated id: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_decision_of_a_drops_life_is_one_event_in_commit_order() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(10, 3, 1).await;
    let mut orders = Vec::new();
    for user in 1..=3 {
        let res = app.purchase(drop, user, "k", 1).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        orders.push(body(res).await);
    }
    // Refusals decide nothing: no event.
    problem(app.purchase(drop, 4, "k", 1).await, 409, "SOLD_OUT").await;
    // A replay decides nothing new either.
    assert_eq!(
        app.purchase(drop, 1, "k", 1).await.status(),
        StatusCode::ACCEPTED
    );
    let cancelled = app.cancel(&orders[0], 1).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    assert_eq!(
        body(app.pay(&orders[1], "evt_paid", "pi_1").await).await["outcome"],
        "PAID"
    );
    // Paid twice by the same event: nothing new.
    assert_eq!(
        body(app.pay(&orders[1], "evt_paid", "pi_1").await).await["outcome"],
        "PAID"
    );
    let mut wrong = orders[2].clone();
    wrong["amountMinor"] = json!(1);
    assert_eq!(
        body(app.pay(&wrong, "evt_wrong", "pi_2").await).await["outcome"],
        "AMOUNT_MISMATCH"
    );
    for _ in 0..2 {
        let closed = app
            .request(
                reqwest::Method::POST,
                &format!("/limited-drops/{drop}/close"),
                Some((crate::helpers::SELLER, "seller")),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(closed.status(), StatusCode::OK);
    }

    let events = events_of(&app, drop).await;
    assert_eq!(
        types(&events),
        [
            "goods.drop.created",
            "goods.order.placed",
            "goods.order.placed",
            "goods.order.placed",
            "goods.drop.sold_out",
            "goods.order.cancelled",
            "goods.order.paid",
            "goods.payment.amount_mismatch",
            "goods.drop.closed",
        ]
    );
    assert_cloud_events(&events);
    assert_eq!(events[0]["subject"], format!("drops/{drop}"));
    assert_eq!(events[0]["data"]["limitedQuantity"], 3);
    assert_eq!(
        events[4]["data"],
        json!({"dropId": drop, "limitedQuantity": 3, "remaining": 0})
    );
    // An order's event data is the order as the API shows it at that moment.
    for (event, order) in events[1..4].iter().zip(&orders) {
        assert_eq!(event["subject"], format!("orders/{}", order["orderId"]));
        assert_eq!(
            &event["data"], order,
            "order.placed data against the 202's order"
        );
    }
    let paid_id = orders[1]["orderId"].as_i64().unwrap();
    let paid = body(
        app.get(&format!("/orders/{paid_id}"), Some((2, "buyer")))
            .await,
    )
    .await;
    assert_eq!(
        events[6]["data"], paid,
        "order.paid data against GET /orders/{{id}}"
    );
    assert_eq!(events[7]["data"]["payment"]["amountMinor"], 1);
    assert_eq!(events[7]["data"]["status"], "PENDING");
}

/// 60 buyers race for 20 units: 20 202s, 20 `order.placed`, one `drop.sold_out` after them,
/// numbered 1..=22 without a gap however the batches fell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_purchases_number_their_events_without_gaps() {
    let app = TestApp::spawn().await;
    let (_, drop) = app.open_drop(20, 20, 1).await;
    let answers = join_all((1..=60).map(|user| {
        let app = &app;
        async move { app.purchase(drop, user, "race", 1).await.status() }
    }))
    .await;
    let accepted = answers
        .iter()
        .filter(|s| **s == StatusCode::ACCEPTED)
        .count();
    assert_eq!(accepted, 20, "{answers:?}");
    let events = events_of(&app, drop).await;
    assert_eq!(events.len(), 22);
    assert_cloud_events(&events);
    assert_eq!(types(&events)[0], "goods.drop.created");
    assert_eq!(
        types(&events)
            .iter()
            .filter(|t| **t == "goods.order.placed")
            .count(),
        accepted
    );
    assert_eq!(types(&events)[21], "goods.drop.sold_out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_read_events_and_a_bad_filter_is_refused() {
    let app = TestApp::spawn().await;
    problem(
        app.get("/admin/events", Some((1, "seller"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(
        app.get("/admin/events", Some((1, "buyer"))).await,
        403,
        "FORBIDDEN",
    )
    .await;
    problem(app.get("/admin/events", None).await, 401, "UNAUTHENTICATED").await;
    for bad in [
        "type=goods.order",
        "dropId=0",
        "limit=0",
        "after=x",
        "colour=red",
    ] {
        let res = app.get(&format!("/admin/events?{bad}"), Some(ADMIN)).await;
        problem(res, 400, "MALFORMED_REQUEST").await;
    }
    let (_, drop) = app.open_drop(5, 5, 1).await;
    let placed = app
        .get("/admin/events?type=goods.order.placed", Some(ADMIN))
        .await;
    assert_eq!(body(placed).await["items"], json!([]));
    let created = body(
        app.get(
            &format!("/admin/events?type=goods.drop.created&dropId={drop}"),
            Some(ADMIN),
        )
        .await,
    )
    .await;
    assert_eq!(created["items"].as_array().unwrap().len(), 1);
}

/// The `events_outbox_pending` gauge, once it reads `n` (at most 15 s).
async fn until_pending(app: &TestApp, n: f64) -> f64 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let pending = crate::helpers::series_value(&app.metrics().await, "events_outbox_pending");
        if pending == Some(n) || std::time::Instant::now() > until {
            return pending.unwrap_or(-1.0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Events are kept `EVENTS_RETENTION_S`, then the healing pass deletes them; with a broker, an
/// event it never acknowledged is kept however old it is, and so is one not fanned out to
/// sellers' webhooks yet (here: no instance delivers them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_past_their_retention_are_pruned_unless_still_unpublished() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_broker = format!("nats://{}", free.local_addr().unwrap());
    drop(free);
    for (broker, webhooks) in [
        (None, true),
        (Some(dead_broker.as_str()), true),
        (None, false),
    ] {
        let mut vars = vec![
            ("RECONCILE_INTERVAL_MS", "100"),
            ("EVENTS_RETENTION_S", "60"),
            ("WEBHOOK_POLL_MS", if webhooks { "50" } else { "0" }),
        ];
        if let Some(url) = broker {
            vars.push(("EVENTS_URL", url));
        }
        let app = TestApp::spawn_with(&vars).await;
        let (_, drop) = app.open_drop(5, 5, 1).await;
        assert_eq!(
            app.purchase(drop, 1, "k", 1).await.status(),
            StatusCode::ACCEPTED
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            events_of(&app, drop).await.len(),
            2,
            "kept within the retention"
        );
        app.clock.advance(time::Duration::seconds(61));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let left = loop {
            let left = events_of(&app, drop).await.len();
            if left == 0 || std::time::Instant::now() > until {
                break left;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        match (broker, webhooks) {
            (None, true) => assert_eq!(left, 0, "pruned once past the retention"),
            (Some(_), _) => assert_eq!(left, 2, "never published, so never pruned"),
            (None, false) => assert_eq!(left, 2, "never fanned out, so never pruned"),
        }
    }
}

/// A private NATS server, killed and restarted.
mod needs_nats {
    use super::*;

    /// The ids of every message in `stream` on `url`, in stream order; each message's payload is
    /// its event and its subject `goods.<dropId>.<type>`.
    async fn stream_ids(url: &str, stream: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for message in test_support::nats::stored(url, stream).await {
            let payload: Value = serde_json::from_str(&message.payload).unwrap();
            assert_eq!(
                payload["id"],
                message.id.as_str(),
                "the payload is the event"
            );
            assert_eq!(
                message.subject,
                format!(
                    "goods.{}.{}",
                    payload["data"]["dropId"],
                    payload["type"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches("goods.")
                )
            );
            ids.push(message.id);
        }
        ids
    }

    /// Polls until the stream holds `n` messages (at most 15 s); their ids.
    async fn until_stored(url: &str, stream: &str, n: usize) -> Vec<String> {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let ids = stream_ids(url, stream).await;
            if ids.len() >= n || std::time::Instant::now() > until {
                return ids;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Two instances on one database and one broker, a sale of 20 units in each of 16 drops spread over both
    /// while their relays race for the events lease: each drop's events reach the stream once
    /// each, in `dropseq` order. The stream's duplicate window is 100 ms (NATS's least), so the broker's
    /// dedupe hides no second publication: the lease alone keeps each id once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_instances_relaying_one_log_publish_each_drops_events_once_in_order() {
        const DROPS: i64 = 16;
        const UNITS: i64 = 20;
        let nats = test_support::nats::PrivateNats::start();
        let stream = "GOODS_EVENTS_RACE";
        test_support::nats::create_stream(
            &nats.url(),
            stream,
            std::time::Duration::from_millis(100),
        )
        .await;
        let a =
            TestApp::spawn_with(&[("EVENTS_URL", &nats.url()), ("EVENTS_STREAM", stream)]).await;
        let b = a.sibling().await;
        let mut drops = Vec::new();
        for _ in 0..DROPS {
            drops.push(a.open_drop(UNITS, UNITS, 1).await.1);
        }
        // Waves of one purchase per drop, alternately through each instance, so events keep
        // arriving while both relays run. An answer that says to come back (a 503 on a loaded
        // machine: the two instances share one database) is retried with the same key, as a
        // client does; the order is placed once whatever the tries, so the events stay exact.
        for user in 1..=UNITS {
            let answers = join_all(drops.iter().enumerate().map(|(i, &drop)| {
                let app = if (i as i64 + user) % 2 == 0 { &a } else { &b };
                async move {
                    app.purchase_until_final(drop, user, &format!("k{drop}"), 1)
                        .await
                }
            }))
            .await;
            assert!(
                answers.iter().all(|(s, _)| *s == StatusCode::ACCEPTED),
                "{answers:?}"
            );
        }
        // Created, 20 placed and sold out per drop.
        let logged = DROPS * (UNITS + 2);
        assert_eq!(until_pending(&a, 0.0).await, 0.0);
        assert_eq!(until_pending(&b, 0.0).await, 0.0);
        let stored = until_stored(&nats.url(), stream, logged as usize).await;
        assert_eq!(stored.len() as i64, logged, "every event once, none twice");
        let mut seqs: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
        for message in test_support::nats::stored(&nats.url(), stream).await {
            let payload: Value = serde_json::from_str(&message.payload).unwrap();
            let drop: i64 = message.subject.split('.').nth(1).unwrap().parse().unwrap();
            seqs.entry(drop)
                .or_default()
                .push(payload["dropseq"].as_i64().unwrap());
        }
        assert_eq!(seqs.len() as i64, DROPS);
        for (drop, seq) in seqs {
            let in_order: Vec<i64> = (1..=UNITS + 2).collect();
            assert_eq!(
                seq, in_order,
                "drop {drop}: its events in dropseq order, each once"
            );
        }
    }

    /// With a broker: every event reaches the stream in commit order under its id; with the broker
    /// killed, 20 purchases are answered 202 as fast as before and their events wait in the log;
    /// once it is back they drain in order, none lost, none twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broker_killed_mid_sale_slows_no_buyer_and_gets_every_event_in_order_once_back() {
        let mut nats = test_support::nats::PrivateNats::start();
        let stream = "GOODS_EVENTS_E2E";
        let app =
            TestApp::spawn_with(&[("EVENTS_URL", &nats.url()), ("EVENTS_STREAM", stream)]).await;
        let (_, drop) = app.open_drop(30, 30, 1).await;
        for user in 1..=10 {
            assert_eq!(
                app.purchase(drop, user, "k", 1).await.status(),
                StatusCode::ACCEPTED
            );
        }
        let stored = until_stored(&nats.url(), stream, 11).await;
        assert_eq!(stored.len(), 11, "created + 10 placed reach the stream");
        assert_eq!(until_pending(&app, 0.0).await, 0.0);

        nats.kill();
        let started = std::time::Instant::now();
        let answers = join_all((11..=30).map(|user| {
            let app = &app;
            async move { app.purchase(drop, user, "k", 1).await.status() }
        }))
        .await;
        let took = started.elapsed();
        assert!(
            answers.iter().all(|s| *s == StatusCode::ACCEPTED),
            "{answers:?}"
        );
        assert!(
            took < std::time::Duration::from_secs(2),
            "20 purchases took {took:?} with the broker down"
        );
        // 20 placed and the sell-out wait in the log.
        assert_eq!(until_pending(&app, 21.0).await, 21.0);

        nats.restart();
        let stored = until_stored(&nats.url(), stream, 32).await;
        let logged: Vec<String> = events_of(&app, drop)
            .await
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(logged.len(), 32);
        assert_eq!(
            stored, logged,
            "the stream holds every event once, in commit order"
        );
        assert_eq!(until_pending(&app, 0.0).await, 0.0);
    }
}
