//! Per-drop outcome counters (FR-9).

use crate::{DropId, InfraError};
use async_trait::async_trait;

/// What happened to one purchase request, for the stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PurchaseOutcome {
    Success,
    SoldOut,
    TooEarly,
    Closed,
    PerUserLimit,
    /// Refused: no database write slot in time.
    Throttled,
}

/// Counts of each outcome for one drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub success: u64,
    pub sold_out: u64,
    pub too_early: u64,
    pub closed: u64,
    pub per_user_limit: u64,
    pub throttled: u64,
}

/// Records and reads per-drop outcome counters.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait StatsRecorder: Send + Sync + 'static {
    /// Counts one outcome. It never waits: a shared store is written in the background, so
    /// counting adds no round trip to a purchase.
    fn record(&self, drop_id: DropId, outcome: PurchaseOutcome) -> Result<(), InfraError>;

    async fn counts(&self, drop_id: DropId) -> Result<OutcomeCounts, InfraError>;
}
