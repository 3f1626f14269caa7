//! Per-drop outcome counters (FR-9).

use crate::{DropId, InfraError, Sku};
use async_trait::async_trait;
use std::collections::BTreeMap;

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

impl OutcomeCounts {
    /// Counts one more `outcome`.
    pub fn add(&mut self, outcome: PurchaseOutcome, n: u64) {
        let slot = match outcome {
            PurchaseOutcome::Success => &mut self.success,
            PurchaseOutcome::SoldOut => &mut self.sold_out,
            PurchaseOutcome::TooEarly => &mut self.too_early,
            PurchaseOutcome::Closed => &mut self.closed,
            PurchaseOutcome::PerUserLimit => &mut self.per_user_limit,
            PurchaseOutcome::Throttled => &mut self.throttled,
        };
        *slot = slot.saturating_add(n);
    }
}

/// A drop's outcome counts: in all, and each size's for a drop in sizes (a size nobody asked
/// for yet has no entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropOutcomes {
    pub all: OutcomeCounts,
    pub sizes: BTreeMap<Sku, OutcomeCounts>,
}

impl DropOutcomes {
    /// Counts one outcome of a purchase of `sku` (`None`: a drop without sizes): in the
    /// drop's counts, and in the size's.
    pub fn record(&mut self, sku: Option<&Sku>, outcome: PurchaseOutcome) {
        self.all.add(outcome, 1);
        if let Some(sku) = sku {
            self.sizes.entry(sku.clone()).or_default().add(outcome, 1);
        }
    }

    /// A size's counts (zero for a size nobody asked for).
    pub fn of(&self, sku: &Sku) -> OutcomeCounts {
        self.sizes.get(sku).copied().unwrap_or_default()
    }
}

/// Records and reads per-drop outcome counters, in all and per size.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait StatsRecorder: Send + Sync + 'static {
    /// Counts one outcome of a purchase of `sku` (one of the drop's sizes; `None` for a drop
    /// without sizes), in the drop's counts and in the size's. It never waits: a shared store
    /// is written in the background, so counting adds no round trip to a purchase.
    #[allow(clippy::needless_lifetimes)] // mockall names the argument's lifetime
    fn record<'a>(
        &self,
        drop_id: DropId,
        sku: Option<&'a Sku>,
        outcome: PurchaseOutcome,
    ) -> Result<(), InfraError>;

    async fn counts(&self, drop_id: DropId) -> Result<DropOutcomes, InfraError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_of_a_size_counts_in_the_drop_and_in_its_size() {
        let sku = |s: &str| Sku::parse("sku", s).unwrap();
        let mut counts = DropOutcomes::default();
        counts.record(Some(&sku("S")), PurchaseOutcome::Success);
        counts.record(Some(&sku("S")), PurchaseOutcome::SoldOut);
        counts.record(Some(&sku("M")), PurchaseOutcome::Success);
        counts.record(None, PurchaseOutcome::Throttled);
        assert_eq!(
            (
                counts.all.success,
                counts.all.sold_out,
                counts.all.throttled
            ),
            (2, 1, 1)
        );
        assert_eq!(
            (counts.of(&sku("S")).success, counts.of(&sku("S")).sold_out),
            (1, 1)
        );
        assert_eq!(
            (counts.of(&sku("M")).success, counts.of(&sku("M")).sold_out),
            (1, 0)
        );
        assert_eq!(counts.of(&sku("L")), OutcomeCounts::default());
        assert_eq!(counts.sizes.len(), 2);
    }
}
