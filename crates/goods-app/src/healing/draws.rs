//! The draws' schedule: the draw drops this instance holds, drawn and promoted on time.

use super::{CLOSED_GRACE, HealReport};
use crate::GoodsApp;
use goods_domain::{InfraError, LimitedDrop};

impl GoodsApp {
    /// The draw drops this instance holds whose entries have closed and that are not long
    /// closed: what the draws' schedule tends. A draw still taking entries has nothing to draw,
    /// promote or expire.
    pub(super) fn draws_to_tend(&self, now: time::OffsetDateTime) -> Vec<LimitedDrop> {
        self.drops
            .cached()
            .into_iter()
            .filter(|d| {
                d.mode.entry_close_at().is_some_and(|at| now >= at)
                    && !d.is_closed(now.saturating_sub(CLOSED_GRACE))
            })
            .collect()
    }

    /// Whether the draws' schedule has work here: only then does it (and its lease) cost
    /// anything.
    pub fn holds_draws_to_tend(&self) -> bool {
        !self.draws_to_tend(self.ports.clock.now()).is_empty()
    }

    /// Holds the draw drops unclosed at start (read once; later ones arrive by creation or the
    /// refresh), so whichever instance takes the draws' lease knows them all.
    pub async fn hold_draw_drops(&self) -> Result<(), InfraError> {
        if self
            .healing
            .draws_held
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(());
        }
        let now = self.ports.clock.now();
        let unclosed = self
            .ports
            .drops
            .list_unclosed(now.saturating_sub(CLOSED_GRACE))
            .await?;
        let draws: Vec<LimitedDrop> = unclosed.into_iter().filter(|d| d.mode.is_draw()).collect();
        self.drops.hold(&draws);
        self.healing
            .draws_held
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// The draws' schedule, every [`DRAW_TICK`](super::DRAW_TICK) on one instance: due draws,
    /// waitlist promotions, expiry of unpaid orders; sets the overdue-draw gauge.
    ///
    /// # Errors
    /// The drops cannot be listed (one drop's failure is logged and counted, not returned).
    pub async fn tend_draws(&self) -> Result<HealReport, InfraError> {
        let now = self.ports.clock.now();
        // A server without a draw to tend sends no statement.
        let drops = self.draws_to_tend(now);
        let mut report = HealReport::default();
        if drops.is_empty() {
            metrics::gauge!(crate::telemetry::DRAW_OVERDUE).set(0.0);
            return Ok(report);
        }
        match self.orders().expire_overdue().await {
            Ok(expired) => report.expired = expired,
            Err(error) => {
                report.failed += 1;
                tracing::warn!(error = %error, "expiring unpaid orders failed");
            }
        }
        let mut overdue = time::Duration::ZERO;
        let draws = self.draws();
        for drop in &drops {
            report.drops += 1;
            match draws.run(drop).await {
                Ok(finished) => report.draws += usize::from(finished),
                Err(error) => {
                    report.failed += 1;
                    tracing::warn!(drop.id = %drop.id, error = %error, "tending the draw failed");
                    // A draw that is due and failed is overdue since its entries closed.
                    if let Some(at) = drop.mode.entry_close_at().filter(|&at| now >= at) {
                        overdue = overdue.max(now - at);
                    }
                    continue;
                }
            }
            match draws.promote_waitlist(drop).await {
                Ok(promoted) => report.promoted += promoted,
                Err(error) => {
                    report.failed += 1;
                    tracing::warn!(drop.id = %drop.id, error = %error, "waitlist promotion failed");
                }
            }
        }
        metrics::gauge!(crate::telemetry::DRAW_OVERDUE).set(overdue.as_seconds_f64());
        Ok(report)
    }
}
