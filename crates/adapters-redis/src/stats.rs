//! Outcome counters in Redis, global: each instance adds up locally and flushes every 200 ms in
//! one pipeline (no round trip per refusal); a read flushes first, seeing others' one flush late.

use crate::connection::RedisConnection;
use crate::keys::DropKeys;
use async_trait::async_trait;
use fred::prelude::*;
use goods_domain::ports::{DropOutcomes, PurchaseOutcome, StatsRecorder};
use goods_domain::{DropId, InfraError, Sku};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Counters keep for 30 days after their last change.
const TTL_SECONDS: i64 = 30 * 24 * 3600;

fn field(outcome: PurchaseOutcome) -> &'static str {
    match outcome {
        PurchaseOutcome::Success => "success",
        PurchaseOutcome::SoldOut => "sold_out",
        PurchaseOutcome::TooEarly => "too_early",
        PurchaseOutcome::Closed => "closed",
        PurchaseOutcome::PerUserLimit => "per_user_limit",
        PurchaseOutcome::Throttled => "throttled",
    }
}

/// Counts not flushed yet. Counting takes a read lock and an atomic add (a write lock only the
/// first time a drop and outcome are seen), so concurrent workers do not queue on every request.
const OUTCOMES: [PurchaseOutcome; 6] = [
    PurchaseOutcome::Success,
    PurchaseOutcome::SoldOut,
    PurchaseOutcome::TooEarly,
    PurchaseOutcome::Closed,
    PurchaseOutcome::PerUserLimit,
    PurchaseOutcome::Throttled,
];

/// One counter: a drop's outcome, in all (`None`) or of one size. In the drop's hash its field
/// is the outcome's name, or `name:sku` for a size (a sku has no `:`, so the two never meet).
type Counter = (DropId, PurchaseOutcome, Option<Sku>);

fn hash_field((_, outcome, sku): &Counter) -> String {
    match sku {
        None => field(*outcome).to_owned(),
        Some(sku) => format!("{}:{}", field(*outcome), sku.as_str()),
    }
}

type Pending = RwLock<HashMap<Counter, AtomicI64>>;

#[derive(Clone)]
pub struct RedisStats {
    conn: RedisConnection,
    pending: Arc<Pending>,
    /// One flush at a time: a read's flush waits for the background flush in flight, whose
    /// counts it took from `pending` but has not written yet, so a read sees them.
    flushing: Arc<tokio::sync::Mutex<()>>,
}

impl RedisStats {
    /// Counters on `conn`, flushed by a background task every 200 ms, and once more when the
    /// connection closes.
    pub fn new(conn: RedisConnection) -> Self {
        let stats = Self {
            conn,
            pending: Arc::default(),
            flushing: Arc::default(),
        };
        let flusher = stats.clone();
        let stop = stats.conn.tasks.stop.clone();
        stats.conn.tasks.spawn_to_end(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                if let Err(error) = flusher.flush().await {
                    tracing::debug!(error = %error, "stats flush deferred");
                }
            }
            if let Err(error) = flusher.flush().await {
                tracing::warn!(error = %error, "outcome counts not flushed at shutdown");
            }
        });
        stats
    }

    fn add(&self, key: Counter, n: i64) -> Result<(), InfraError> {
        let poisoned = || InfraError::msg("stats lock poisoned");
        if let Some(count) = self.pending.read().map_err(|_| poisoned())?.get(&key) {
            count.fetch_add(n, Ordering::Relaxed);
            return Ok(());
        }
        self.pending
            .write()
            .map_err(|_| poisoned())?
            .entry(key)
            .or_default()
            .fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    async fn flush(&self) -> Result<(), InfraError> {
        let _one_at_a_time = self.flushing.lock().await;
        let batch: Vec<(Counter, i64)> = self
            .pending
            .read()
            .map_err(|_| InfraError::msg("stats lock poisoned"))?
            .iter()
            .map(|(k, count)| (k.clone(), count.swap(0, Ordering::Relaxed)))
            .filter(|(_, n)| *n != 0)
            .collect();
        if batch.is_empty() {
            return Ok(());
        }
        let pipeline = self.conn.pool.next().pipeline();
        for (counter, n) in &batch {
            let key = DropKeys::new(&self.conn.drops, counter.0).stats;
            let _: () = pipeline
                .hincrby(&key, hash_field(counter), *n)
                .await
                .map_err(|e| InfraError::new("stats", e))?;
            let _: () = pipeline
                .expire(&key, TTL_SECONDS, None)
                .await
                .map_err(|e| InfraError::new("stats", e))?;
        }
        if let Err(error) = pipeline.all::<Vec<Value>>().await {
            // Not counted yet: put the batch back for the next flush.
            for (k, n) in batch {
                self.add(k, n)?;
            }
            return Err(InfraError::new("stats flush", error));
        }
        Ok(())
    }
}

#[async_trait]
impl StatsRecorder for RedisStats {
    fn record(
        &self,
        drop_id: DropId,
        sku: Option<&Sku>,
        outcome: PurchaseOutcome,
    ) -> Result<(), InfraError> {
        self.add((drop_id, outcome, None), 1)?;
        match sku {
            Some(sku) => self.add((drop_id, outcome, Some(sku.clone())), 1),
            None => Ok(()),
        }
    }

    async fn counts(&self, drop_id: DropId) -> Result<DropOutcomes, InfraError> {
        self.flush().await?;
        let raw: HashMap<String, u64> = self
            .conn
            .pool
            .next()
            .hgetall(DropKeys::new(&self.conn.drops, drop_id).stats)
            .await
            .map_err(|e| InfraError::new("stats read", e))?;
        let mut counts = DropOutcomes::default();
        for (name, n) in raw {
            let (outcome, sku) = match name.split_once(':') {
                Some((outcome, sku)) => (outcome, Some(sku)),
                None => (name.as_str(), None),
            };
            let Some(outcome) = OUTCOMES.into_iter().find(|o| field(*o) == outcome) else {
                continue;
            };
            match sku.map(|sku| Sku::parse("sku", sku)) {
                None => counts.all.add(outcome, n),
                Some(Ok(sku)) => counts.sizes.entry(sku).or_default().add(outcome, n),
                Some(Err(_)) => {
                    tracing::warn!(field = %name, "stats field with a malformed sku ignored");
                }
            }
        }
        Ok(counts)
    }
}
