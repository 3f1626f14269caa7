//! Draw entries over HTTP, open loop: new buyers enter a draw drop at `RATE` per second for
//! `SECONDS`, each request started on schedule whether the ones before it were answered or not
//! (at most `IN_FLIGHT` at once; a generator that falls behind its schedule says so). It creates
//! the product and the draw drop (entries open at once, closing an hour later) and reports:
//!
//! - the rate reached (answered entries per second over the run) and how far behind schedule the
//!   last request started;
//! - p50/p95/p99 of the accepted entries (202);
//! - the checks that make the run able to fail: every request answered 202 (each is a new
//!   buyer: a 200 would be an entry recorded twice, anything else a lost one), and the drop's
//!   `entryCount` equals the client's count of 202s. Exit status 1 when any check fails.
//!
//! `BASE=http://127.0.0.1:18080 RATE=10000 SECONDS=10 cargo run --release -p goods-bench --bin http_entries`
//! (loadtest/entries-spike.sh starts the server and runs it). The server must trust identity
//! headers (`AUTH_MODE=trusted-header`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use goods_bench::http::{env, finish, open_drop, other_answer, quantile, rfc3339, seller};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Seen {
    accepted: Vec<Duration>,
    other: BTreeMap<String, u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base: String = env("BASE", "http://127.0.0.1:18080".to_owned());
    let rate: u64 = env("RATE", 10_000);
    let seconds: u64 = env("SECONDS", 10);
    let in_flight: usize = env("IN_FLIGHT", 512);
    let limited: i64 = env("LIMITED", 1_000);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(in_flight)
        .timeout(Duration::from_secs(30))
        .build()?;
    let now = time::OffsetDateTime::now_utc();
    let entry_close = rfc3339(now + time::Duration::hours(1))?;
    let drop_id = open_drop(
        &client,
        &base,
        limited,
        now - time::Duration::seconds(1),
        serde_json::json!({"mode": "DRAW", "entryCloseAt": entry_close}),
    )
    .await?;
    let url = Arc::new(format!("{base}/limited-drops/{drop_id}/entries"));

    let total = rate * seconds;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let slots = Arc::new(tokio::sync::Semaphore::new(in_flight));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let started = Instant::now();
    let mut behind = Duration::ZERO;
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..total {
        let due = started + interval.mul_f64(n as f64);
        tokio::time::sleep_until(due.into()).await;
        let permit = Arc::clone(&slots).acquire_owned().await?;
        behind = behind.max(Instant::now().saturating_duration_since(due));
        let (client, url, seen) = (client.clone(), Arc::clone(&url), Arc::clone(&seen));
        tasks.spawn(async move {
            let user = 1_000_000 + n;
            let sent = Instant::now();
            let answer = client
                .post(url.as_str())
                .header("X-User-Id", user.to_string())
                .send()
                .await;
            let took = sent.elapsed();
            let (status, body) = match answer {
                Ok(answer) => {
                    let status = answer.status().as_u16();
                    (status, answer.text().await.unwrap_or_default())
                }
                Err(error) => (0, error.to_string()),
            };
            std::mem::drop(permit);
            let mut seen = seen.lock().unwrap();
            if status == 202 {
                seen.accepted.push(took);
            } else {
                *seen
                    .other
                    .entry(other_answer(status, body.as_ref()))
                    .or_default() += 1;
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let wall = started.elapsed();
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    seen.accepted.sort_unstable();
    let accepted = seen.accepted.len() as u64;
    let view = seller(&client, &base, &format!("/limited-drops/{drop_id}"), None).await?;
    let counted = view["entryCount"].as_u64().unwrap_or(0);
    println!(
        "http_entries rate_target={rate} seconds={seconds} sent={total} accepted={accepted} entry_count={counted} \
         wall_s={:.3} entries_per_s={:.0} behind_ms={:.1} \
         accepted_p50_ms={:.1} accepted_p95_ms={:.1} accepted_p99_ms={:.1} other={:?}",
        wall.as_secs_f64(),
        accepted as f64 / wall.as_secs_f64(),
        behind.as_secs_f64() * 1e3,
        quantile(&seen.accepted, 0.5),
        quantile(&seen.accepted, 0.95),
        quantile(&seen.accepted, 0.99),
        seen.other,
    );
    let mut failed = Vec::new();
    if accepted != total {
        failed.push(format!(
            "{} of {total} new buyers were not answered 202: {:?}",
            total - accepted,
            seen.other
        ));
    }
    if counted != accepted {
        failed.push(format!(
            "the drop counts {counted} entries, the client {accepted} 202s"
        ));
    }
    finish(&failed)
}
