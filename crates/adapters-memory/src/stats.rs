//! Per-instance outcome counters.

use async_trait::async_trait;
use goods_domain::ports::{DropOutcomes, PurchaseOutcome, StatsRecorder};
use goods_domain::{DropId, InfraError, Sku};
use std::collections::HashMap;
use std::sync::Mutex;

/// Outcome counters kept in memory: exact for one instance, reset by a restart.
#[derive(Debug, Default)]
pub struct MemoryStats {
    counts: Mutex<HashMap<DropId, DropOutcomes>>,
}

#[async_trait]
impl StatsRecorder for MemoryStats {
    fn record(
        &self,
        drop_id: DropId,
        sku: Option<&Sku>,
        outcome: PurchaseOutcome,
    ) -> Result<(), InfraError> {
        self.counts
            .lock()
            .map_err(|_| InfraError::msg("stats lock poisoned"))?
            .entry(drop_id)
            .or_default()
            .record(sku, outcome);
        Ok(())
    }

    async fn counts(&self, drop_id: DropId) -> Result<DropOutcomes, InfraError> {
        let all = self
            .counts
            .lock()
            .map_err(|_| InfraError::msg("stats lock poisoned"))?;
        Ok(all.get(&drop_id).cloned().unwrap_or_default())
    }
}
