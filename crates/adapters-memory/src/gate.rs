//! The in-process admission gate: the Redis gate's semantics behind one mutex, for a single
//! instance (embedded mode, tests). It is rebuilt from the database after a restart.

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

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::ports::HeldOrder;
    use std::sync::Arc;
    use time::macros::datetime;

    fn seed(remaining: u32) -> GateSeed {
        GateSeed {
            drop_id: DropId::parse(1).unwrap(),
            remaining,
            expires_at: datetime!(2030-01-01 00:00 UTC),
            orders: Vec::new(),
        }
    }

    fn res(user: i64, key: &str, quantity: i64, limit: i64) -> Reservation {
        Reservation {
            drop_id: DropId::parse(1).unwrap(),
            user_id: UserId::parse(user).unwrap(),
            quantity: Quantity::parse("quantity", quantity).unwrap(),
            per_user_limit: Quantity::parse("perUserLimit", limit).unwrap(),
            key: IdempotencyKey::parse(key).unwrap(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_reservations_admit_exactly_the_units_seeded() {
        let gate = Arc::new(MemoryGate::default());
        gate.seed_if_absent(&seed(100)).await.unwrap();
        let tasks: Vec<_> = (1..=500)
            .map(|user| {
                let gate = Arc::clone(&gate);
                tokio::spawn(async move { gate.reserve(&res(user, "k", 1, 1)).await.unwrap() })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            if task.await.unwrap() == ReserveOutcome::Admitted {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 100);
        assert_eq!(
            gate.remaining(DropId::parse(1).unwrap()).await.unwrap(),
            Some(0)
        );
    }

    #[tokio::test]
    async fn unseeded_drops_ask_to_be_seeded_and_seeding_twice_changes_nothing() {
        let gate = MemoryGate::default();
        assert_eq!(
            gate.reserve(&res(1, "k", 1, 1)).await.unwrap(),
            ReserveOutcome::NotSeeded
        );
        gate.seed_if_absent(&seed(5)).await.unwrap();
        gate.reserve(&res(1, "k", 1, 1)).await.unwrap();
        gate.seed_if_absent(&seed(5)).await.unwrap();
        assert_eq!(
            gate.remaining(DropId::parse(1).unwrap()).await.unwrap(),
            Some(4)
        );
    }

    #[tokio::test]
    async fn markers_go_in_progress_then_done_and_a_different_body_is_a_reuse() {
        let gate = MemoryGate::default();
        gate.seed_if_absent(&seed(5)).await.unwrap();
        let first = res(1, "k", 1, 2);
        assert_eq!(
            gate.reserve(&first).await.unwrap(),
            ReserveOutcome::Admitted
        );
        assert_eq!(
            gate.reserve(&first).await.unwrap(),
            ReserveOutcome::InProgress
        );
        assert_eq!(
            gate.reserve(&res(1, "k", 2, 2)).await.unwrap(),
            ReserveOutcome::KeyReused
        );
        let order = OrderId::parse(7).unwrap();
        gate.confirm(&first, order).await.unwrap();
        assert_eq!(
            gate.reserve(&first).await.unwrap(),
            ReserveOutcome::Replay(order)
        );
    }

    #[tokio::test]
    async fn cancelling_twice_gives_the_units_back_once() {
        let gate = MemoryGate::default();
        gate.seed_if_absent(&seed(5)).await.unwrap();
        let r = res(1, "k", 2, 2);
        gate.reserve(&r).await.unwrap();
        gate.cancel(&r).await.unwrap();
        gate.cancel(&r).await.unwrap();
        assert_eq!(
            gate.remaining(DropId::parse(1).unwrap()).await.unwrap(),
            Some(5)
        );
        assert_eq!(gate.reserve(&r).await.unwrap(), ReserveOutcome::Admitted);
    }

    #[tokio::test]
    async fn the_per_user_limit_counts_units_already_held_and_sold_out_comes_first() {
        let gate = MemoryGate::default();
        gate.seed_if_absent(&seed(3)).await.unwrap();
        assert_eq!(
            gate.reserve(&res(1, "a", 2, 2)).await.unwrap(),
            ReserveOutcome::Admitted
        );
        assert_eq!(
            gate.reserve(&res(1, "b", 1, 2)).await.unwrap(),
            ReserveOutcome::PerUserLimitExceeded { limit: 2 }
        );
        assert_eq!(
            gate.reserve(&res(1, "c", 2, 2)).await.unwrap(),
            ReserveOutcome::SoldOut { remaining: 1 }
        );
    }

    #[tokio::test]
    async fn a_seed_restores_buyer_counts_and_replay_markers_from_the_database() {
        let gate = MemoryGate::default();
        let order = OrderId::parse(3).unwrap();
        let mut s = seed(4);
        s.orders.push(HeldOrder {
            order_id: order,
            user_id: UserId::parse(1).unwrap(),
            key: IdempotencyKey::parse("k").unwrap(),
            quantity: Quantity::parse("quantity", 1).unwrap(),
            live: true,
        });
        gate.seed_if_absent(&s).await.unwrap();
        assert_eq!(
            gate.reserve(&res(1, "k", 1, 1)).await.unwrap(),
            ReserveOutcome::Replay(order)
        );
        assert_eq!(
            gate.reserve(&res(1, "other", 1, 1)).await.unwrap(),
            ReserveOutcome::PerUserLimitExceeded { limit: 1 }
        );
    }
}
