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

    fn key(&self, key: RateKey) -> String {
        match key {
            RateKey::Buyer(user) => format!("{}rate:buyer:{user}", self.conn.prefix),
            RateKey::Address(ip) => format!("{}rate:address:{ip}", self.conn.prefix),
            RateKey::Reader(user) => format!("{}rate:reader:{user}", self.conn.prefix),
        }
    }
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn admit(&self, key: RateKey, limit: RateLimit) -> Result<RateDecision, InfraError> {
        let interval = i64::try_from(limit.interval().as_micros()).unwrap_or(i64::MAX);
        let answer: Vec<i64> = scripts::run(
            &self.conn.pool,
            &RATE,
            vec![self.key(key)],
            vec![Value::from(interval), Value::from(i64::from(limit.burst()))],
        )
        .await
        .map_err(|e| InfraError::new("redis rate limit", e))?;
        let [allowed, remaining, retry_after, reset] = answer[..] else {
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
}
