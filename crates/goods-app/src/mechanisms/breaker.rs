//! The gate's circuit breaker: once the gate fails, purchases go straight to the database for a
//! cool-down instead of each waiting for the gate's timeout, then one call tries the gate again.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How long the gate is skipped after it failed.
pub const COOL_DOWN: Duration = Duration::from_secs(2);

/// Open (skipping the gate) from a failure until the cool-down has passed.
#[derive(Debug, Default)]
pub struct GateBreaker {
    opened_at: Mutex<Option<Instant>>,
}

impl GateBreaker {
    /// Whether the gate may be asked now.
    pub fn allows(&self) -> bool {
        match self.opened_at.lock() {
            Ok(opened) => opened.is_none_or(|at| at.elapsed() >= COOL_DOWN),
            Err(_) => true,
        }
    }

    /// Whether the gate failed and has not answered since (purchases bypass it, or one is
    /// trying it again).
    pub fn is_open(&self) -> bool {
        self.opened_at.lock().is_ok_and(|opened| opened.is_some())
    }

    /// The gate failed: skip it for the cool-down. Returns whether this call opened it (so the
    /// failure is reported once per outage, not once per purchase).
    pub fn trip(&self) -> bool {
        match self.opened_at.lock() {
            Ok(mut opened) => opened.replace(Instant::now()).is_none(),
            Err(_) => false,
        }
    }

    /// The gate answered: close. Returns whether it was open (the gate is back after an
    /// outage, and what the database sold meanwhile must be synced into it).
    pub fn reset(&self) -> bool {
        if let Ok(mut opened) = self.opened_at.lock()
            && opened.take().is_some()
        {
            tracing::info!("gate answers again; purchases use it");
            return true;
        }
        false
    }
}

/// The gate as the use cases may use it: none without a gate, while the
/// `limited-drop.redis-gate.enabled` flag is off, or while its breaker is open (it failed
/// moments ago).
#[derive(Clone)]
pub(crate) struct GateAccess {
    pub(crate) gate: Option<std::sync::Arc<dyn goods_domain::ports::AdmissionGate>>,
    pub(crate) breaker: std::sync::Arc<GateBreaker>,
    pub(crate) flags: std::sync::Arc<crate::operations::flags::FlagCache>,
}

impl GateAccess {
    /// The gate, if it may be asked now.
    pub(crate) fn usable(&self) -> Option<&std::sync::Arc<dyn goods_domain::ports::AdmissionGate>> {
        self.gate
            .as_ref()
            .filter(|_| self.flags.gate_on() && self.breaker.allows())
    }

    /// A drop's counters in the gate, per size; `None` when it may not be asked, holds
    /// nothing, or failed (which trips the breaker). Draw drops are never in the gate.
    pub(crate) async fn remaining(
        &self,
        drop: &goods_domain::LimitedDrop,
    ) -> Option<goods_domain::batch::FreeUnits> {
        let gate = self.usable().filter(|_| !drop.mode.is_draw())?;
        gate.remaining(drop.id).await.unwrap_or_else(|error| {
            self.breaker.trip();
            tracing::warn!(drop.id = %drop.id, error = %error, "gate unreachable; its counter is unknown");
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_tripped_breaker_skips_the_gate_for_the_cool_down_only() {
        let breaker = GateBreaker::default();
        assert!(breaker.allows());
        assert!(breaker.trip(), "the first failure opens it");
        assert!(!breaker.trip(), "later failures only extend it");
        assert!(!breaker.allows());
        tokio::time::advance(COOL_DOWN).await;
        assert!(breaker.allows());
        assert!(breaker.reset(), "it was open");
        assert!(!breaker.reset(), "closing twice reports once");
        assert!(breaker.allows());
    }
}
