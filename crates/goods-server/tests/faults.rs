//! Faults with real processes: `goods-server` killed with SIGKILL mid-sale and restarted, Redis
//! paused with SIGSTOP, Redis restarted empty, MariaDB killed and restarted. After each, the
//! service must heal on its own: the drop sells out exactly, every 202 is an order that
//! exists, no buyer stays stuck, and the gate agrees with the database (drift 0).
//!
//! Each test runs the real binary against its own database and Redis keys (private servers for
//! the ones it kills), with short bounds so healing happens within seconds:
//! `RESERVATION_LEASE_MS=2500`, `RECONCILE_INTERVAL_MS=250`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::future::join_all;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use test_support::json::pick;
use test_support::mariadb::PrivateMariadb;
use test_support::redis::PrivateRedis;

mod support;
use support::harness::{self, *};

/// The environment of an instance on `redis` (with keys of its own) and a fresh MariaDB
/// database, plus `extra`.
async fn on_private_redis(
    redis: &PrivateRedis,
    extra: &[(&'static str, String)],
) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("GATE", "redis".to_owned()),
        ("REDIS_URL", redis.url()),
        ("REDIS_KEY_PREFIX", fresh_prefix()),
        ("DATABASE_URL", test_support::mysql::fresh_database().await),
    ];
    vars.extend_from_slice(extra);
    vars
}

/// Buyers `1..=buyers` buy at once; `then` runs as soon as `wins` of them have their 202, while
/// the rest are in flight. Every buyer's outcome (a [`Failure`] when `then` cut it).
async fn all_at_once_until(
    client: &Client,
    base: &str,
    drop: i64,
    buyers: i64,
    wins: usize,
    then: impl FnOnce(),
) -> Vec<(i64, Result<Answer, Failure>)> {
    let won = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let tries = (1..=buyers).map(|user| {
        let (client, base) = (client.clone(), base.to_owned());
        let (won, enough) = (Arc::clone(&won), Arc::clone(&enough));
        tokio::spawn(async move {
            let answer = client.buy(&base, drop, user).await;
            if answer.as_ref().is_ok_and(|a| a.status == 202)
                && won.fetch_add(1, Ordering::SeqCst) + 1 == wins
            {
                enough.notify_one();
            }
            (user, answer)
        })
    });
    let in_flight = tokio::spawn(join_all(tries));
    enough.notified().await;
    then();
    in_flight
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_mid_sale_leaves_no_unit_held_and_no_buyer_stuck() {
    killed_mid_sale(None).await;
}

/// The same kill in a drop of three sizes (buyer `u` buys size `u % 3`): each size heals on its
/// own, sells exactly its units, and no buyer is stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_mid_sale_of_a_drop_in_sizes_heals_each_size() {
    killed_mid_sale(Some(&[("S", 30), ("M", 40), ("L", 30)])).await;
}

/// 300 buyers of a drop of 100 units (or of `sizes`), the server killed with SIGKILL as soon as
/// 20 have their 202, then restarted: every 202 replays, every buyer gets an answer, the drop
/// (each size) sells out exactly.
async fn killed_mid_sale(sizes: Option<&[(&str, i64)]>) {
    const LIMITED: i64 = 100;
    const BUYERS: i64 = 300;
    let database = test_support::mysql::fresh_database().await;
    let prefix = fresh_prefix();
    let mut vars = shared_redis(&prefix).to_vec();
    vars.push(("DATABASE_URL", database));
    let mut server = Server::start(&env(&vars));
    let (client, drop) = match sizes {
        None => {
            let client = Client::new();
            let drop = client.open_drop(&server.base, LIMITED).await;
            (client, drop)
        }
        Some(sizes) => {
            assert_eq!(sizes.iter().map(|(_, n)| n).sum::<i64>(), LIMITED);
            let skus: Vec<&str> = sizes.iter().map(|(s, _)| *s).collect();
            let client = Client::new().in_sizes(&skus);
            let drop = client.open_sized_drop(&server.base, sizes).await;
            (client, drop)
        }
    };

    // 300 buyers at once; SIGKILL as soon as 20 of them have their 202.
    let before = all_at_once_until(&client, &server.base.clone(), drop, BUYERS, 20, || {
        server.kill9()
    })
    .await;
    let cut = before.iter().filter(|(_, a)| a.is_err()).count();
    assert!(cut > 0, "the kill must cut purchases in flight");
    for (user, outcome) in &before {
        assert!(
            !matches!(outcome, Err(Failure::Hang | Failure::NotJson(_))),
            "buyer {user}: {outcome:?} (a kill cuts connections; nothing may hang)"
        );
    }
    let won_before: HashMap<i64, i64> = before
        .iter()
        .filter_map(|(user, answer)| {
            let answer = answer.as_ref().ok()?;
            (answer.status == 202).then_some((*user, answer.order?))
        })
        .collect();

    server.restart();
    let restarted = Instant::now();
    // Every buyer retries its key until it has a definitive answer; IN_PROGRESS may last at
    // most the lease plus one healing interval after the restart. 429 and 503 are "retry with
    // the same key" too (300 retries at once may outwait the write-slot or pool bound on a
    // loaded machine); 500 never.
    let limit = Duration::from_millis(LEASE_MS + HEAL_MS) + Duration::from_secs(3);
    let mut answers: Answers = HashMap::new();
    let mut pending: Vec<i64> = (1..=BUYERS).collect();
    while !pending.is_empty() {
        assert!(
            restarted.elapsed() < limit,
            "{} buyers still in progress",
            pending.len()
        );
        let got = wave(&client, &server.base, drop, pending.iter().copied()).await;
        for a in got.values() {
            assert!(
                a.status < 500 || a.status == 503,
                "no 500 after the restart: {a:?}"
            );
        }
        pending.retain(|user| got.get(user).is_none_or(harness::retry_later));
        answers.extend(got.into_iter().filter(|(_, a)| !harness::retry_later(a)));
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let healed = client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    eprintln!(
        "healed {:?} after the restart ({cut} purchases cut)",
        restarted.elapsed().max(healed)
    );
    // Buyers turned away while units were still held by the dead process try once more.
    let again: Vec<i64> = answers
        .iter()
        .filter(|(_, a)| a.is("SOLD_OUT"))
        .map(|(u, _)| *u)
        .collect();
    answers.extend(wave(&client, &server.base, drop, again.into_iter()).await);
    for (user, order) in &won_before {
        assert_eq!(
            answers[user].order,
            Some(*order),
            "buyer {user}'s 202 is replayed, same order"
        );
    }
    assert!(
        answers
            .values()
            .all(|a| a.status == 202 || a.is("SOLD_OUT")),
        "{answers:?}"
    );
    match sizes {
        None => assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await,
        Some(sizes) => {
            assert_each_size_sold_out_exactly(&client, &server.base, drop, sizes, &answers).await;
        }
    }
}

/// SIGTERM mid-sale, as an orchestrator sends it: the purchases in flight are answered, a 202
/// only for an order that is committed; the committers drain; the process exits 0 within
/// `SHUTDOWN_GRACE_MS`. Nothing is held afterwards: an instance that does no healing finds the
/// gate agreeing with the database (drift 0), which a reservation left in progress would break
/// until healed. The sale then finishes exactly on a new instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_mid_sale_answers_the_buyers_in_flight_and_exits_within_the_grace() {
    const LIMITED: i64 = 200;
    const BUYERS: i64 = 600;
    const GRACE_MS: u64 = 5000;
    let prefix = fresh_prefix();
    let mut vars = shared_redis(&prefix).to_vec();
    vars.push(("DATABASE_URL", test_support::mysql::fresh_database().await));
    vars.push(("SHUTDOWN_GRACE_MS", GRACE_MS.to_string()));
    let mut server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;

    // 600 buyers at once; SIGTERM as soon as 20 of them have their 202.
    let mut exit = None;
    let before = all_at_once_until(&client, &server.base.clone(), drop, BUYERS, 20, || {
        exit = Some(server.terminate());
    })
    .await;
    let (code, took) = exit.unwrap();
    eprintln!("exited {code:?} {took:?} after SIGTERM");
    assert_eq!(code, Some(0), "a graceful stop exits 0");
    assert!(
        took <= Duration::from_millis(GRACE_MS),
        "exited {took:?} after SIGTERM, past SHUTDOWN_GRACE_MS={GRACE_MS}"
    );
    for (user, outcome) in &before {
        assert!(
            !matches!(outcome, Err(Failure::Hang | Failure::NotJson(_))),
            "buyer {user}: {outcome:?} (a stopping server closes its door; nothing may hang)"
        );
    }
    let answered: Answers = before
        .iter()
        .filter_map(|(user, a)| a.clone().ok().map(|a| (*user, a)))
        .collect();
    let refused_at_the_door = before.len() - answered.len();
    for a in answered.values() {
        assert!(a.status < 500, "an answer during shutdown is final: {a:?}");
    }
    let won_before: HashMap<i64, i64> = answered
        .iter()
        .filter(|(_, a)| a.status == 202)
        .map(|(user, a)| (*user, a.order.unwrap()))
        .collect();
    eprintln!(
        "{} answered ({} of them 202), {refused_at_the_door} refused at the door",
        answered.len(),
        won_before.len()
    );

    // No healing here: whatever the stopped instance left held would show as drift.
    let mut checker_env = env(&vars);
    checker_env.push(("RECONCILE_INTERVAL_MS", "0"));
    let checker = Server::start(&checker_env);
    let recon = client.reconciliation(&checker.base, drop).await;
    assert_eq!(
        recon["soldQuantity"],
        json!(won_before.len()),
        "every committed order was answered 202, every 202 committed: {recon}"
    );
    assert_eq!(
        recon["drift"],
        json!(0),
        "units held after the stop: {recon}"
    );
    for (user, order) in &won_before {
        assert!(
            client.order_exists(&checker.base, *user, *order).await,
            "order {order} of buyer {user}"
        );
    }
    std::mem::drop(checker);

    // The sale finishes on a new instance; the 202s before the stop replay the same orders.
    server.restart();
    let mut answers = answered;
    let again: Vec<i64> = (1..=BUYERS)
        .filter(|user| answers.get(user).is_none_or(|a| a.status != 202))
        .collect();
    answers.extend(wave(&client, &server.base, drop, again.into_iter()).await);
    answers.extend(wave(&client, &server.base, drop, won_before.keys().copied()).await);
    for (user, order) in &won_before {
        assert_eq!(
            answers[user].order,
            Some(*order),
            "buyer {user}'s 202 replays"
        );
    }
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
}

/// The instance drawing a draw drop is killed (SIGKILL) while it awards the winners: another
/// instance takes the background lease and finishes the draw, and the drop ends with exactly
/// `limitedQuantity` winners, one order each, the lowest rank keys of the revealed seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_killed_mid_draw_leaves_exactly_the_winners_after_another_finishes() {
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    const ENTRIES: i64 = 20_000;
    const LIMITED: i64 = 15_000;
    let database = test_support::mysql::fresh_database().await;
    let prefix = fresh_prefix();
    let mut vars = shared_redis(&prefix).to_vec();
    vars.push(("DATABASE_URL", database.clone()));
    let mut first = Server::start(&env(&vars));
    let client = Client::new();
    // The first instance leads before the second starts.
    let start = Instant::now();
    while !harness::process::exposition(&client.http, &first.base)
        .await
        .lines()
        .any(|l| l == "background_leader 1")
    {
        assert!(start.elapsed() < Duration::from_secs(5), "nobody leads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut second = Server::start(&env(&vars));
    let drop = client
        .open_draw(&first.base, LIMITED, LIMITED, time::Duration::seconds(4))
        .await["dropId"]
        .as_i64()
        .unwrap();
    // 20,000 entries at once, straight into the table (the entry path has tests of its own).
    let mut conn = AsyncMysqlConnection::establish(&database).await.unwrap();
    conn.batch_execute(&format!(
        "INSERT INTO draw_entries (drop_id, user_id, entered_at, entry_token) \
         SELECT {drop}, seq, NOW(6), 0 FROM seq_1_to_{ENTRIES}"
    ))
    .await
    .unwrap();
    let winners_q = format!("SELECT COUNT(order_id) AS n FROM draw_entries WHERE drop_id = {drop}");
    // The leader is awarding: kill it halfway.
    let start = Instant::now();
    loop {
        let awarded = count(&mut conn, &winners_q).await;
        if awarded > 0 {
            assert!(
                awarded < LIMITED,
                "the draw finished before the kill could catch it"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the draw never began"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill9();
    let killed_at = count(&mut conn, &winners_q).await;
    eprintln!("leader killed with {killed_at} of {LIMITED} winners awarded");
    let start = Instant::now();
    let drawn = loop {
        let view: serde_json::Value = client
            .http
            .get(format!("{}/limited-drops/{drop}", second.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if view.get("drawnAt").is_some() {
            break view;
        }
        // The takeover waits out the draws lease; then 15,000 awards, each with its order and
        // its goods.entry.won event: about 26 s here with the machine to itself.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nobody finished the draw: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "the second instance finished the draw {:?} after the kill",
        start.elapsed()
    );
    assert_eq!(
        count(&mut conn, &winners_q).await,
        LIMITED,
        "exactly the units, awarded"
    );
    let orders = count(
        &mut conn,
        &format!("SELECT COUNT(*) AS n FROM orders WHERE drop_id = {drop}"),
    )
    .await;
    let buyers = count(
        &mut conn,
        &format!("SELECT COUNT(DISTINCT user_id) AS n FROM orders WHERE drop_id = {drop}"),
    )
    .await;
    assert_eq!(
        (orders, buyers),
        (LIMITED, LIMITED),
        "one order per winner, none twice"
    );
    // The winners are the lowest rank keys of the revealed seed.
    let seed = goods_domain::DrawSeed::from_hex(drawn["drawSeed"].as_str().unwrap()).unwrap();
    assert_eq!(
        seed.commitment().to_hex(),
        drawn["drawCommitment"].as_str().unwrap()
    );
    let users: Vec<goods_domain::Entrant> = (1..=ENTRIES)
        .map(|u| goods_domain::Entrant::without_size(goods_domain::UserId::parse(u).unwrap()))
        .collect();
    let ranked = goods_domain::draw::rank(&seed, &users);
    let cutoff = &ranked[usize::try_from(LIMITED).unwrap() - 1];
    assert_eq!(drawn["winningRankCutoff"], json!(cutoff.rank_key.to_hex()));
    let won_by_rank = count(
        &mut conn,
        &format!(
            "SELECT COUNT(*) AS n FROM draw_entries WHERE drop_id = {drop} \
             AND order_id IS NOT NULL AND rank_key <= '{}'",
            cutoff.rank_key.to_hex()
        ),
    )
    .await;
    assert_eq!(won_by_rank, LIMITED);
    second.kill9();
}

/// One number a query selects as `n`.
async fn count(conn: &mut diesel_async::AsyncMysqlConnection, q: &str) -> i64 {
    use diesel::QueryableByName;
    use diesel_async::RunQueryDsl as _;
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    diesel::sql_query(q).get_result::<N>(conn).await.unwrap().n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_stall_mid_sale_heals_and_refusals_stop_touching_the_database() {
    const LIMITED: i64 = 200;
    let redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[]).await;
    // The buyers' instance does no background work (no healing, and its refresh of flags and
    // drops, two queries every DROP_REFRESH_MS, out of the test's time), so its statement
    // counter moves only for purchases; a second instance on the same database and Redis heals.
    let mut buyers_env = env(&vars);
    buyers_env.push(("RECONCILE_INTERVAL_MS", "0"));
    buyers_env.push(("DROP_REFRESH_MS", "3600000"));
    let buyers = Server::start(&buyers_env);
    let _healer = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&buyers.base, LIMITED).await;

    let mut answers: Answers = HashMap::new();
    let mut next = 1;
    let mut resumed = None;
    for round in 0.. {
        assert!(round < 40, "the drop never sold out");
        if round == 1 {
            // Mid-sale: Redis stops answering for a second, its data intact.
            redis.pause();
        }
        let got = wave(&client, &buyers.base, drop, next..next + 100).await;
        next += 100;
        if round == 1 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            redis.resume();
            resumed = Some(Instant::now());
        }
        for a in got.values() {
            assert!(a.status < 500, "a Redis stall is no 5xx: {a:?}");
        }
        answers.extend(got);
        let recon = client.reconciliation(&buyers.base, drop).await;
        if recon["soldQuantity"] == json!(LIMITED) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(HEAL_MS)).await;
    }
    let healed = client.until_healed(&buyers.base, drop, HEAL_WITHIN).await;
    eprintln!(
        "sold out and healed {:?} after Redis resumed",
        resumed.unwrap().elapsed().max(healed)
    );
    assert_sold_out_exactly(&client, &buyers.base, drop, LIMITED, &answers).await;

    // Sold out and healed. Within the breaker's cool-down after the stall, purchases still go
    // to the database; once a refusal is answered by the gate again (polled one at a time),
    // refusals cost the database nothing.
    let recovering = Instant::now();
    loop {
        let before = client.db_statements(&buyers.base).await;
        let refused = client.buy(&buyers.base, drop, next).await.unwrap();
        next += 1;
        assert!(refused.is("SOLD_OUT"), "{refused:?}");
        if client.db_statements(&buyers.base).await == before {
            break;
        }
        assert!(
            recovering.elapsed() < Duration::from_secs(5),
            "the gate never took over again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The breaker closing on that refusal also starts, in the background, the resync of the
    // drops the database sold while the gate was away (a drop read and a seed read on this
    // instance): let it finish before counting, so the wave is measured alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = client.db_statements(&buyers.base).await;
    let refused = wave(&client, &buyers.base, drop, next..next + 50).await;
    assert!(refused.values().all(|a| a.is("SOLD_OUT")), "{refused:?}");
    assert_eq!(client.db_statements(&buyers.base).await, before);

    // The outage, in the drop's events: degraded once (though a hundred purchases bypassed the
    // gate), then recovered once the gate was resynced, numbered among the orders.
    let events = client.events(&buyers.base, drop).await;
    let gate: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("goods.gate."))
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["data"]["severity"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gate,
        [
            ("goods.gate.degraded", "warning"),
            ("goods.gate.recovered", "info")
        ],
        "{events:?}"
    );
    let numbers: Vec<i64> = events
        .iter()
        .map(|e| e["dropseq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (1..=i64::try_from(events.len()).unwrap()).collect::<Vec<_>>()
    );
}

/// Restarts `redis` empty and waits until the reconciliation of `drop` is `seeded`, with no
/// drift, though nobody buys: only the healer can seed it. The client reconnects within its
/// backoff (at most 2 s), then one healing interval; how long it took.
async fn restart_empty_until_seeded(
    redis: &mut PrivateRedis,
    client: &Client,
    base: &str,
    drop: i64,
    seeded: impl Fn(&serde_json::Value) -> bool,
) -> Duration {
    redis.restart();
    assert_eq!(
        redis.cli(&["DBSIZE"]).unwrap().trim(),
        "0",
        "restarted empty"
    );
    let back = Instant::now();
    let within =
        Duration::from_secs(2) + Duration::from_millis(2 * HEAL_MS) + Duration::from_secs(1);
    loop {
        let recon = client.reconciliation(base, drop).await;
        if seeded(&recon) {
            assert_eq!(recon["drift"], json!(0), "{recon}");
            return back.elapsed();
        }
        assert!(
            back.elapsed() < within,
            "not seeded within {within:?}: {recon}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_empty_mid_sale_is_seeded_by_the_healer_before_anyone_buys() {
    const LIMITED: i64 = 50;
    let mut redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[]).await;
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let sold = wave(&client, &server.base, drop, 1..=20).await;
    assert_eq!(sold.values().filter(|a| a.status == 202).count(), 20);

    let took = restart_empty_until_seeded(&mut redis, &client, &server.base, drop, |recon| {
        recon["gateRemaining"] == json!(LIMITED - 20)
    })
    .await;
    eprintln!("gate seeded {took:?} after Redis came back empty");
    let replay = client.buy(&server.base, drop, 1).await.unwrap();
    assert_eq!(
        (replay.status, replay.order),
        (202, sold[&1].order),
        "markers were rebuilt too"
    );
}

/// Redis restarted empty in the middle of a sale in sizes: the healer seeds every size from
/// the database (each size's counter, the markers with their sizes) before anyone buys, and
/// the sale then sells each size out exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_empty_mid_sale_of_sizes_is_seeded_size_by_size() {
    const SIZES: [(&str, i64); 2] = [("S", 20), ("M", 30)];
    let mut redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[]).await;
    let server = Server::start(&env(&vars));
    let client = Client::new().in_sizes(&["S", "M"]);
    let drop = client.open_sized_drop(&server.base, &SIZES).await;
    // Buyers 1..=20: ten of each size.
    let sold = wave(&client, &server.base, drop, 1..=20).await;
    assert_eq!(sold.values().filter(|a| a.status == 202).count(), 20);

    restart_empty_until_seeded(&mut redis, &client, &server.base, drop, |recon| {
        pick(&recon["variants"], &["gateRemaining"]) == json!([[10], [20]])
    })
    .await;
    for user in [1, 2] {
        let replay = client.buy(&server.base, drop, user).await.unwrap();
        assert_eq!(
            (replay.status, replay.order),
            (202, sold[&user].order),
            "buyer {user}'s marker was rebuilt in its size"
        );
    }
    let sale = sell_out_in_waves(
        &client,
        &server.base,
        drop,
        50,
        21,
        sold,
        Duration::from_secs(30),
    )
    .await;
    assert_each_size_sold_out_exactly(&client, &server.base, drop, &SIZES, &sale.answers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_killed_and_restarted_mid_sale_loses_no_order_and_the_pool_recovers() {
    const LIMITED: i64 = 120;
    let mut mariadb = PrivateMariadb::start();
    let database = mariadb.database("faults");
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database));
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;

    let answers = wave(&client, &server.base, drop, 1..=40).await;
    assert_eq!(answers.values().filter(|a| a.status == 202).count(), 40);

    mariadb.kill();
    let down = wave(&client, &server.base, drop, 41..=80).await;
    for a in down.values() {
        assert!(
            a.status == 503 && a.is("SERVICE_UNAVAILABLE"),
            "with the database down a purchase is 503, never a 202 nor a hang: {a:?}"
        );
    }
    until_ready_status(&client.http, &server.base, 503).await;
    // Any route that needs the database answers 503 too, not 500.
    let (buyer, answer) = answers.iter().next().unwrap();
    let order = client
        .http
        .get(format!("{}/orders/{}", server.base, answer.order.unwrap()))
        .header("Authorization", harness::bearer(*buyer, "buyer"))
        .send()
        .await
        .unwrap();
    assert_eq!(order.status(), 503);
    assert_eq!(order.headers()["retry-after"], "1");

    mariadb.restart();
    sells_out_after_mariadb_is_back(&mariadb, &client, &server, drop, LIMITED, 41, answers).await;
}

/// MariaDB answers again (restarted or resumed): buyers from `next` on buy in waves of 40 until
/// the drop has sold `limited` (never a 500, within 20 s); then the gate heals, the instance is
/// ready again without a restart, the drop is sold out exactly with `answers`, and the database
/// holds exactly `limited` orders of it.
async fn sells_out_after_mariadb_is_back(
    mariadb: &PrivateMariadb,
    client: &Client,
    server: &Server,
    drop: i64,
    limited: i64,
    next: i64,
    answers: Answers,
) {
    let Sale {
        answers,
        sold_out_after,
        ..
    } = sell_out_in_waves(
        client,
        &server.base,
        drop,
        limited,
        next,
        answers,
        Duration::from_secs(20),
    )
    .await;
    eprintln!("sold out {sold_out_after:?} after MariaDB came back");
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    until_ready_status(&client.http, &server.base, 200).await;
    assert_sold_out_exactly(client, &server.base, drop, limited, &answers).await;
    let orders = mariadb.sql(&format!(
        "SELECT COUNT(*) FROM faults.orders WHERE drop_id = {drop}"
    ));
    assert_eq!(
        orders.trim(),
        limited.to_string(),
        "no order lost, none extra"
    );
}

/// With the fleet's write budget kept in Redis (`DB_WRITE_PERMITS_GLOBAL`), a Redis stall
/// mid-sale does not stop the sale: the gate falls back to the database, and each purchase
/// transaction that cannot reach the budget runs on the instance's own bound, counted in
/// `db_write_budget_bypassed_total`. Once Redis answers again the budget is used again (the
/// count stops), the drop sells out exactly and the gate heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_stall_under_a_global_budget_lets_purchases_run_on_the_local_bound() {
    const LIMITED: i64 = 200;
    const BYPASSED: &str = "db_write_budget_bypassed_total";
    let redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[("DB_WRITE_PERMITS_GLOBAL", "4".to_owned())]).await;
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let bypassed = || harness::process::metric_sum(&client.http, &server.base, BYPASSED);
    let drop = client.open_drop(&server.base, LIMITED).await;

    let mut answers = wave(&client, &server.base, drop, 1..51).await;
    assert_eq!(
        answers.values().filter(|a| a.status == 202).count(),
        50,
        "a healthy Redis: {answers:?}"
    );
    assert_eq!(bypassed().await, 0.0, "a healthy budget is never bypassed");

    redis.pause();
    let stalled = wave(&client, &server.base, drop, 51..151).await;
    redis.resume();
    let sold_in_stall = stalled.values().filter(|a| a.status == 202).count();
    // docs/scaling.md: "100 of 100 buyers bought during the stall".
    assert_eq!(
        sold_in_stall, 100,
        "every buyer of the stall bought, on the local bound: {stalled:?}"
    );
    let during = bypassed().await;
    assert!(during > 0.0, "the stalled budget was bypassed, and counted");
    eprintln!("{sold_in_stall} sold during the stall, {during} transactions without a permit");
    answers.extend(stalled);

    // Redis answers again: the rest of the drop sells through the budget (a purchase refused
    // THROTTLED is simply not sold; its buyer would retry). The budget's record of the most
    // permits held is cleared first, so a permit taken from here on shows in it.
    let prefix = &vars
        .iter()
        .find(|(k, _)| *k == "REDIS_KEY_PREFIX")
        .unwrap()
        .1;
    let peak_key = format!("{prefix}{{db}}:permits:peak");
    redis.cli(&["DEL", &peak_key]).unwrap();
    let mut next = 151;
    for round in 0.. {
        assert!(round < 40, "the drop never sold out");
        answers.extend(wave(&client, &server.base, drop, next..next + 50).await);
        next += 50;
        if client.reconciliation(&server.base, drop).await["soldQuantity"] == json!(LIMITED) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(HEAL_MS)).await;
    }
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
    let peak: u32 = redis
        .cli(&["GET", &peak_key])
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(
        (1..=4).contains(&peak),
        "after the stall the sale took permits from the budget again, at most 4 at once: {peak}"
    );
    eprintln!(
        "after the stall: at most {peak} permits held; {} transactions ran without one in all",
        bypassed().await
    );
}

/// A change notice lost to a Redis stall only delays the change: with Redis paused (SIGSTOP),
/// a pause made through one instance answers at once (the notice is sent in the background)
/// and reaches the other instance by its poll (`DROP_REFRESH_MS`), the only way left while
/// Redis says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_notice_lost_in_a_redis_stall_reaches_the_other_instance_by_the_poll() {
    const POLL_MS: u64 = 300;
    let redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[("DROP_REFRESH_MS", POLL_MS.to_string())]).await;
    let operator = Server::start(&env(&vars));
    let other = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&operator.base, 1000).await;
    // The other instance has the drop cached (open) before the stall.
    assert_eq!(client.buy(&other.base, drop, 1).await.unwrap().status, 202);

    redis.pause();
    // The operator's first call to the stalled gate waits its command timeout and opens its
    // breaker (reads then skip the gate for a while); from then on nothing of the pause has
    // to wait on Redis, the notice least of all.
    let read = client
        .seller_json(&operator.base, &format!("/limited-drops/{drop}"))
        .await;
    assert_eq!(read["status"], json!("OPEN"), "{read}");
    let asked = Instant::now();
    let paused = client
        .as_seller(
            client
                .http
                .post(format!("{}/limited-drops/{drop}/pause", operator.base)),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
    let answered = asked.elapsed();
    assert!(
        answered < Duration::from_millis(500),
        "the pause waited on the stalled Redis (its notice?): {answered:?}"
    );
    let mut user = 2;
    loop {
        let answer = client.buy(&other.base, drop, user).await.unwrap();
        user += 1;
        if answer.is("DROP_PAUSED") {
            break;
        }
        // Until it learns of the pause it still sells, through the database.
        assert_eq!(answer.status, 202, "{answer:?}");
        // docs/api.md: a pause reaches the fleet within a second, the notice lost included.
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "the other instance did not learn of the pause within a second, by its poll"
        );
    }
    let learned = asked.elapsed();
    redis.resume();
    // The refusal itself came within the second too, not only every sale before it.
    assert!(
        learned < Duration::from_secs(1),
        "the other instance refused the paused drop {learned:?} after the pause"
    );
    eprintln!(
        "pause answered in {answered:?}; the other instance refused {learned:?} after it, with Redis stalled"
    );
}

/// Polls `/health/ready` until it answers `status`: a readiness answer is reused for up to
/// `READY_CACHE`, so a change shows within that and one check of the database.
async fn until_ready_status(http: &reqwest::Client, base: &str, status: u16) {
    let start = Instant::now();
    loop {
        let res = http
            .get(format!("{base}/health/ready"))
            .send()
            .await
            .unwrap();
        if res.status() == status {
            return;
        }
        assert!(
            start.elapsed() < api_actix::READY_CACHE + Duration::from_secs(4),
            "/health/ready still answers {} rather than {status}",
            res.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Drop ids are the database's: a database reset (or restored) starts them again, and another
/// database sharing the Redis and its prefix has the same ones. The gate's keys carry the
/// database's identity, so a new drop never meets an old drop's gate state (which once left a
/// 2-unit drop with nothing sold answering SOLD_OUT to everyone). Here: a drop sells out; its
/// database is dropped and made again under the same name while Redis keeps every key; the new
/// drop gets the same id and sells out exactly; and a second database on the same Redis and
/// prefix, at the same time, sells its drop of the same id exactly too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_reset_under_a_kept_redis_and_a_second_database_on_it_sell_exactly() {
    const LIMITED: i64 = 2;
    let prefix = fresh_prefix();
    let database = test_support::mysql::fresh_database().await;
    let mut vars = shared_redis(&prefix).to_vec();
    vars.push(("DATABASE_URL", database.clone()));
    let client = Client::new();

    let server = Server::start(&env(&vars));
    let first = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(&client, &server.base, first, 1..=10).await;
    assert_sold_out_exactly(&client, &server.base, first, LIMITED, &answers).await;
    std::mem::drop(server);

    // The reset: the same database name, empty again; Redis untouched.
    use diesel_async::{AsyncConnection as _, SimpleAsyncConnection as _};
    let (url, name) = database.rsplit_once('/').unwrap();
    let mut conn = diesel_async::AsyncMysqlConnection::establish(url)
        .await
        .unwrap();
    conn.batch_execute(&format!("DROP DATABASE {name}; CREATE DATABASE {name}"))
        .await
        .unwrap();
    let server = Server::start(&env(&vars));
    let again = client.open_drop(&server.base, LIMITED).await;
    assert_eq!(
        again, first,
        "a reset database gives the new drop the old drop's id"
    );
    let answers = wave(&client, &server.base, again, 101..=110).await;
    assert_sold_out_exactly(&client, &server.base, again, LIMITED, &answers).await;

    // Another database on the same Redis and prefix, while the first one runs.
    let mut other_vars = shared_redis(&prefix).to_vec();
    other_vars.push(("DATABASE_URL", test_support::mysql::fresh_database().await));
    let other = Server::start(&env(&other_vars));
    let same_id = client.open_drop(&other.base, LIMITED).await;
    assert_eq!(
        same_id, first,
        "the second database's first drop has the same id"
    );
    let answers = wave(&client, &other.base, same_id, 201..=210).await;
    assert_sold_out_exactly(&client, &other.base, same_id, LIMITED, &answers).await;
    // The first database's drop is untouched by the second's sale.
    let recon = client.reconciliation(&server.base, again).await;
    assert_eq!(
        (
            &recon["soldQuantity"],
            &recon["gateRemaining"],
            &recon["drift"]
        ),
        (&json!(LIMITED), &json!(0), &json!(0)),
        "{recon}"
    );
}

/// A stalled database (SIGSTOP on a private mariadbd mid-sale: connections stay open, nothing
/// answers): every purchase is answered within the bounds of database.md's "Bounded waits"
/// (`DB_WRITE_WAIT_MS + DB_ACQUIRE_TIMEOUT_MS + DB_TX_TIMEOUT_MS`, plus slack for the machine),
/// as 503 or 429 (never a 202 that did not commit, never a hang: the wave fails on one);
/// `/health/ready` answers 503 within its bound; after SIGCONT the drop sells out exactly, every
/// 202 has its order, and the gate heals to drift 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_mariadb_mid_sale_answers_every_buyer_within_the_bounds_and_heals() {
    const LIMITED: i64 = 120;
    // The harness's bounds: DB_WRITE_WAIT_MS 500 + DB_ACQUIRE_TIMEOUT_MS 500 + DB_TX_TIMEOUT_MS
    // 1000; the slack covers the gate's scripts and a loaded 2-core machine.
    let bound = Duration::from_millis(500 + 500 + 1000) + Duration::from_millis(1500);
    let mariadb = PrivateMariadb::start();
    let database = mariadb.database("faults");
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database));
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(&client, &server.base, drop, 1..=40).await;
    assert_eq!(answers.values().filter(|a| a.status == 202).count(), 40);
    let product = client
        .seller_json(&server.base, &format!("/limited-drops/{drop}"))
        .await["productId"]
        .as_i64()
        .expect("the drop's product");

    mariadb.pause();
    let timed = (41..=80).map(|user| {
        let (client, base) = (client.clone(), server.base.clone());
        tokio::spawn(async move {
            let sent = Instant::now();
            let outcome = client.buy(&base, drop, user).await;
            (user, outcome, sent.elapsed())
        })
    });
    let stalled = join_all(timed).await;
    let mut slowest = Duration::ZERO;
    for result in stalled {
        let (user, outcome, took) = result.unwrap();
        let answer = outcome.unwrap_or_else(|failure| panic!("buyer {user}: {failure:?}"));
        assert!(
            answer.is("SERVICE_UNAVAILABLE") || answer.is("THROTTLED"),
            "buyer {user}: with the database stalled a purchase is 503 or 429: {answer:?}"
        );
        assert!(
            took <= bound,
            "buyer {user} answered after {took:?}, past {bound:?}"
        );
        slowest = slowest.max(took);
    }
    // Every other route that reads or writes the database answers within the same bound, each
    // on its own clock, and says so: 503 SERVICE_UNAVAILABLE, nothing changed.
    let (buyer, order) = answers
        .iter()
        .find_map(|(user, a)| a.order.map(|order| (*user, order)))
        .expect("an order of the first wave");
    let mut slowest_probe = Duration::ZERO;
    for (answer, took, probe) in
        stalled_probes(&client, &server.base, drop, product, buyer, order).await
    {
        assert!(
            took <= bound,
            "{probe} answered after {took:?}, past {bound:?}"
        );
        assert_eq!(
            (answer.status, answer.code.as_deref()),
            (503, Some("SERVICE_UNAVAILABLE")),
            "{probe}"
        );
        slowest_probe = slowest_probe.max(took);
    }
    let paused = Instant::now();
    until_ready_status(&client.http, &server.base, 503).await;
    eprintln!(
        "stalled: slowest purchase answered in {slowest:?}, slowest of 11 other routes in \
         {slowest_probe:?} (bound {bound:?}); ready 503 within {:?}",
        paused.elapsed()
    );

    mariadb.resume();
    sells_out_after_mariadb_is_back(&mariadb, &client, &server, drop, LIMITED, 81, answers).await;
}

/// Sends, at once, one request to every route that reads or writes the database (but the
/// purchase, which the caller times itself, and the payment webhook, which needs the provider's
/// signature): each answer, how long it took, and what was asked.
async fn stalled_probes(
    client: &Client,
    base: &str,
    drop: i64,
    product: i64,
    buyer: i64,
    order: i64,
) -> Vec<(Answer, Duration, String)> {
    let now = time::OffsetDateTime::now_utc();
    let at = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let new_drop = json!({
        "productId": product, "openAt": at(now + time::Duration::hours(1)),
        "closeAt": at(now + time::Duration::hours(2)), "limitedQuantity": 1, "perUserLimit": 1,
    });
    // (method, path, (user, role), body)
    type Probe<'a> = (&'a str, String, (i64, &'a str), Option<serde_json::Value>);
    let probes: Vec<Probe> = vec![
        (
            "GET",
            format!("/limited-drops/{drop}/stats"),
            (SELLER, "seller"),
            None,
        ),
        (
            "GET",
            format!("/limited-drops/{drop}/reconciliation"),
            (SELLER, "seller"),
            None,
        ),
        (
            "POST",
            format!("/limited-drops/{drop}/pause"),
            (SELLER, "seller"),
            None,
        ),
        (
            "POST",
            "/limited-drops".into(),
            (SELLER, "seller"),
            Some(new_drop),
        ),
        (
            "POST",
            "/products".into(),
            (SELLER, "seller"),
            Some(json!({"name": "Boot", "stockQuantity": 1})),
        ),
        (
            "GET",
            format!("/products/{product}"),
            (SELLER, "seller"),
            None,
        ),
        ("GET", format!("/orders/{order}"), (buyer, "buyer"), None),
        ("GET", "/orders".into(), (buyer, "buyer"), None),
        (
            "POST",
            format!("/orders/{order}/cancel"),
            (buyer, "buyer"),
            None,
        ),
        ("GET", "/admin/events".into(), (1, "admin"), None),
        ("GET", "/admin/payments".into(), (1, "admin"), None),
    ];
    join_all(
        probes
            .into_iter()
            .map(|(method, path, (user, role), body)| {
                let http = client.http.clone();
                let url = format!("{base}{path}");
                async move {
                    let request = match method {
                        "GET" => http.get(&url),
                        _ => http.post(&url),
                    };
                    let request = match body {
                        Some(body) => request.json(&body),
                        None => request,
                    };
                    let request =
                        as_user(request, user, role).header("Idempotency-Key", "stalled-probe");
                    let sent = Instant::now();
                    let response = request
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
                    let took = sent.elapsed();
                    let status = response.status().as_u16();
                    let body: serde_json::Value = response.json().await.unwrap_or_default();
                    let answer = Answer {
                        status,
                        code: body["code"].as_str().map(str::to_owned),
                        order: None,
                    };
                    (answer, took, format!("{method} {path} as {role} {user}"))
                }
            }),
    )
    .await
}

/// The design document's oversell at the gate: the gate admitting more than the database can
/// still sell. Forced here by writing the gate's own key (`remaining` raised by 5 on a sold-out
/// drop, as a stray script or a restore would): the next healing pass confirms the negative
/// drift, counts it in `gate_oversell_events_total` (the `GoodsGateOversell` alert, critical,
/// `source=oversell`) and resyncs the gate; buyers meanwhile get no unit the database does not
/// have (its guard holds), and afterwards the gate agrees again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_admitting_beyond_the_database_is_counted_as_an_oversell_and_resynced() {
    const LIMITED: i64 = 10;
    const COUNTER: &str = "gate_oversell_events_total";
    let redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[]).await;
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(&client, &server.base, drop, 1..=30).await;
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
    let counted = || harness::process::metric_sum(&client.http, &server.base, COUNTER);
    assert_eq!(counted().await, 0.0, "a healthy gate is never counted");

    let keys = redis
        .cli(&[
            "--scan",
            "--pattern",
            &format!("*drop:{{{drop}}}:remaining"),
        ])
        .unwrap();
    let key = keys.lines().next().expect("the drop's remaining key");
    redis.cli(&["SET", key, "5"]).unwrap();

    let start = Instant::now();
    while counted().await < 1.0 {
        assert!(
            start.elapsed() < HEAL_WITHIN,
            "negative drift not counted within {HEAL_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    let late = wave(&client, &server.base, drop, 31..=40).await;
    assert!(late.values().all(|a| a.is("SOLD_OUT")), "{late:?}");
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
    let recon = client.reconciliation(&server.base, drop).await;
    assert_eq!(
        recon["oversold"],
        json!(false),
        "the database kept its guard: {recon}"
    );
}

/// An oversell in the database (orders for more units than the drop has), which the
/// service's own writes cannot make, forged by a writer outside it: healing records it once in
/// the outbox, counts it in `oversell_events_total` (the `GoodsOversell` alert, critical,
/// `source=oversell`) and reconciliation reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_forged_past_the_limit_is_recorded_as_an_oversell_once() {
    const LIMITED: i64 = 5;
    let database = test_support::mysql::fresh_database().await;
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database.clone()));
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let answers = wave(&client, &server.base, drop, 1..=20).await;
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
    let counted =
        || harness::process::metric_sum(&client.http, &server.base, "oversell_events_total");
    assert_eq!(counted().await, 0.0);

    let mut conn = forge_one_more_order(&database, drop, "").await;
    until_counted_once(&counted).await;
    let recon = client.reconciliation(&server.base, drop).await;
    assert_eq!(
        (&recon["oversold"], &recon["soldQuantity"]),
        (&json!(true), &json!(LIMITED + 1)),
        "{recon}"
    );
    // Later passes see it again; it is recorded once.
    tokio::time::sleep(Duration::from_millis(4 * HEAL_MS)).await;
    assert_eq!(counted().await, 1.0, "recorded once per drop");
    let outbox = count(
        &mut conn,
        &format!("SELECT COUNT(*) AS n FROM outbox_events WHERE event_key = 'oversell:{drop}'"),
    )
    .await;
    assert_eq!(outbox, 1);
    // And the event log has it once, as the design document's LimitedDropOversoldEvent.
    let oversold: Vec<serde_json::Value> = client
        .events(&server.base, drop)
        .await
        .into_iter()
        .filter(|e| e["type"] == "goods.drop.oversold")
        .collect();
    assert_eq!(oversold.len(), 1, "{oversold:?}");
    assert_eq!(
        (
            &oversold[0]["data"]["severity"],
            &oversold[0]["data"]["source"]
        ),
        (&json!("critical"), &json!("oversell"))
    );
}

/// A writer outside the service copies one of `drop`'s orders (the first matching `and`, an
/// extra SQL condition) as buyer 999999's; the connection it wrote with.
async fn forge_one_more_order(
    database: &str,
    drop: i64,
    and: &str,
) -> diesel_async::AsyncMysqlConnection {
    use diesel_async::{AsyncConnection as _, SimpleAsyncConnection as _};
    let mut conn = diesel_async::AsyncMysqlConnection::establish(database)
        .await
        .unwrap();
    conn.batch_execute(&format!(
        "INSERT INTO orders (drop_id, product_id, user_id, quantity, status, idempotency_key, \
         created_at, amount_minor, currency, sku) \
         SELECT drop_id, product_id, 999999, 1, 'PENDING', 'forged', created_at, amount_minor, \
         currency, sku FROM orders WHERE drop_id = {drop} {and} LIMIT 1"
    ))
    .await
    .unwrap();
    conn
}

/// Waits (within the healing bound) until `counted` reaches 1.
async fn until_counted_once<F: Future<Output = f64>>(counted: &impl Fn() -> F) {
    let start = Instant::now();
    while counted().await < 1.0 {
        assert!(
            start.elapsed() < HEAL_WITHIN,
            "the oversell was not recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The same forgery in one size of a drop in sizes, while the drop's total stays within its
/// limit: S sells its 3 and M 4 of its 5 (7 of 8), then a forged order takes a 4th S. Healing
/// records the oversell once, naming S with its own limit and units, and reconciliation reports
/// S oversold and M not, though 8 of 8 is no oversell of the total.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_forged_past_a_sizes_limit_is_an_oversell_naming_that_size() {
    let database = test_support::mysql::fresh_database().await;
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database.clone()));
    let server = Server::start(&env(&vars));
    // Buyer u buys S when u is even, M when odd.
    let client = Client::new().in_sizes(&["S", "M"]);
    let drop = client
        .open_sized_drop(&server.base, &[("S", 3), ("M", 5)])
        .await;
    let answers = wave(&client, &server.base, drop, 1..=8).await;
    let sold = |sku: &str| {
        answers
            .iter()
            .filter(|(user, a)| a.status == 202 && client.size_of(**user) == Some(sku))
            .count()
    };
    assert_eq!((sold("S"), sold("M")), (3, 4), "{answers:?}");
    let counted =
        || harness::process::metric_sum(&client.http, &server.base, "oversell_events_total");
    assert_eq!(counted().await, 0.0);

    forge_one_more_order(&database, drop, "AND sku = 'S'").await;
    until_counted_once(&counted).await;
    let recon = client.reconciliation(&server.base, drop).await;
    assert_eq!(
        (
            &recon["oversold"],
            &recon["soldQuantity"],
            &recon["limitedQuantity"]
        ),
        (&json!(true), &json!(8), &json!(8)),
        "{recon}"
    );
    assert_eq!(
        pick(&recon["variants"], &["sku", "soldQuantity", "oversold"]),
        json!([["S", 4, true], ["M", 4, false]])
    );
    tokio::time::sleep(Duration::from_millis(4 * HEAL_MS)).await;
    assert_eq!(counted().await, 1.0, "recorded once per drop");
    let oversold: Vec<serde_json::Value> = client
        .events(&server.base, drop)
        .await
        .into_iter()
        .filter(|e| e["type"] == "goods.drop.oversold")
        .collect();
    assert_eq!(oversold.len(), 1, "{oversold:?}");
    assert_eq!(
        (
            &oversold[0]["data"]["limitedQuantity"],
            &oversold[0]["data"]["soldQuantity"],
            &oversold[0]["data"]["variants"]
        ),
        (
            &json!(8),
            &json!(8),
            &json!([{"sku": "S", "limitedQuantity": 3, "soldQuantity": 4}])
        )
    );
}

/// Gate state that no order explains (a stray write, a restore of Redis from another day): a
/// done marker for an order the database never had, its units held. Drift that held
/// reservations do not explain is resynced within healing passes, and the resync drops the
/// marker instead of keeping it (it existed before the seed was read, so its order would be in
/// the seed); the drop then sells its units exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_done_marker_no_order_explains_is_dropped_by_the_next_resync() {
    const LIMITED: i64 = 10;
    let redis = PrivateRedis::start();
    let vars = on_private_redis(&redis, &[]).await;
    let server = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&server.base, LIMITED).await;
    let mut answers = wave(&client, &server.base, drop, 1..=2).await;
    assert_eq!(answers.values().filter(|a| a.status == 202).count(), 2);
    client.until_healed(&server.base, drop, HEAL_WITHIN).await;

    let key = |suffix: &str| {
        let found = redis
            .cli(&["--scan", "--pattern", &format!("*drop:{{{drop}}}:{suffix}")])
            .unwrap();
        found.lines().next().expect("the drop's key").to_owned()
    };
    let (idem, held, remaining) = (key("idem"), key("held"), key("remaining"));
    redis
        .cli(&["HSET", &idem, "999|ghost", "D|3|424242"])
        .unwrap();
    redis.cli(&["HINCRBY", &held, "999", "3"]).unwrap();
    redis.cli(&["DECRBY", &remaining, "3"]).unwrap();
    let recon = client.reconciliation(&server.base, drop).await;
    assert_eq!(recon["drift"], json!(3), "{recon}");

    client.until_healed(&server.base, drop, HEAL_WITHIN).await;
    let recon = client.reconciliation(&server.base, drop).await;
    assert_eq!(recon["gateRemaining"], json!(LIMITED - 2), "{recon}");
    assert_eq!(
        redis.cli(&["HEXISTS", &idem, "999|ghost"]).unwrap().trim(),
        "0",
        "the unexplained marker is gone"
    );
    answers.extend(wave(&client, &server.base, drop, 3..=20).await);
    assert_sold_out_exactly(&client, &server.base, drop, LIMITED, &answers).await;
}

/// The event ids of `stream` on `url`, in stream order.
async fn stream_ids(url: &str, stream: &str) -> Vec<String> {
    test_support::nats::stored(url, stream)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect()
}

/// Two instances sell one drop (buyers through both) with the broker stalled by SIGSTOP, so
/// every event waits in the log; the instance the buyers used is killed with SIGKILL. Once the
/// broker resumes, the survivor publishes them all: the stream holds exactly the drop's events
/// as `/admin/events` lists them, in `dropseq` order, each id once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_pending_on_a_killed_instance_reach_the_broker_once_and_in_order() {
    const LIMITED: i64 = 40;
    const STREAM: &str = "GOODS_EVENTS_FAULTS";
    let nats = test_support::nats::PrivateNats::start();
    let database = test_support::mysql::fresh_database().await;
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database));
    vars.push(("EVENTS_URL", nats.url()));
    vars.push(("EVENTS_STREAM", STREAM.into()));
    let mut a = Server::start(&env(&vars));
    let b = Server::start(&env(&vars));
    let client = Client::new();
    let drop = client.open_drop(&a.base, LIMITED).await;
    let until = Instant::now() + Duration::from_secs(10);
    while stream_ids(&nats.url(), STREAM).await.is_empty() {
        assert!(
            Instant::now() < until,
            "drop.created never reached the broker"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    nats.pause();
    let started = Instant::now();
    let mut answers = wave(&client, &a.base, drop, 1..=30).await;
    answers.extend(wave(&client, &b.base, drop, 31..=60).await);
    let took = started.elapsed();
    assert_sold_out_exactly(&client, &b.base, drop, LIMITED, &answers).await;
    assert!(
        took < Duration::from_secs(5),
        "60 purchases took {took:?} with the broker stalled"
    );
    a.kill9();
    nats.resume();

    let logged: Vec<String> = client
        .events(&b.base, drop)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    // drop.created, 40 order.placed, drop.sold_out.
    assert_eq!(logged.len(), 42);
    let until = Instant::now() + Duration::from_secs(20);
    let stored = loop {
        let stored = stream_ids(&nats.url(), STREAM).await;
        if stored.len() >= logged.len() || Instant::now() > until {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(stored, logged, "every event once, in commit order");
}

/// A receiver that answers each request after `delay`.
async fn slow_receiver(
    delay: Duration,
) -> (std::net::SocketAddr, test_support::receiver::Received) {
    test_support::receiver::start(test_support::receiver::Behaviour {
        delay,
        ..Default::default()
    })
    .await
}

/// A server on `database` that delivers webhooks to loopback over plain HTTP, a round every
/// 50 ms.
fn delivering(database: &str) -> [(&str, &str); 4] {
    [
        ("DATABASE_URL", database),
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("WEBHOOK_ALLOW_HTTP", "true"),
        ("WEBHOOK_POLL_MS", "50"),
    ]
}

/// The harness seller's endpoint for `address`, created through `base`: its id.
async fn endpoint_for(client: &Client, base: &str, address: std::net::SocketAddr) -> i64 {
    let created = client
        .seller_post(
            base,
            "/webhook-endpoints",
            json!({"url": format!("http://{address}/hooks")}),
        )
        .await;
    created["endpointId"].as_i64().unwrap()
}

/// An endpoint for `address` and a drop of `units` sold out to as many buyers, through `base`:
/// the endpoint's id and the drop's.
async fn sold_out_to_an_endpoint(
    client: &Client,
    base: &str,
    address: std::net::SocketAddr,
    units: i64,
) -> (i64, i64) {
    let endpoint = endpoint_for(client, base, address).await;
    let drop = client.open_drop(base, units).await;
    let sold = wave(client, base, drop, 1..=units).await;
    assert_eq!(
        sold.values().filter(|a| a.status == 202).count(),
        usize::try_from(units).unwrap()
    );
    (endpoint, drop)
}

/// The `webhook-id`s `received` holds, in arrival order.
fn ids_received(received: &test_support::receiver::Received) -> Vec<String> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_owned))
        .collect()
}

/// Waits until `received` holds every one of `events` (at most `within`).
async fn until_every_event_received(
    received: &test_support::receiver::Received,
    events: &[String],
    within: Duration,
) {
    let until = Instant::now() + within;
    loop {
        let got: std::collections::HashSet<String> = ids_received(received).into_iter().collect();
        if events.iter().all(|id| got.contains(id)) {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} of {} events delivered",
            events.iter().filter(|id| got.contains(*id)).count(),
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `endpoint` lists `n` deliveries DELIVERED through `base` (at most `within`).
async fn until_delivered(client: &Client, base: &str, endpoint: i64, n: usize, within: Duration) {
    let until = Instant::now() + within;
    loop {
        let listed = client
            .seller_json(
                base,
                &format!("/webhook-endpoints/{endpoint}/deliveries?status=DELIVERED&limit=100"),
            )
            .await;
        let delivered = listed["items"].as_array().unwrap().len();
        if delivered == n {
            return;
        }
        assert!(
            Instant::now() < until,
            "{delivered} of {n} DELIVERED: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The drop's event ids as `/admin/events` lists them through `base`.
async fn event_ids(client: &Client, base: &str, drop: i64) -> Vec<String> {
    client
        .events(base, drop)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `received` holds `n` requests (20 s).
async fn until_requests(received: &test_support::receiver::Received, n: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    while received.lock().unwrap().len() < n {
        assert!(Instant::now() < until, "fewer than {n} requests arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The instance delivering webhooks is killed (SIGKILL) in the middle of a drop's deliveries
/// to a slow receiver, and started again on the same database: every event of the drop reaches
/// the receiver (some perhaps twice: at least once), and every delivery ends DELIVERED.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_delivering_instance_killed_mid_batch_loses_no_webhook() {
    let database = test_support::mysql::fresh_database().await;
    let (address, received) = slow_receiver(Duration::from_millis(100)).await;
    let mut server = Server::start(&delivering(&database));
    let client = Client::new();
    let (endpoint, drop) = sold_out_to_an_endpoint(&client, &server.base, address, 20).await;
    // 22 events (created, 20 placed, sold out), one request every 100 ms: kill mid-way.
    until_requests(&received, 5).await;
    server.kill9();
    let at_kill = received.lock().unwrap().len();
    assert!(
        at_kill < 22,
        "the kill came after the last delivery ({at_kill})"
    );
    server.restart();
    let events = event_ids(&client, &server.base, drop).await;
    assert_eq!(events.len(), 22, "{events:?}");
    until_every_event_received(&received, &events, Duration::from_secs(30)).await;
    until_delivered(&client, &server.base, endpoint, 22, Duration::from_secs(10)).await;
    eprintln!(
        "{at_kill} delivered before the kill, {} requests in all for 22 events",
        received.lock().unwrap().len()
    );
}

/// The instance delivering webhooks is paused (SIGSTOP) in the middle of a drop's deliveries to
/// a slow receiver, with a second instance beside it: the second takes the `webhooks` lease over
/// and delivers every event. Resumed (SIGCONT), the paused one finds its attempt recorded by the
/// other and sends none of the rest of its round again: every event arrives, and at most the one
/// request in flight at the pause (an endpoint gets one at a time) arrives twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_delivering_instance_paused_mid_batch_hands_its_deliveries_over() {
    const EVENTS: usize = 32; // created, 30 placed, sold out
    let database = test_support::mysql::fresh_database().await;
    let (address, received) = slow_receiver(Duration::from_millis(200)).await;
    let first = Server::start(&delivering(&database));
    let client = Client::new();
    let (endpoint, drop) = sold_out_to_an_endpoint(&client, &first.base, address, 30).await;
    // The first instance, alone, holds the lease and delivers; the second stands by.
    until_requests(&received, 2).await;
    let second = Server::start(&delivering(&database));
    test_support::pause(&first.child);
    let at_pause = received.lock().unwrap().len();
    assert!(
        at_pause < EVENTS,
        "the pause came after the last delivery ({at_pause})"
    );
    let events = event_ids(&client, &second.base, drop).await;
    assert_eq!(events.len(), EVENTS, "{events:?}");
    until_delivered(
        &client,
        &second.base,
        endpoint,
        EVENTS,
        Duration::from_secs(30),
    )
    .await;
    until_every_event_received(&received, &events, Duration::from_secs(5)).await;
    test_support::resume(&first.child);
    // Resumed, the first answers again, and a drop it creates is delivered (by the lease's
    // holder); then it has had 2 s more to send anything it still held.
    let next = client.open_drop(&first.base, 1).await;
    let next_created = event_ids(&client, &first.base, next).await.remove(0);
    until_every_event_received(
        &received,
        std::slice::from_ref(&next_created),
        Duration::from_secs(20),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got: Vec<String> = ids_received(&received)
        .into_iter()
        .filter(|id| *id != next_created)
        .collect();
    assert!(
        got.len() <= EVENTS + 1,
        "{} requests for {EVENTS} events: the resumed instance sent what the other had delivered",
        got.len()
    );
    eprintln!(
        "{at_pause} requests before the pause, {} in all for {EVENTS} events",
        got.len()
    );
}

/// Sessions of `database` whose purchase has waited 100 ms or more to write its events (the
/// statement takes well under a millisecond when nothing holds its lock).
async fn purchases_waiting(conn: &mut diesel_async::AsyncMysqlConnection, database: &str) -> i64 {
    let name = database.rsplit('/').next().unwrap();
    count(
        conn,
        &format!(
            "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST \
             WHERE DB = '{name}' AND INFO LIKE 'INSERT INTO event_batches%' AND TIME_MS >= 100"
        ),
    )
    .await
}

/// An instance paused (SIGSTOP) inside a purchase transaction, after its update of the drop's
/// row, holds that row's lock on a connection that stays up. MariaDB rolls the idle transaction
/// back after the first instance's transaction limit (`idle_transaction_timeout`), so a buyer of
/// the same drop through a second instance waits for it (at least a second) and then gets a 202,
/// instead of waiting out its own lock timeout. Resumed, the first instance finds its COMMIT
/// refused and answers its buyer 503, never a 202 for an order that does not exist; the buyer's
/// retry with the same key gets the order. The pause lands inside the transaction by design: a
/// transaction of the test holds the end of `event_batches` (a gap lock), so the purchase waits
/// at its last statement, after the drop's row, until the instance is paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_paused_inside_a_purchase_transaction_holds_the_drop_for_its_limit_only() {
    use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
    let database = test_support::mysql::fresh_database().await;
    // The first instance's transactions end within 2 s (so does its idle one); the second's
    // bound is long enough that its wait ends by the rollback, not by its own limit.
    let first = Server::start(&[
        ("GATE", "off"),
        ("DATABASE_URL", &database),
        ("DB_TX_TIMEOUT_MS", "2000"),
        ("RESERVATION_LEASE_MS", "5000"),
    ]);
    let second = Server::start(&[
        ("GATE", "off"),
        ("DATABASE_URL", &database),
        ("DB_TX_TIMEOUT_MS", "8000"),
        ("DB_WRITE_WAIT_MS", "8000"),
        ("RESERVATION_LEASE_MS", "20000"),
    ]);
    let client = Client::new();
    let drop = client.open_drop(&first.base, 10).await;
    let mut conn = AsyncMysqlConnection::establish(&database).await.unwrap();
    let mut holder = AsyncMysqlConnection::establish(&database).await.unwrap();
    let last = count(
        &mut conn,
        "SELECT COALESCE(MAX(id), 0) AS n FROM event_batches",
    )
    .await;
    holder
        .batch_execute(&format!(
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; BEGIN; \
             SELECT id FROM event_batches WHERE id > {last} FOR UPDATE"
        ))
        .await
        .unwrap();
    let buying = tokio::spawn({
        let (client, base) = (client.clone(), first.base.clone());
        async move { client.buy(&base, drop, 1).await }
    });
    let start = Instant::now();
    while purchases_waiting(&mut conn, &database).await == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the purchase never waited for the event log"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    test_support::pause(&first.child);
    holder.batch_execute("ROLLBACK").await.unwrap();
    // The paused instance's transaction has taken the drop's row and committed nothing.
    let sold = format!("SELECT sold_quantity AS n FROM limited_drops WHERE id = {drop}");
    assert_eq!(count(&mut conn, &sold).await, 0, "nothing committed yet");

    let asked = Instant::now();
    let second_buyer = client.buy(&second.base, drop, 2).await.unwrap();
    let waited = asked.elapsed();
    assert_eq!(
        (second_buyer.status, second_buyer.code.as_deref()),
        (202, None),
        "{second_buyer:?} after {waited:?}"
    );
    assert!(
        waited >= Duration::from_secs(1),
        "the second buyer did not wait for the paused transaction ({waited:?}): it held no lock"
    );
    test_support::resume(&first.child);
    let first_buyer = buying.await.unwrap().unwrap();
    assert_eq!(
        (first_buyer.status, first_buyer.code.as_deref()),
        (503, Some("SERVICE_UNAVAILABLE")),
        "{first_buyer:?}"
    );
    let orders_of = |user: i64| format!("SELECT COUNT(*) AS n FROM orders WHERE user_id = {user}");
    assert_eq!(count(&mut conn, &orders_of(1)).await, 0, "rolled back");
    let retried = client.buy(&first.base, drop, 1).await.unwrap();
    assert_eq!((retried.status, retried.code.as_deref()), (202, None));
    assert_eq!(count(&mut conn, &orders_of(1)).await, 1);
    assert_eq!(count(&mut conn, &orders_of(2)).await, 1);
    assert_eq!(count(&mut conn, &sold).await, 2);
    let placed: Vec<i64> = client
        .events(&second.base, drop)
        .await
        .iter()
        .filter(|e| e["type"] == "goods.order.placed")
        .map(|e| e["data"]["userId"].as_i64().unwrap())
        .collect();
    assert_eq!(placed.len(), 2, "one event per order: {placed:?}");
    eprintln!("the second buyer waited {waited:?} for the paused transaction");
}
