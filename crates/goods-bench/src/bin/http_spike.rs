//! The seed's spike over HTTP, open loop: purchase attempts on one drop at `RATE` per second for
//! `SECONDS`, every request a new buyer with a new key, over `CONNECTIONS` keep-alive
//! connections that each own an even share of the schedule (wrk2's design: request `n` is due
//! at `n / RATE` seconds and goes out on connection `n % CONNECTIONS` as soon as that connection
//! is free). Requests are written as bytes and answers parsed with `httparse`: a general client
//! (reqwest) cost more CPU per request than the server itself and could not reach 20,000/s on
//! this 2-core machine next to the server (16,768/s, the generator 1.9 s behind). It creates the
//! product and a drop of `LIMITED` units (one per buyer) open at once, and reports:
//!
//! - the rate reached (answers per second over the run), and the late starts: requests that
//!   started more than 10 ms after their scheduled time (their connection was still waiting for
//!   an earlier answer, or the generator was behind);
//! - p50/p95/p99 of the admitted purchases (202) and of the refusals, separately, **from each
//!   request's scheduled start**, so time spent waiting to be sent counts (corrected for
//!   coordinated omission);
//! - with `SERVER_PID`, the server's CPU time per 1,000 requests (from `/proc`);
//! - the checks that make the run able to fail: the drop sold out exactly (the stats'
//!   `soldQuantity` = `successCount` = `LIMITED`), the client's 202s equal it, every other answer
//!   is `409 SOLD_OUT`. Exit status 1 when any check fails.
//!
//! `BASE=http://127.0.0.1:18083 RATE=20000 SECONDS=10 LIMITED=3000 cargo run --release -p goods-bench --bin http_spike`
//! (loadtest/spike.sh starts the server and runs it). The server must trust identity headers
//! (`AUTH_MODE=trusted-header`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use goods_bench::http::{cpu_time, env, finish, open_drop, other_answer, quantile, seller};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[derive(Default)]
struct Seen {
    admitted: Vec<Duration>,
    refused: Vec<Duration>,
    other: BTreeMap<String, u64>,
}

/// Late by more than this, a start counts as late.
const LATE: Duration = Duration::from_millis(10);

/// What one connection saw.
#[derive(Default)]
struct Part {
    seen: Seen,
    late: u64,
    behind: Duration,
}

/// Connection `c` of `of`: requests `c, c + of, c + 2 of, ..` below `total`, each sent at its
/// due time or as soon as the previous answer is in, on one keep-alive connection.
async fn connection(
    addr: std::net::SocketAddr,
    drop_id: i64,
    c: u64,
    of: u64,
    total: u64,
    started: Instant,
    interval: Duration,
) -> anyhow::Result<Part> {
    let mut part = Part::default();
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = vec![0_u8; 8192];
    let mut n = c;
    while n < total {
        let due = started + interval.mul_f64(n as f64);
        tokio::time::sleep_until(due.into()).await;
        let lateness = Instant::now().saturating_duration_since(due);
        part.behind = part.behind.max(lateness);
        if lateness > LATE {
            part.late += 1;
        }
        let user = 2_000_000 + n;
        let request = format!(
            "POST /limited-drops/{drop_id}/orders HTTP/1.1\r\nHost: spike\r\nX-User-Id: {user}\r\n\
             Idempotency-Key: spike-{user}\r\nContent-Type: application/json\r\n\
             Content-Length: 14\r\n\r\n{{\"quantity\":1}}"
        );
        stream.write_all(request.as_bytes()).await?;
        let (status, body) = read_answer(&mut stream, &mut buf).await?;
        // From the scheduled start: time spent waiting to be sent is time the buyer waited.
        let took = due.elapsed();
        match status {
            202 => part.seen.admitted.push(took),
            409 if body.windows(10).any(|w| w == b"\"SOLD_OUT\"") => part.seen.refused.push(took),
            _ => {
                *part
                    .seen
                    .other
                    .entry(other_answer(status, &body))
                    .or_default() += 1;
            }
        }
        n += of;
    }
    Ok(part)
}

/// Reads one answer (headers and a `Content-Length` body) from `stream`; its status and body.
async fn read_answer(
    stream: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let read = stream.read(&mut buf[filled..]).await?;
        anyhow::ensure!(read > 0, "the server closed the connection");
        filled += read;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut answer = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(head) = answer.parse(&buf[..filled])? {
            let status = answer.code.unwrap_or(0);
            let length: usize = answer
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                .unwrap_or(0);
            while filled < head + length {
                if filled == buf.len() {
                    buf.resize(buf.len() * 2, 0);
                }
                let read = stream.read(&mut buf[filled..]).await?;
                anyhow::ensure!(read > 0, "the server closed the connection");
                filled += read;
            }
            return Ok((status, buf[head..head + length].to_vec()));
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base: String = env("BASE", "http://127.0.0.1:18083".to_owned());
    let rate: u64 = env("RATE", 20_000);
    let seconds: u64 = env("SECONDS", 10);
    let connections: usize = env("CONNECTIONS", 256);
    let limited: i64 = env("LIMITED", 3_000);
    let server_pid: Option<u32> = std::env::var("SERVER_PID")
        .ok()
        .and_then(|p| p.parse().ok());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let open = time::OffsetDateTime::now_utc() - time::Duration::seconds(1);
    let drop_id = open_drop(
        &client,
        &base,
        limited,
        open,
        serde_json::json!({"perUserLimit": 1}),
    )
    .await?;
    let addr: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| anyhow::anyhow!("BASE must be http://ip:port: {e}"))?;

    let total = rate * seconds;
    let connections = connections.min(total as usize).max(1);
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let cpu_before = server_pid.and_then(cpu_time);
    let started = Instant::now() + Duration::from_millis(100);
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..connections {
        tasks.spawn(connection(
            addr,
            drop_id,
            c as u64,
            connections as u64,
            total,
            started,
            interval,
        ));
    }
    let mut seen = Seen::default();
    let (mut late, mut behind) = (0_u64, Duration::ZERO);
    while let Some(part) = tasks.join_next().await {
        let part = part??;
        seen.admitted.extend(part.seen.admitted);
        seen.refused.extend(part.seen.refused);
        for (k, v) in part.seen.other {
            *seen.other.entry(k).or_default() += v;
        }
        late += part.late;
        behind = behind.max(part.behind);
    }
    let wall = started.elapsed();
    let cpu = match (cpu_before, server_pid.and_then(cpu_time)) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    seen.admitted.sort_unstable();
    seen.refused.sort_unstable();
    let admitted = seen.admitted.len() as i64;
    let answered =
        seen.admitted.len() + seen.refused.len() + seen.other.values().sum::<u64>() as usize;
    let stats = seller(
        &client,
        &base,
        &format!("/limited-drops/{drop_id}/stats"),
        None,
    )
    .await?;
    let sold = stats["soldQuantity"].as_i64().unwrap_or(-1);
    let success = stats["successCount"].as_i64().unwrap_or(-1);
    println!(
        "http_spike rate_target={rate} seconds={seconds} sent={total} answered={answered} \
         wall_s={:.3} requests_per_s={:.0} late_starts={late} behind_ms={:.1} \
         admitted={admitted} sold={sold} success_count={success} \
         admitted_p50_ms={:.1} admitted_p95_ms={:.1} admitted_p99_ms={:.1} \
         refused_p50_ms={:.1} refused_p95_ms={:.1} refused_p99_ms={:.1} \
         server_cpu_ms_per_1000={} other={:?}",
        wall.as_secs_f64(),
        answered as f64 / wall.as_secs_f64(),
        behind.as_secs_f64() * 1e3,
        quantile(&seen.admitted, 0.5),
        quantile(&seen.admitted, 0.95),
        quantile(&seen.admitted, 0.99),
        quantile(&seen.refused, 0.5),
        quantile(&seen.refused, 0.95),
        quantile(&seen.refused, 0.99),
        cpu.map_or("n/a".to_owned(), |cpu| format!(
            "{:.1}",
            cpu.as_secs_f64() * 1e3 * 1000.0 / total as f64
        )),
        seen.other,
    );
    let mut failed = Vec::new();
    if (sold, success, admitted) != (limited, limited, limited) {
        failed.push(format!(
            "not sold out exactly: sold {sold}, successCount {success}, client 202s {admitted}, limited {limited}"
        ));
    }
    if !seen.other.is_empty() {
        failed.push(format!(
            "answers other than 202 and SOLD_OUT: {:?}",
            seen.other
        ));
    }
    finish(&failed)
}
