//! Resyncing a drop's gate from the database, the gate's facts, and stale reservations.

use crate::GoodsApp;

use goods_domain::{Fact, IdempotencyKey, InfraError, LimitedDrop, UserId};
use std::collections::HashSet;

impl GoodsApp {
    /// Rebuilds the drop's gate from the database ([`AdmissionGate::resync`]); `false` when
    /// there is no gate or a resync of this drop is already running here.
    ///
    /// [`AdmissionGate::resync`]: goods_domain::ports::AdmissionGate::resync
    #[tracing::instrument(skip_all, fields(drop.id = %drop.id))]
    pub async fn resync_drop(&self, drop: &LimitedDrop) -> Result<bool, InfraError> {
        let Some(gate) = &self.ports.gate else {
            return Ok(false);
        };
        let Some(_claim) = self.healing.claim(drop.id) else {
            return Ok(false);
        };
        // The gate's done markers first, then the seed: a done marker the seed lacks was
        // written after its order committed, before the seed was read, so no order explains it
        // (a recycled id, a restore, a stray write) and the resync drops it.
        let before = gate.done_markers(drop.id).await?;
        let mut seed = self.ports.drops.gate_seed(drop).await?;
        let explained: HashSet<(UserId, IdempotencyKey)> = seed
            .orders
            .iter()
            .map(|order| (order.user_id, order.key.clone()))
            .collect();
        seed.unexplained = before
            .into_iter()
            .filter(|marker| !explained.contains(marker))
            .collect();
        if !seed.unexplained.is_empty() {
            tracing::warn!(
                markers = seed.unexplained.len(),
                "done markers no order explains; dropped by the resync"
            );
        }
        gate.resync(&seed).await?;
        metrics::counter!(crate::telemetry::GATE_RESYNCS).increment(1);
        self.healing.forget_drift(drop.id);
        self.gate_event(Fact::GateRecovered { drop: drop.id }).await;
        tracing::info!(
            remaining = seed.remaining_in_all(),
            "gate resynced from the database"
        );
        Ok(true)
    }

    /// Writes `goods.gate.degraded` or `goods.gate.recovered` once per outage and drop (the store
    /// writes only news); a failed write is logged and retried by the next purchase or resync.
    pub(crate) async fn gate_event(&self, fact: Fact) {
        let drop = fact.drop_id();
        let degraded = matches!(fact, Fact::GateDegraded { .. });
        let mut announced = self.healing.degraded.lock().await;
        if announced.contains(&drop) == degraded {
            return;
        }
        let at = self.ports.clock.now();
        match self.ports.event_log.record_gate(&fact, at).await {
            Ok(_) if degraded => {
                announced.insert(drop);
            }
            Ok(_) => {
                announced.remove(&drop);
            }
            Err(error) => {
                tracing::warn!(drop.id = %drop, error = %error, kind = fact.event_type().as_str(), "gate event not written");
            }
        }
    }

    /// Resyncs the drop in the background (a purchase noticed the gate is off).
    pub(crate) fn resync_soon(&self, drop: LimitedDrop) {
        let app = self.clone();
        self.tasks.spawn(async move {
            if let Err(error) = app.resync_drop(&drop).await {
                tracing::warn!(drop.id = %drop.id, error = %error, "gate resync failed");
            }
        });
    }

    /// The gate answers again after an outage: resync the drops the database sold meanwhile.
    pub(crate) fn gate_is_back(&self) {
        for id in self.healing.take_dirty() {
            let app = self.clone();
            self.tasks.spawn(async move {
                let result = match app.drops.load(id).await {
                    Ok(Some(drop)) => app.resync_drop(&drop).await.map(|_| ()),
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                };
                if let Err(error) = result {
                    // Reconciliation's drift check heals it later.
                    app.healing.mark_dirty(id);
                    tracing::warn!(drop.id = %id, error = %error, "gate resync after outage failed");
                }
            });
        }
    }
}
