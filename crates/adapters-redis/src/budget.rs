//! The global write budget on Redis: a sorted set of permit holders scored by lease end, taken
//! by one script (so the count and the take are atomic), under one hash tag (one cluster slot).

use crate::connection::RedisConnection;
use crate::scripts::{self, PERMIT};
use async_trait::async_trait;
use fred::prelude::*;
use goods_domain::InfraError;
use goods_domain::ports::{WriteBudget, WritePermit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Permits of one database, shared by every instance that uses this Redis and prefix.
pub struct RedisWriteBudget {
    conn: RedisConnection,
    permits: u32,
    holder: String,
    next: AtomicU64,
}

impl RedisWriteBudget {
    /// A budget of `permits` concurrent purchase transactions.
    pub fn new(conn: RedisConnection, permits: u32) -> Self {
        let holder = format!(
            "{}:{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        Self {
            conn,
            permits,
            holder,
            next: AtomicU64::new(0),
        }
    }

    fn keys(&self) -> (String, String) {
        let base = format!("{}{{db}}:permits", self.conn.prefix);
        (base.clone(), format!("{base}:peak"))
    }
}

#[async_trait]
impl WriteBudget for RedisWriteBudget {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn try_acquire(&self, lease: Duration) -> Result<Option<(WritePermit, u32)>, InfraError> {
        let (set, peak) = self.keys();
        let id = format!(
            "{}:{}",
            self.holder,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let held: i64 = scripts::run(
            &self.conn,
            &PERMIT,
            vec![set, peak],
            vec![
                Value::from(i64::from(self.permits)),
                Value::from(id.as_str()),
                Value::from(lease_ms),
            ],
        )
        .await
        .map_err(|e| InfraError::new("redis write permit", e))?;
        Ok(u32::try_from(held).ok().map(|held| (WritePermit(id), held)))
    }

    async fn release(&self, permit: WritePermit) -> Result<(), InfraError> {
        let (set, _) = self.keys();
        let _: i64 = self
            .conn
            .pool
            .next()
            .zrem(set, permit.0)
            .await
            .map_err(|e| InfraError::new("redis release permit", e))?;
        Ok(())
    }
}
