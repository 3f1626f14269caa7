//! The commit: a write slot of the instance's buffer, then the drop's next group commit; and
//! the database-only path (no gate, its flag off, or its breaker open).

use super::{Asked, Chosen, PurchaseError, PurchaseHooks, Purchased, Purchases, place_order};
use crate::mechanisms::group_commit::Commit;
use crate::telemetry;
use goods_domain::LimitedDrop;
use goods_domain::ports::Placed;
use time::OffsetDateTime;

impl Purchases {
    /// The purchase without the gate: the database decides alone.
    pub(super) async fn database_alone(
        &self,
        hooks: &dyn PurchaseHooks,
        drop: &LimitedDrop,
        cmd: &Chosen,
        now: OffsetDateTime,
    ) -> Result<Purchased, PurchaseError> {
        // No gate, its flag is off, or it failed moments ago (its breaker is open): the
        // database decides.
        if self.access.gate.is_some() {
            let failing = self.access.flags.gate_on();
            let reason = if failing { "breaker_open" } else { "flag_off" };
            metrics::counter!(telemetry::GATE_FALLBACKS, "reason" => reason).increment(1);
            // The gate does not see this sale: resync the drop when it is back.
            hooks.gate_bypassed(drop.id, failing).await;
        }
        let order = place_order(
            drop,
            Asked {
                user_id: cmd.user_id,
                sku: cmd.sku.as_ref(),
                quantity: cmd.quantity,
                key: &cmd.key,
            },
            now,
            None,
            self.payment_window,
        );
        self.commit(Commit {
            order,
            confirm_at: None,
        })
        .await
    }

    /// Takes a write slot and commits the order with its drop's next batch (which confirms it
    /// at the gate that admitted it, if any).
    pub(super) async fn commit(&self, commit: Commit) -> Result<Purchased, PurchaseError> {
        let admitted = std::time::Instant::now();
        let Some(_permit) = self.buffer.acquire().await else {
            return Err(PurchaseError::Throttled);
        };
        match self.committers.place(commit).await? {
            Placed::Created(order) => {
                self.drops.units_changed(order.drop_id);
                metrics::histogram!(telemetry::ADMISSION_TO_COMMIT)
                    .record(admitted.elapsed().as_secs_f64());
                Ok(Purchased {
                    order,
                    replayed: false,
                })
            }
            Placed::Replayed(order) => Ok(Purchased {
                order,
                replayed: true,
            }),
        }
    }

    pub(super) async fn find_replay(
        &self,
        cmd: &Chosen,
    ) -> Result<Option<Purchased>, PurchaseError> {
        let existing = self.orders.find_by_key(cmd.user_id, &cmd.key).await?;
        match existing {
            Some(order) if order.matches_request(cmd.drop_id, cmd.sku.as_ref(), cmd.quantity) => {
                Ok(Some(Purchased {
                    order,
                    replayed: true,
                }))
            }
            Some(_) => Err(PurchaseError::KeyReused),
            None => Ok(None),
        }
    }
}
