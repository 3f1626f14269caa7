//! Token buckets for the fleet: one key per buyer or address, one script round trip per
//! request (`lua/rate.lua`, GCRA on Redis's clock). A bucket is one key, so any key works on a
//! Redis Cluster; the names are the service's own (`{prefix}rate:buyer:{id}`), which no
//! client can choose.

use crate::connection::RedisConnection;
use crate::scripts::{self, RATE};
use async_trait::async_trait;
use fred::prelude::*;
use goods_domain::ports::RateLimiter;
use goods_domain::{InfraError, RateDecision, RateKey, RateLimit};
use std::time::Duration;

/// The fleet's buckets on Redis.
pub struct RedisRateLimiter {
    conn: RedisConnection,
}

impl RedisRateLimiter {
    pub fn new(conn: RedisConnection) -> Self {
        Self { conn }
    }
}

/// The bucket of `key` under `prefix` (the gate charges a buyer's in its reserve script).
pub(crate) fn bucket_key(prefix: &str, key: RateKey) -> String {
    match key {
        RateKey::Buyer(user) => format!("{prefix}rate:buyer:{user}"),
        RateKey::Address(ip) => format!("{prefix}rate:address:{ip}"),
        RateKey::Reader(user) => format!("{prefix}rate:reader:{user}"),
    }
}

/// A bucket's answer `{allowed, tokens left, µs until allowed, µs until full}` (gcra.lua).
pub(crate) fn bucket_decision(answer: &[Value]) -> Result<RateDecision, InfraError> {
    let numbers: Option<Vec<i64>> = answer.iter().map(Value::as_i64).collect();
    let Some(&[allowed, remaining, retry_after, reset]) = numbers.as_deref() else {
        return Err(InfraError::msg(format!(
            "redis rate limit: unexpected answer {answer:?}"
        )));
    };
    let micros = |n: i64| Duration::from_micros(u64::try_from(n).unwrap_or(0));
    Ok(RateDecision {
        allowed: allowed == 1,
        remaining: u32::try_from(remaining).unwrap_or(0),
        retry_after: micros(retry_after),
        reset: micros(reset),
    })
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn admit(&self, key: RateKey, limit: RateLimit) -> Result<RateDecision, InfraError> {
        let interval = i64::try_from(limit.interval().as_micros()).unwrap_or(i64::MAX);
        let answer: Vec<Value> = scripts::run(
            &self.conn,
            &RATE,
            vec![bucket_key(&self.conn.prefix, key)],
            vec![Value::from(interval), Value::from(i64::from(limit.burst()))],
        )
        .await
        .map_err(|e| InfraError::new("redis rate limit", e))?;
        bucket_decision(&answer)
    }
}
