//! A drop sold out over HTTP, closed loop: `CONNECTIONS` buyers post purchases back to back,
//! every request a new buyer with a new key, until each has been told SOLD_OUT. It creates the
//! product and the drop (`LIMITED` units, one per buyer, opening two seconds later), waits for
//! the opening, and reports:
//!
//! - orders per second from the first admitted purchase's answer to the last one's;
//! - p50/p95/p99 of the admitted purchases (202) alone, and of the refusals;
//! - the checks that make the run able to fail: the client's count of 202s equals the
//!   database's `soldQuantity`, the stats' `successCount` and `LIMITED` (buyers outnumber
//!   units, so the drop must sell out exactly); no answer other than 202 and 409 SOLD_OUT;
//!   reconciliation finds no oversell. Exit status 1 when any check fails.
//!
//! With `SIZES=n` (n > 0) the drop sells `n` sizes of `LIMITED / n` units each (a product in
//! `n` variants): each buyer picks a size still selling (by its number), and stops once told
//! SOLD_OUT for every size; the checks hold for each size too (its units sold, as
//! reconciliation's `variants` say, equal its `limitedQuantity`, and the client's 202s per size
//! equal them).
//!
//! `BASE=http://127.0.0.1:18080 LIMITED=20000 CONNECTIONS=64 cargo run --release -p goods-bench --bin http_sellout`
//! (loadtest/sellout-vs-raw.sh starts the server and runs it next to the raw ceiling). The
//! server must trust identity headers (`AUTH_MODE=trusted-header`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use goods_bench::http::{env, finish, open_drop, other_answer, quantile, seller};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// The sizes on sale (none for a drop without sizes) and which are known sold out.
struct Sizes {
    skus: Vec<String>,
    sold_out: Vec<std::sync::atomic::AtomicBool>,
}

impl Sizes {
    fn new(n: usize) -> Self {
        Self {
            skus: (1..=n).map(|i| format!("S-{i}")).collect(),
            sold_out: (0..n)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
        }
    }

    /// The size buyer `user` asks for: the first still selling from `user`'s own; `None` for a
    /// drop without sizes; `Some(None)` once every size is sold out.
    fn pick(&self, user: i64) -> Option<Option<usize>> {
        if self.skus.is_empty() {
            return None;
        }
        let n = self.skus.len();
        let from = usize::try_from(user).unwrap_or(0) % n;
        Some(
            (0..n)
                .map(|i| (from + i) % n)
                .find(|i| !self.sold_out[*i].load(Ordering::Relaxed)),
        )
    }
}

#[derive(Default)]
struct Seen {
    accepted: Vec<(Instant, Duration)>,
    /// 202s per size (by index).
    accepted_by_size: BTreeMap<usize, i64>,
    refused: Vec<Duration>,
    /// Anything else, by status and code.
    other: BTreeMap<String, u64>,
}

async fn buyer(
    client: reqwest::Client,
    url: String,
    next_user: Arc<AtomicI64>,
    run: String,
    sizes: Arc<Sizes>,
) -> Seen {
    let mut seen = Seen::default();
    loop {
        let user = next_user.fetch_add(1, Ordering::Relaxed);
        let (size, body) = match sizes.pick(user) {
            None => (None, r#"{"quantity":1}"#.to_owned()),
            Some(None) => return seen,
            Some(Some(i)) => (
                Some(i),
                format!(r#"{{"quantity":1,"sku":"{}"}}"#, sizes.skus[i]),
            ),
        };
        let started = Instant::now();
        let answer = client
            .post(&url)
            .header("X-User-Id", user.to_string())
            .header("Idempotency-Key", format!("{run}-{user}"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await;
        let (status, body) = match answer {
            Ok(answer) => {
                let status = answer.status().as_u16();
                (status, answer.text().await.unwrap_or_default())
            }
            Err(error) => (0, error.to_string()),
        };
        let took = started.elapsed();
        match status {
            202 => {
                seen.accepted.push((Instant::now(), took));
                if let Some(i) = size {
                    *seen.accepted_by_size.entry(i).or_default() += 1;
                }
            }
            409 if body.contains("\"SOLD_OUT\"") => {
                seen.refused.push(took);
                match size {
                    None => return seen,
                    Some(i) => sizes.sold_out[i].store(true, Ordering::Relaxed),
                }
            }
            _ => {
                *seen
                    .other
                    .entry(other_answer(status, body.as_ref()))
                    .or_default() += 1;
                if seen.other.values().sum::<u64>() > 1000 {
                    return seen;
                }
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base: String = env("BASE", "http://127.0.0.1:18080".to_owned());
    let limited: i64 = env("LIMITED", 20_000);
    let connections: usize = env("CONNECTIONS", 64);
    let sizes = Arc::new(Sizes::new(env("SIZES", 0)));
    let run = format!("sellout-{}", uuid::Uuid::new_v4().simple());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(30))
        .build()?;

    let open_at = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
    let drop_id = if sizes.skus.is_empty() {
        open_drop(
            &client,
            &base,
            limited,
            open_at,
            serde_json::json!({"perUserLimit": 1}),
        )
        .await?
    } else {
        let each = limited / i64::try_from(sizes.skus.len())?;
        anyhow::ensure!(
            each * i64::try_from(sizes.skus.len())? == limited,
            "LIMITED must divide by SIZES"
        );
        goods_bench::http::open_sized_drop(&client, &base, &sizes.skus, each, open_at).await?
    };
    let wait = open_at.replace_nanosecond(0)? - time::OffsetDateTime::now_utc();
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default() + Duration::from_millis(50))
        .await;

    let url = format!("{base}/limited-drops/{drop_id}/orders");
    let next_user = Arc::new(AtomicI64::new(1_000_000));
    let started = Instant::now();
    let buyers: Vec<_> = (0..connections)
        .map(|_| {
            tokio::spawn(buyer(
                client.clone(),
                url.clone(),
                Arc::clone(&next_user),
                run.clone(),
                Arc::clone(&sizes),
            ))
        })
        .collect();
    let mut seen = Seen::default();
    for b in buyers {
        let s = b.await?;
        seen.accepted.extend(s.accepted);
        seen.refused.extend(s.refused);
        for (i, n) in s.accepted_by_size {
            *seen.accepted_by_size.entry(i).or_default() += n;
        }
        for (k, n) in s.other {
            *seen.other.entry(k).or_default() += n;
        }
    }
    let wall = started.elapsed();

    let recon = seller(
        &client,
        &base,
        &format!("/limited-drops/{drop_id}/reconciliation"),
        None,
    )
    .await?;
    let sold = recon["soldQuantity"].as_i64().unwrap_or(-1);
    let accepted_now = seen.accepted.len() as i64;
    // Behind a balancer each instance flushes its counters to Redis every 200 ms: the stats
    // catch up with the last answers within a flush or two.
    let mut success = -1;
    for _ in 0..10 {
        let stats = seller(
            &client,
            &base,
            &format!("/limited-drops/{drop_id}/stats"),
            None,
        )
        .await?;
        success = stats["successCount"].as_i64().unwrap_or(-1);
        if success == accepted_now {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    seen.accepted.sort_by_key(|a| a.0);
    let first = seen.accepted.first().map(|a| a.0);
    let last = seen.accepted.last().map(|a| a.0);
    let span = match (first, last) {
        (Some(f), Some(l)) => l - f,
        _ => Duration::ZERO,
    };
    let accepted = seen.accepted.len() as i64;
    let rate = if span.is_zero() {
        0.0
    } else {
        (accepted - 1) as f64 / span.as_secs_f64()
    };
    let mut admitted: Vec<Duration> = seen.accepted.iter().map(|a| a.1).collect();
    admitted.sort_unstable();
    seen.refused.sort_unstable();
    println!(
        "http_sellout limited={limited} connections={connections} accepted={accepted} sold={sold} success={success} \
         first_to_last_s={:.3} wall_s={:.3} orders_per_s={rate:.0} \
         accepted_p50_ms={:.1} accepted_p95_ms={:.1} accepted_p99_ms={:.1} \
         refused={} refused_p95_ms={:.1} other={:?}",
        span.as_secs_f64(),
        wall.as_secs_f64(),
        quantile(&admitted, 0.5),
        quantile(&admitted, 0.95),
        quantile(&admitted, 0.99),
        seen.refused.len(),
        quantile(&seen.refused, 0.95),
        seen.other,
    );
    println!("reconciliation {recon}");
    let mut failed = Vec::new();
    if accepted != sold {
        failed.push(format!(
            "the client's 202s ({accepted}) are not what the database sold ({sold})"
        ));
    }
    if accepted != success {
        failed.push(format!(
            "the client's 202s ({accepted}) are not the stats' successCount ({success})"
        ));
    }
    if sold != limited {
        failed.push(format!(
            "buyers outnumbered {limited} units, but {sold} sold"
        ));
    }
    if recon["oversold"] != serde_json::Value::Bool(false) {
        failed.push("reconciliation reports an oversell".to_owned());
    }
    for (i, sku) in sizes.skus.iter().enumerate() {
        let size = recon["variants"]
            .as_array()
            .and_then(|v| v.iter().find(|s| s["sku"] == sku.as_str()))
            .cloned()
            .unwrap_or_default();
        let (size_sold, size_limited) = (
            size["soldQuantity"].as_i64().unwrap_or(-1),
            size["limitedQuantity"].as_i64().unwrap_or(-2),
        );
        let client_202s = seen.accepted_by_size.get(&i).copied().unwrap_or(0);
        if size_sold != size_limited || client_202s != size_sold {
            failed.push(format!(
                "size {sku}: sold {size_sold} of {size_limited}, the client's 202s {client_202s}"
            ));
        }
    }
    if !seen.other.is_empty() {
        failed.push(format!(
            "answers other than 202 and 409 SOLD_OUT: {:?}",
            seen.other
        ));
    }
    finish(&failed)
}
