//! A fleet of three instances behind HAProxy, sharing MariaDB and Redis: a drop sells out
//! exactly through the balancer, every instance serves, and an instance killed with SIGKILL
//! mid-sale (and never restarted) leaves no unit held and no 202 lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::future::join_all;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod support;

use support::fleet::{Fleet, INSTANCES};
use support::harness;
use support::harness::{
    Answer, Answers, Client, Failure, assert_sold_out_exactly, env, fresh_prefix, shared_redis,
};

const LIMITED: i64 = 150;
const BUYERS: i64 = 600;

/// A migrated MariaDB database and Redis keys of its own, as the fleet's environment.
async fn fleet_env() -> Vec<(&'static str, String)> {
    fleet_env_with(&[]).await
}

async fn fleet_env_with(extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let database = test_support::mysql::fresh_database().await;
    goods_server::startup::migrate(
        &goods_server::config::Database::Mysql(database.clone().into()),
        &goods_server::config::MysqlTls::default(),
        None,
    )
    .await
    .unwrap();
    let mut vars = shared_redis(&fresh_prefix()).to_vec();
    vars.push(("DATABASE_URL", database));
    vars.push(("DATABASE_MIGRATE", "false".into()));
    for (k, v) in extra {
        vars.push((*k, (*v).to_owned()));
    }
    vars
}

/// A buyer's purchase, retried with the same key until it has a final answer (202 or
/// SOLD_OUT): a connection cut by a dying instance, the balancer's 502/503, the service's 503 or
/// 429, or a key still in progress on a dead instance are retried, as a real client would. A 500,
/// a hang or any other answer fails the test: a crash must not read as a retry that succeeded.
async fn buy_until_final(client: &Client, base: &str, drop: i64, user: i64) -> (Answer, usize) {
    let start = Instant::now();
    let mut retries = 0;
    loop {
        match client.buy(base, drop, user).await {
            Ok(answer) if answer.status == 202 || answer.is("SOLD_OUT") => {
                return (answer, retries);
            }
            Ok(answer) => assert!(
                answer.is("SERVICE_UNAVAILABLE")
                    || answer.is("IDEMPOTENCY_KEY_IN_PROGRESS")
                    || answer.is("THROTTLED"),
                "buyer {user}: unexpected {answer:?}"
            ),
            Err(Failure::Transport(_) | Failure::NotJson(502 | 503)) => {}
            Err(failure) => panic!("buyer {user}: {failure:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "buyer {user} has no final answer after 60 s"
        );
        retries += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A stub server answering each connection with the next of `answers` (status, JSON body),
/// the last one forever; its base URL.
async fn stub(answers: &'static [(u16, &'static str)]) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        for n in 0.. {
            let (mut socket, _) = listener.accept().await.unwrap();
            let (status, body) = answers[n.min(answers.len() - 1)];
            let mut request = [0_u8; 4096];
            let _ = socket.read(&mut request).await;
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/problem+json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    base
}

/// The retry helper itself: a 503 is retried until the 202 ...
#[tokio::test]
async fn the_retry_helper_retries_a_503_until_the_final_answer() {
    let base = stub(&[
        (503, r#"{"code":"SERVICE_UNAVAILABLE"}"#),
        (202, r#"{"orderId":7,"status":"PENDING"}"#),
    ])
    .await;
    let (answer, retries) = buy_until_final(&Client::new(), &base, 1, 1).await;
    assert_eq!((answer.status, answer.order, retries), (202, Some(7), 1));
}

/// ... and a 500 fails the test at once: a crash never reads as a retry that succeeded.
#[tokio::test]
#[should_panic(expected = "buyer 1: unexpected")]
async fn the_retry_helper_fails_on_a_500_instead_of_retrying() {
    let base = stub(&[
        (500, r#"{"code":"INTERNAL"}"#),
        (202, r#"{"orderId":7,"status":"PENDING"}"#),
    ])
    .await;
    buy_until_final(&Client::new(), &base, 1, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_behind_the_balancer_sell_a_drop_exactly() {
    let vars = fleet_env().await;
    let fleet = Fleet::start(&env(&vars)).await;
    let client = Client::new();
    let drop = client.open_drop(&fleet.base, LIMITED).await;

    let tries = (1..=BUYERS).map(|user| {
        let (client, base) = (client.clone(), fleet.base.clone());
        tokio::spawn(async move { (user, client.buy(&base, drop, user).await) })
    });
    let mut answers = Answers::new();
    for result in join_all(tries).await {
        let (user, answer) = result.unwrap();
        let answer = answer.unwrap_or_else(|failure| panic!("buyer {user}: {failure:?}"));
        assert!(
            answer.status == 202 || answer.is("SOLD_OUT"),
            "buyer {user}: {answer:?} (no 5xx, no other refusal)"
        );
        answers.insert(user, answer);
    }
    assert_sold_out_exactly(&client, &fleet.base, drop, LIMITED, &answers).await;
    let stats = client
        .seller_json(&fleet.base, &format!("/limited-drops/{drop}/stats"))
        .await;
    assert_eq!(
        (stats["successCount"].clone(), stats["soldQuantity"].clone()),
        (json!(LIMITED), json!(LIMITED)),
        "{stats}"
    );
    let mut served = Vec::new();
    for i in 0..INSTANCES {
        served.push(fleet.purchases_served(&client.http, i).await);
    }
    eprintln!("purchases answered per instance: {served:?}");
    assert!(
        served.iter().all(|n| *n > 0.0),
        "every instance served purchases: {served:?}"
    );
    assert_eq!(
        served.iter().sum::<f64>(),
        f64::from(i32::try_from(BUYERS).unwrap()),
        "the instances answered every buyer once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_killed_mid_sale_is_not_needed_to_finish_the_sale_exactly() {
    let vars = fleet_env().await;
    let mut fleet = Fleet::start(&env(&vars)).await;
    let client = Client::new();
    let drop = client.open_drop(&fleet.base, LIMITED).await;

    let won = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let tries = (1..=BUYERS).map(|user| {
        let (client, base) = (client.clone(), fleet.base.clone());
        let (won, enough) = (Arc::clone(&won), Arc::clone(&enough));
        tokio::spawn(async move {
            let (answer, retries) = buy_until_final(&client, &base, drop, user).await;
            if answer.status == 202 && won.fetch_add(1, Ordering::SeqCst) + 1 == 40 {
                enough.notify_one();
            }
            (user, answer, retries)
        })
    });
    let all = tokio::spawn(join_all(tries));
    enough.notified().await;
    fleet.servers[0].kill9();
    let killed_at = Instant::now();

    let mut answers = Answers::new();
    let mut retried = 0;
    for result in all.await.unwrap() {
        let (user, answer, retries) = result.unwrap();
        retried += usize::from(retries > 0);
        answers.insert(user, answer);
    }
    eprintln!(
        "killed instance 1 after 40 sales; {retried} buyers retried; sale ended {:?} after the kill",
        killed_at.elapsed()
    );
    // The units the dead instance held heal (lease, then the healing pass), and the drop
    // sells out exactly among the buyers who kept trying.
    client
        .until_healed(&fleet.base, drop, Duration::from_secs(15))
        .await;
    assert_sold_out_exactly(&client, &fleet.base, drop, LIMITED, &answers).await;
    let winners: HashMap<i64, i64> = answers
        .iter()
        .filter(|(_, a)| a.status == 202)
        .map(|(user, a)| (*user, a.order.unwrap()))
        .collect();
    // No 202 is lost: a winner asking again gets the same order from the survivors.
    for (user, order) in winners.iter().take(20) {
        let again = client.buy(&fleet.base, drop, *user).await.unwrap();
        assert_eq!((again.status, again.order), (202, Some(*order)));
    }
}

/// Which instances hold the background lease now, by their `background_leader` gauge.
async fn leaders(client: &Client, fleet: &Fleet, alive: &[usize]) -> Vec<usize> {
    let mut found = Vec::new();
    for &i in alive {
        let text = fleet.metrics(&client.http, i).await;
        if text.lines().any(|l| l == "background_leader 1") {
            found.push(i);
        }
    }
    found
}

/// One instance runs the background work (healing, reconciliation, expiry); when it dies,
/// another takes the lease within two healing intervals.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_background_work_moves_within_two_intervals_when_its_leader_dies() {
    let vars = fleet_env().await;
    let mut fleet = Fleet::start(&env(&vars)).await;
    let client = Client::new();
    let interval = Duration::from_millis(harness::HEAL_MS);
    let mut alive: Vec<usize> = (0..INSTANCES).collect();
    let start = Instant::now();
    let leader = loop {
        let now = leaders(&client, &fleet, &alive).await;
        assert!(now.len() <= 1, "two leaders at once: {now:?}");
        if let [one] = now[..] {
            break one;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "nobody leads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    fleet.servers[leader].kill9();
    let killed = Instant::now();
    alive.retain(|i| *i != leader);
    let successor = loop {
        let now = leaders(&client, &fleet, &alive).await;
        assert!(now.len() <= 1, "two leaders at once: {now:?}");
        if let [one] = now[..] {
            break one;
        }
        assert!(
            killed.elapsed() < interval * 2,
            "no instance took the background work over within two intervals"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    eprintln!(
        "instance {} took over from instance {} {:?} after the kill (interval {interval:?})",
        successor + 1,
        leader + 1,
        killed.elapsed()
    );
    // And it keeps it: still one leader a few intervals later.
    tokio::time::sleep(interval * 3).await;
    assert_eq!(leaders(&client, &fleet, &alive).await, vec![successor]);
}

/// With `DB_WRITE_PERMITS_GLOBAL=8`, three instances each allowed 64 writes and 16 transactions
/// per drop at once, and four drops on sale at once, the fleet never holds more than 8 purchase
/// transactions: the budget's own record of the most permits ever held (kept by the permit
/// script in Redis) is exactly 8. Every drop still sells out exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_global_budget_bounds_the_fleets_purchase_transactions() {
    const DROPS: i64 = 4;
    const PER_DROP: i64 = 100;
    let vars = fleet_env_with(&[
        ("DB_WRITE_PERMITS_GLOBAL", "8"),
        ("DB_WRITE_PERMITS", "64"),
        ("GROUP_COMMIT_MAX_BATCH", "1"),
        ("GROUP_COMMIT_IN_FLIGHT", "16"),
        ("DATABASE_POOL_SIZE", "32"),
    ])
    .await;
    let prefix = vars
        .iter()
        .find(|(k, _)| *k == "REDIS_KEY_PREFIX")
        .map(|(_, v)| v.clone())
        .unwrap();
    let fleet = Fleet::start(&env(&vars)).await;
    let client = Client::new();
    let mut drops = Vec::new();
    for _ in 0..DROPS {
        drops.push(client.open_drop(&fleet.base, PER_DROP).await);
    }
    let tries = (0..PER_DROP * DROPS * 2).map(|i| {
        let (client, base) = (client.clone(), fleet.base.clone());
        let drop = drops[usize::try_from(i % DROPS).unwrap()];
        let user = 1 + i;
        tokio::spawn(async move { (drop, buy_until_final(&client, &base, drop, user).await.0) })
    });
    let mut sold: HashMap<i64, i64> = HashMap::new();
    for result in join_all(tries).await {
        let (drop, answer) = result.unwrap();
        if answer.status == 202 {
            *sold.entry(drop).or_default() += 1;
        }
    }
    for drop in &drops {
        assert_eq!(sold.get(drop), Some(&PER_DROP), "drop {drop} sold exactly");
        let recon = client.reconciliation(&fleet.base, *drop).await;
        assert_eq!(recon["soldQuantity"], json!(PER_DROP), "{recon}");
    }
    let redis_url = test_support::redis::server_url();
    let peak = std::process::Command::new("redis-cli")
        .args([
            "-u",
            &redis_url,
            "GET",
            &format!("{prefix}{{db}}:permits:peak"),
        ])
        .output()
        .unwrap();
    let peak: u32 = String::from_utf8_lossy(&peak.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    eprintln!("the most purchase transactions the fleet held at once: {peak}");
    assert_eq!(peak, 8, "the budget was reached and never exceeded");
}

/// Every instance has raised its sold-out flag (answers SOLD_OUT without asking Redis); a cancel
/// made through the first brings the flags down by the gate's restock message, so another
/// instance sells the returned unit within a second, well before the flags' own two-second
/// expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_on_one_instance_lets_another_sell_the_unit_within_a_second() {
    let vars = fleet_env().await;
    let fleet = Fleet::start(&env(&vars)).await;
    let client = Client::new();
    let drop = client.open_drop(&fleet.base, 1).await;
    let winner = client.buy(&fleet.servers[0].base, drop, 1).await.unwrap();
    assert_eq!(winner.status, 202);
    // Each instance hears SOLD_OUT from Redis once, then keeps the flag: seen raised in its
    // own counter.
    let flag = |i: usize, change: &'static str| {
        let (fleet, http) = (&fleet, &client.http);
        async move {
            let text = fleet.metrics(http, i).await;
            let series = format!("gate_sold_out_flag_changes_total{{change=\"{change}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(series.as_str())?.parse::<f64>().ok())
                .unwrap_or(0.0)
        }
    };
    for (i, server) in fleet.servers.iter().enumerate() {
        let mut attempt = 0;
        while flag(i, "raised").await < 1.0 {
            let user = 100 + i64::try_from(i * 1000 + attempt).unwrap();
            let answer = client.buy(&server.base, drop, user).await.unwrap();
            assert!(answer.is("SOLD_OUT"), "{answer:?}");
            attempt += 1;
            assert!(attempt < 100, "instance {i} never raised its sold-out flag");
        }
    }
    let cancelled = client
        .http
        .post(format!(
            "{}/orders/{}/cancel",
            fleet.servers[0].base,
            winner.order.unwrap()
        ))
        .header("Authorization", harness::bearer(1, "buyer"))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    let at = Instant::now();
    // The other instances take turns until one of them sells the unit.
    let mut admitted = false;
    while !admitted {
        for server in &fleet.servers[1..] {
            let user = 1000 + i64::try_from(at.elapsed().as_millis()).unwrap();
            let answer = client.buy(&server.base, drop, user).await.unwrap();
            if answer.status == 202 {
                admitted = true;
                break;
            }
            assert!(answer.is("SOLD_OUT"), "{answer:?}");
        }
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "no other instance sold the returned unit within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "the returned unit was sold through another instance {:?} after the cancel",
        at.elapsed()
    );
    // The restock brought the raised flags down before their expiry, on the other instances.
    for i in 1..fleet.servers.len() {
        assert!(
            flag(i, "lowered").await >= 1.0,
            "instance {i}'s flag was not brought down by the restock"
        );
    }
}

/// The edge as deployed: in trusted-header mode, identity headers a client forges through the
/// balancer are dropped there (the same headers sent to an instance directly would count),
/// `/metrics` is not served through it, and a client that sends its request head slowly is cut
/// after HAProxy's `timeout http-request` (5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_edge_drops_forged_identity_hides_metrics_and_cuts_slow_requests() {
    use std::io::{Read as _, Write as _};
    let vars = fleet_env_with(&[("AUTH_MODE", "trusted-header")]).await;
    let fleet = Fleet::start(&env(&vars)).await;
    let http = reqwest::Client::new();
    let forged = |base: &str| {
        http.get(format!("{base}/admin/flags"))
            .header("X-User-Id", "1")
            .header("X-User-Role", "admin")
            .send()
    };
    let through = forged(&fleet.base).await.unwrap();
    assert_eq!(through.status(), 401, "a forged admin through the balancer");
    let body: serde_json::Value = through.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHENTICATED");
    let direct = forged(&fleet.servers[0].base).await.unwrap();
    assert_eq!(
        direct.status(),
        200,
        "the same headers from a trusted peer count"
    );

    let metrics = http
        .get(format!("{}/metrics", fleet.base))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 404);
    assert_eq!(
        metrics.headers()["content-type"],
        "application/problem+json"
    );
    assert!(
        fleet
            .metrics(&http, 0)
            .await
            .contains("http_requests_total"),
        "the instance's ops listener has them"
    );

    let mut slow = std::net::TcpStream::connect(fleet.base.trim_start_matches("http://")).unwrap();
    slow.write_all(b"GET /health/live HTTP/1.1\r\nHost: goods\r\n")
        .unwrap();
    let sent = Instant::now();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    let after = sent.elapsed();
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "{answer:?} after {after:?}"
    );
    assert!(
        after >= Duration::from_millis(4500) && after < Duration::from_secs(8),
        "cut after {after:?}"
    );
}

/// The balancer's first line of defence (`GOODS_LB_RATE_10S`): one address past its requests in
/// 10 s is answered 429 `RATE_LIMITED` by HAProxy itself, with `Retry-After`, and no instance
/// sees the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_balancer_refuses_an_address_past_its_rate_without_asking_an_instance() {
    let vars = fleet_env().await;
    let fleet = Fleet::start_with_edge_limit(&env(&vars), 30).await;
    let http = reqwest::Client::new();
    // The balancer's own readiness polls counted too: 30 in all pass, whoever sent them.
    let mut passed = 0;
    let refused = loop {
        let res = http
            .get(format!("{}/health/live", fleet.base))
            .send()
            .await
            .unwrap();
        if res.status() != 200 {
            break res;
        }
        passed += 1;
        assert!(passed <= 30, "the balancer never refused");
    };
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "10");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "RATE_LIMITED");
    let served = || async {
        let mut text = String::new();
        for i in 0..3 {
            text.push_str(&fleet.metrics(&http, i).await);
        }
        text
    };
    let before = served().await;
    for _ in 0..20 {
        let res = http
            .get(format!("{}/health/live", fleet.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
    }
    let count = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("http_requests_total") && l.contains("/health/live"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert!(
        count(&before) > 0.0,
        "the instances' own count was not found"
    );
    assert_eq!(
        count(&served().await),
        count(&before),
        "no refused request reached an instance"
    );
}

/// Anonymous views from four clients behind the shipped balancer, each below the per-address
/// rate and all four together far above it: the instances count each client (the balancer's
/// `X-Forwarded-For`, trusted through `AUTH_TRUSTED_PROXIES` as the shipped compose and k8s
/// files set it) and never the balancer's health checks, so no view is refused and every
/// instance serves to the end. With the balancer untrusted, every client is the balancer's one
/// address, past its bucket within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn anonymous_views_from_several_clients_below_the_rate_are_never_refused() {
    const CLIENTS: u8 = 4;
    const VIEWS: usize = 500;
    let vars = fleet_env_with(&[("RATE_LIMIT_PER_IP", "100/s")]).await;
    let fleet = Fleet::start(&env(&vars)).await;
    let drop = Client::new().open_drop(&fleet.base, 10).await;
    let url = format!("{}/limited-drops/{drop}", fleet.base);
    let clients = (0..CLIENTS).map(|i| {
        let url = url.clone();
        tokio::spawn(async move {
            // Each client from an address of its own, at about 250 views a second.
            let http = reqwest::Client::builder()
                .local_address(std::net::IpAddr::from([127, 0, 0, 2 + i]))
                .build()
                .unwrap();
            let mut pace = tokio::time::interval(Duration::from_millis(4));
            let mut statuses: HashMap<u16, usize> = HashMap::new();
            for _ in 0..VIEWS {
                pace.tick().await;
                let status = http
                    .get(&url)
                    .send()
                    .await
                    .map_or(0, |r| r.status().as_u16());
                *statuses.entry(status).or_default() += 1;
            }
            statuses
        })
    });
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    for client in join_all(clients).await {
        for (status, n) in client.unwrap() {
            *statuses.entry(status).or_default() += n;
        }
    }
    assert_eq!(
        statuses,
        HashMap::from([(200, usize::from(CLIENTS) * VIEWS)]),
        "every view served"
    );
    // Round robin: each instance answered about a third of the views (the balancer's health
    // checks aside, which are not views).
    let http = reqwest::Client::new();
    let mut served = Vec::new();
    for i in 0..INSTANCES {
        let views: f64 = fleet
            .metrics(&http, i)
            .await
            .lines()
            .filter(|l| l.starts_with("http_requests_total{"))
            .filter(|l| l.contains("route=\"/limited-drops/{dropId}\"") && l.contains("GET"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        served.push(views);
    }
    assert_eq!(
        served.iter().sum::<f64>(),
        f64::from(CLIENTS) * VIEWS as f64,
        "{served:?}"
    );
    assert!(served.iter().all(|v| *v > 500.0), "{served:?}");
}
