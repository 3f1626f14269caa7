//! Per-instance outcome counters.

use async_trait::async_trait;
use goods_domain::ports::{OutcomeCounts, PurchaseOutcome, StatsRecorder};
use goods_domain::{DropId, InfraError};
use std::collections::HashMap;
use std::sync::Mutex;

/// Outcome counters kept in memory: exact for one instance, reset by a restart.
#[derive(Debug, Default)]
pub struct MemoryStats {
    counts: Mutex<HashMap<DropId, OutcomeCounts>>,
}

#[async_trait]
impl StatsRecorder for MemoryStats {
    fn record(&self, drop_id: DropId, outcome: PurchaseOutcome) -> Result<(), InfraError> {
        let mut all = self
            .counts
            .lock()
            .map_err(|_| InfraError::msg("stats lock poisoned"))?;
        let c = all.entry(drop_id).or_default();
        let slot = match outcome {
            PurchaseOutcome::Success => &mut c.success,
            PurchaseOutcome::SoldOut => &mut c.sold_out,
            PurchaseOutcome::TooEarly => &mut c.too_early,
            PurchaseOutcome::Closed => &mut c.closed,
            PurchaseOutcome::PerUserLimit => &mut c.per_user_limit,
            PurchaseOutcome::Throttled => &mut c.throttled,
        };
        *slot += 1;
        Ok(())
    }

    async fn counts(&self, drop_id: DropId) -> Result<OutcomeCounts, InfraError> {
        let all = self
            .counts
            .lock()
            .map_err(|_| InfraError::msg("stats lock poisoned"))?;
        Ok(all.get(&drop_id).copied().unwrap_or_default())
    }
}
