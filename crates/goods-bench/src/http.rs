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

/// An instant as the API takes it: RFC 3339, whole seconds.
pub fn rfc3339(at: time::OffsetDateTime) -> anyhow::Result<String> {
    Ok(at
        .replace_nanosecond(0)?
        .format(&time::format_description::well_known::Rfc3339)?)
}

/// A product of `limited` units and a drop of all of them, opening at `open_at` and closing
/// two hours from now, with `extra` fields in the drop's body (a `mode`, its `entryCloseAt`,
/// a `perUserLimit`); the drop's id.
pub async fn open_drop(
    client: &reqwest::Client,
    base: &str,
    limited: i64,
    open_at: time::OffsetDateTime,
    extra: serde_json::Value,
) -> anyhow::Result<i64> {
    let product = seller(
        client,
        base,
        "/products",
        Some(serde_json::json!({"name": "load", "stockQuantity": limited})),
    )
    .await?;
    let mut body = serde_json::json!({
        "productId": product["productId"],
        "openAt": rfc3339(open_at)?,
        "closeAt": rfc3339(time::OffsetDateTime::now_utc() + time::Duration::hours(2))?,
        "limitedQuantity": limited,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let drop = seller(client, base, "/limited-drops", Some(body)).await?;
    drop["dropId"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no dropId in {drop}"))
}

/// A product in `skus` variants of `each` units and an open drop of all of them, `each` units per
/// size, one unit per buyer; its id.
pub async fn open_sized_drop(
    client: &reqwest::Client,
    base: &str,
    skus: &[String],
    each: i64,
    open_at: time::OffsetDateTime,
) -> anyhow::Result<i64> {
    let variants: Vec<serde_json::Value> = skus
        .iter()
        .map(|sku| serde_json::json!({"sku": sku, "label": sku, "stockQuantity": each}))
        .collect();
    let product = seller(
        client,
        base,
        "/products",
        Some(serde_json::json!({"name": "load in sizes", "variants": variants})),
    )
    .await?;
    let sizes: Vec<serde_json::Value> = skus
        .iter()
        .map(|sku| serde_json::json!({"sku": sku, "limitedQuantity": each}))
        .collect();
    let body = serde_json::json!({
        "productId": product["productId"],
        "openAt": rfc3339(open_at)?,
        "closeAt": rfc3339(time::OffsetDateTime::now_utc() + time::Duration::hours(2))?,
        "variants": sizes,
        "perUserLimit": 1,
    });
    let drop = seller(client, base, "/limited-drops", Some(body)).await?;
    drop["dropId"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no dropId in {drop}"))
}

/// An answer the generator did not expect, as `"{status} {code}"` (the problem's `code`, or
/// nothing when the body has none).
pub fn other_answer(status: u16, body: &[u8]) -> String {
    let code = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    format!("{status} {code}")
}

/// Prints every failed check as `FAIL: ...`; exits with status 1 when there is one.
pub fn finish(failed: &[String]) -> anyhow::Result<()> {
    for f in failed {
        println!("FAIL: {f}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        std::process::exit(1)
    }
}
