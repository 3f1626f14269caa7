//! What the HTTP load generators (`src/bin/http_*.rs`) share: settings from the environment,
//! quantiles, the seller's calls, and the CPU time a process has used.

use std::time::Duration;

/// `name` from the environment, or `default` when unset or unparsable.
pub fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `q` quantile of `sorted`, in milliseconds (0 when empty).
pub fn quantile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// A seller's call (`POST` with `body`, else `GET`) with trusted identity headers; its JSON.
///
/// # Errors
/// When the call fails or does not answer 2xx.
pub async fn seller(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let request = match body {
        Some(body) => client.post(format!("{base}{path}")).json(&body),
        None => client.get(format!("{base}{path}")),
    };
    let answer = request
        .header("X-User-Id", "1")
        .header("X-User-Role", "seller")
        .send()
        .await?;
    anyhow::ensure!(answer.status().is_success(), "{path}: {}", answer.status());
    Ok(answer.json().await?)
}

/// CPU time (user + system) process `pid` has used so far, from `/proc/<pid>/stat`; `None`
/// when it cannot be read.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) start after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}
