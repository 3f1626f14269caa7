//! The in-process admission gate: the Redis gate's semantics behind one mutex, for a single
//! instance (embedded mode, tests). It is rebuilt from the database after a restart. Both gates
//! pass the same contract suite (`test_support::gate_contract`, run in `tests/contract.rs`).

use async_trait::async_trait;
use goods_domain::ports::{AdmissionGate, GateSeed, Reservation, ReserveOutcome};
use goods_domain::{DropId, IdempotencyKey, InfraError, OrderId, Quantity, UserId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    InProgress { quantity: Quantity },
    Done { quantity: Quantity, order: OrderId },
}

#[derive(Debug, Default)]
struct DropGate {
    remaining: u32,
    held: HashMap<UserId, u32>,
    markers: HashMap<(UserId, IdempotencyKey), Marker>,
}

/// The single-instance admission gate.
#[derive(Debug, Default)]
pub struct MemoryGate {
    drops: Mutex<HashMap<DropId, DropGate>>,
}

impl MemoryGate {
    fn lock(&self) -> Result<MutexGuard<'_, HashMap<DropId, DropGate>>, InfraError> {
        self.drops
            .lock()
            .map_err(|_| InfraError::msg("gate lock poisoned"))
    }
}

#[async_trait]
impl AdmissionGate for MemoryGate {
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        drops.entry(seed.drop_id).or_insert_with(|| {
            let mut gate = DropGate {
                remaining: seed.remaining,
                ..DropGate::default()
            };
            for order in &seed.orders {
                if order.live {
                    *gate.held.entry(order.user_id).or_default() += order.quantity.get();
                }
                gate.markers.insert(
                    (order.user_id, order.key.clone()),
                    Marker::Done {
                        quantity: order.quantity,
                        order: order.order_id,
                    },
                );
            }
            gate
        });
        Ok(())
    }

    async fn reserve(&self, r: &Reservation) -> Result<ReserveOutcome, InfraError> {
        let mut drops = self.lock()?;
        let Some(gate) = drops.get_mut(&r.drop_id) else {
            return Ok(ReserveOutcome::NotSeeded);
        };
        let marker_key = (r.user_id, r.key.clone());
        match gate.markers.get(&marker_key) {
            Some(Marker::Done { quantity, order }) if *quantity == r.quantity => {
                return Ok(ReserveOutcome::Replay(*order));
            }
            Some(Marker::InProgress { quantity }) if *quantity == r.quantity => {
                return Ok(ReserveOutcome::InProgress);
            }
            Some(_) => return Ok(ReserveOutcome::KeyReused),
            None => {}
        }
        let wanted = r.quantity.get();
        if gate.remaining < wanted {
            return Ok(ReserveOutcome::SoldOut {
                remaining: gate.remaining,
            });
        }
        let held = gate.held.get(&r.user_id).copied().unwrap_or(0);
        if held.saturating_add(wanted) > r.per_user_limit.get() {
            return Ok(ReserveOutcome::PerUserLimitExceeded {
                limit: r.per_user_limit.get(),
            });
        }
        gate.remaining -= wanted;
        gate.held.insert(r.user_id, held + wanted);
        gate.markers.insert(
            marker_key,
            Marker::InProgress {
                quantity: r.quantity,
            },
        );
        Ok(ReserveOutcome::Admitted)
    }

    async fn confirm(&self, r: &Reservation, order: OrderId) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        if let Some(gate) = drops.get_mut(&r.drop_id) {
            gate.markers.insert(
                (r.user_id, r.key.clone()),
                Marker::Done {
                    quantity: r.quantity,
                    order,
                },
            );
        }
        Ok(())
    }

    async fn cancel(&self, r: &Reservation) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        let Some(gate) = drops.get_mut(&r.drop_id) else {
            return Ok(());
        };
        // Only an in-progress marker holds units: removing it is what makes cancel run once.
        let key = (r.user_id, r.key.clone());
        if let Some(Marker::InProgress { quantity }) = gate.markers.get(&key).copied() {
            gate.markers.remove(&key);
            gate.remaining += quantity.get();
            if let Some(held) = gate.held.get_mut(&r.user_id) {
                *held = held.saturating_sub(quantity.get());
            }
        }
        Ok(())
    }

    async fn release(
        &self,
        drop_id: DropId,
        user_id: UserId,
        quantity: Quantity,
    ) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        if let Some(gate) = drops.get_mut(&drop_id) {
            gate.remaining += quantity.get();
            if let Some(held) = gate.held.get_mut(&user_id) {
                *held = held.saturating_sub(quantity.get());
            }
        }
        Ok(())
    }

    async fn remaining(&self, drop_id: DropId) -> Result<Option<u32>, InfraError> {
        Ok(self.lock()?.get(&drop_id).map(|g| g.remaining))
    }
}
