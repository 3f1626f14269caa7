//! The in-process admission gate: the Redis gate's semantics behind one mutex, for a single
//! instance (embedded mode, tests). It is rebuilt from the database after a restart. Both gates
//! pass the same contract suite (`test_support::gate_contract`, run in `tests/contract.rs`).

use async_trait::async_trait;
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{
    AdmissionGate, GateSeed, Reservation, ReserveOutcome, StaleReservation, from_unix_ms,
};
use goods_domain::{DropId, IdempotencyKey, InfraError, OrderId, Quantity, Sku, UserId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use time::OffsetDateTime;

/// A (buyer, key) pair's marker: its size and units, and where the attempt stands.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Marker {
    sku: Option<Sku>,
    quantity: Quantity,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Admitted, not settled; the lease ends at `deadline_ms` (unix ms, as the Redis gate).
    InProgress {
        deadline_ms: i64,
    },
    Done {
        order: OrderId,
    },
}

impl Marker {
    fn in_progress(r: &Reservation) -> Self {
        Self {
            sku: r.sku.clone(),
            quantity: r.quantity,
            state: State::InProgress {
                deadline_ms: r.deadline_ms(),
            },
        }
    }

    /// Whether it was written for the same request as `r` (same size and units).
    fn answers(&self, r: &Reservation) -> bool {
        self.sku == r.sku && self.quantity == r.quantity
    }
}

impl DropGate {
    /// The gate as the database's truth says it should be, keeping what is in flight: an
    /// in-progress marker, or a done marker of an order the seed does not list yet (it
    /// committed after the seed was read), keeps its units taken.
    fn rebuilt(seed: &GateSeed, previous: Option<&DropGate>) -> DropGate {
        let mut gate = DropGate {
            expires_at: Some(seed.expires_at.saturating_add(GRACE)),
            remaining: seed.remaining.clone(),
            ..DropGate::default()
        };
        for order in &seed.orders {
            if order.live {
                *gate.held.entry(order.user_id).or_default() += order.quantity.get();
            }
            gate.markers.insert(
                (order.user_id, order.key.clone()),
                Marker {
                    sku: order.sku.clone(),
                    quantity: order.quantity,
                    state: State::Done {
                        order: order.order_id,
                    },
                },
            );
        }
        for ((user, key), marker) in previous.map(|p| &p.markers).into_iter().flatten() {
            let field = (*user, key.clone());
            if gate.markers.contains_key(&field) || seed.unexplained.contains(&field) {
                continue;
            }
            if let Some(left) = gate.remaining.get_mut(&marker.sku) {
                *left = left.saturating_sub(marker.quantity.get());
            }
            *gate.held.entry(*user).or_default() += marker.quantity.get();
            gate.markers.insert(field, marker.clone());
        }
        gate
    }
}

impl DropGate {
    /// Gives `quantity` units back to the size `sku` and to the buyer's count.
    fn give_back(&mut self, user: UserId, sku: Option<Sku>, quantity: Quantity) {
        *self.remaining.entry(sku).or_default() += quantity.get();
        if let Some(held) = self.held.get_mut(&user) {
            *held = held.saturating_sub(quantity.get());
        }
    }
}

#[derive(Debug, Default)]
struct DropGate {
    /// When the gate may forget the drop: an hour after its `closeAt`, as Redis's keys expire.
    expires_at: Option<OffsetDateTime>,
    /// Units left per size (one, `None`, for a drop without sizes).
    remaining: FreeUnits,
    held: HashMap<UserId, u32>,
    markers: HashMap<(UserId, IdempotencyKey), Marker>,
}

/// The single-instance admission gate.
#[derive(Debug, Default)]
pub struct MemoryGate {
    drops: Mutex<HashMap<DropId, DropGate>>,
}

/// How long after `closeAt` a drop's state is kept (purchases in flight at close settle).
const GRACE: time::Duration = time::Duration::hours(1);

impl MemoryGate {
    fn lock(&self) -> Result<MutexGuard<'_, HashMap<DropId, DropGate>>, InfraError> {
        self.drops
            .lock()
            .map_err(|_| InfraError::msg("gate lock poisoned"))
    }

    /// Forgets drops past their expiry, so per-drop and per-buyer state does not outlive the
    /// sale; runs whenever a drop is seeded, resynced or closed.
    fn evict_expired(drops: &mut HashMap<DropId, DropGate>) {
        let now = OffsetDateTime::now_utc();
        drops.retain(|_, gate| gate.expires_at.is_none_or(|at| at > now));
    }

    /// How many drops it holds state for.
    pub fn drops_held(&self) -> usize {
        self.drops.lock().map(|d| d.len()).unwrap_or(0)
    }
}

#[async_trait]
impl AdmissionGate for MemoryGate {
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        Self::evict_expired(&mut drops);
        drops
            .entry(seed.drop_id)
            .or_insert_with(|| DropGate::rebuilt(seed, None));
        Ok(())
    }

    async fn resync(&self, seed: &GateSeed) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        Self::evict_expired(&mut drops);
        let gate = DropGate::rebuilt(seed, drops.get(&seed.drop_id));
        drops.insert(seed.drop_id, gate);
        Ok(())
    }

    async fn done_markers(
        &self,
        drop_id: DropId,
    ) -> Result<Vec<(UserId, IdempotencyKey)>, InfraError> {
        let drops = self.lock()?;
        Ok(drops
            .get(&drop_id)
            .map(|gate| {
                gate.markers
                    .iter()
                    .filter(|(_, marker)| matches!(marker.state, State::Done { .. }))
                    .map(|(field, _)| field.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn stale(
        &self,
        drop_id: DropId,
        now: OffsetDateTime,
    ) -> Result<Vec<StaleReservation>, InfraError> {
        let drops = self.lock()?;
        let Some(gate) = drops.get(&drop_id) else {
            return Ok(Vec::new());
        };
        let now_ms = goods_domain::ports::unix_ms(now);
        Ok(gate
            .markers
            .iter()
            .filter_map(|((user, key), marker)| match marker.state {
                State::InProgress { deadline_ms } if deadline_ms < now_ms => {
                    Some(StaleReservation {
                        user_id: *user,
                        key: key.clone(),
                        sku: marker.sku.clone(),
                        quantity: marker.quantity,
                        deadline: from_unix_ms(deadline_ms)?,
                    })
                }
                _ => None,
            })
            .collect())
    }

    async fn reserve(&self, r: &Reservation) -> Result<ReserveOutcome, InfraError> {
        if r.bucket.is_some() {
            // It keeps none (`keeps_buckets` is false), so none is given to it.
            return Err(InfraError::msg(
                "the in-process gate keeps no buyer's bucket",
            ));
        }
        let mut drops = self.lock()?;
        let Some(gate) = drops.get_mut(&r.drop_id) else {
            return Ok(ReserveOutcome::NotSeeded);
        };
        let marker_key = (r.user_id, r.key.clone());
        match gate.markers.get(&marker_key) {
            Some(marker) if !marker.answers(r) => return Ok(ReserveOutcome::KeyReused),
            Some(Marker {
                state: State::Done { order },
                ..
            }) => return Ok(ReserveOutcome::Replay(*order)),
            Some(Marker {
                state: State::InProgress { deadline_ms },
                ..
            }) => {
                return Ok(ReserveOutcome::InProgress {
                    deadline: from_unix_ms(*deadline_ms)
                        .ok_or_else(|| InfraError::msg("corrupt lease"))?,
                });
            }
            None => {}
        }
        let wanted = r.quantity.get();
        // A size the drop does not sell has nothing left.
        let left = gate.remaining.get(&r.sku).copied().unwrap_or(0);
        if left < wanted {
            return Ok(ReserveOutcome::SoldOut { remaining: left });
        }
        let held = gate.held.get(&r.user_id).copied().unwrap_or(0);
        if held.saturating_add(wanted) > r.per_user_limit.get() {
            return Ok(ReserveOutcome::PerUserLimitExceeded {
                limit: r.per_user_limit.get(),
            });
        }
        gate.remaining.insert(r.sku.clone(), left - wanted);
        gate.held.insert(r.user_id, held + wanted);
        gate.markers.insert(marker_key, Marker::in_progress(r));
        Ok(ReserveOutcome::Admitted)
    }

    async fn confirm(&self, r: &Reservation, order: OrderId) -> Result<(), InfraError> {
        self.confirm_all(std::slice::from_ref(&(r.clone(), order)))
            .await
    }

    async fn confirm_all(&self, confirmed: &[(Reservation, OrderId)]) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        for (r, order) in confirmed {
            if let Some(gate) = drops.get_mut(&r.drop_id) {
                gate.markers.insert(
                    (r.user_id, r.key.clone()),
                    Marker {
                        sku: r.sku.clone(),
                        quantity: r.quantity,
                        state: State::Done { order: *order },
                    },
                );
            }
        }
        Ok(())
    }

    async fn cancel(&self, r: &Reservation) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        let Some(gate) = drops.get_mut(&r.drop_id) else {
            return Ok(());
        };
        // Only an in-progress marker holds units: removing it is what makes cancel run once.
        // It must be this attempt's (same units and lease), not a later one with the same key.
        let key = (r.user_id, r.key.clone());
        if gate.markers.get(&key) == Some(&Marker::in_progress(r)) {
            gate.markers.remove(&key);
            gate.give_back(r.user_id, r.sku.clone(), r.quantity);
        }
        Ok(())
    }

    async fn release(
        &self,
        drop_id: DropId,
        user_id: UserId,
        sku: Option<Sku>,
        quantity: Quantity,
    ) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        if let Some(gate) = drops.get_mut(&drop_id) {
            gate.give_back(user_id, sku, quantity);
        }
        Ok(())
    }

    async fn closed(&self, drop_id: DropId, at: OffsetDateTime) -> Result<(), InfraError> {
        let mut drops = self.lock()?;
        if let Some(gate) = drops.get_mut(&drop_id) {
            let release = at.saturating_add(GRACE);
            gate.expires_at = Some(gate.expires_at.map_or(release, |e| e.min(release)));
        }
        // As Redis drops a key whose expiry has passed.
        Self::evict_expired(&mut drops);
        Ok(())
    }

    async fn remaining(&self, drop_id: DropId) -> Result<Option<FreeUnits>, InfraError> {
        Ok(self.lock()?.get(&drop_id).map(|g| g.remaining.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(drop: i64, closed_ago: time::Duration) -> GateSeed {
        GateSeed {
            unexplained: Vec::new(),
            drop_id: DropId::parse(drop).unwrap_or_else(|_| unreachable!()),
            remaining: goods_domain::ports::whole_units(1),
            expires_at: OffsetDateTime::now_utc() - closed_ago,
            orders: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_drop_is_forgotten_an_hour_after_it_closed() {
        let gate = MemoryGate::default();
        let held = async |gate: &MemoryGate, drop, closed_ago| {
            gate.seed_if_absent(&seed(drop, closed_ago))
                .await
                .unwrap_or_else(|_| unreachable!());
            gate.drops_held()
        };
        assert_eq!(held(&gate, 1, time::Duration::minutes(61)).await, 1);
        assert_eq!(
            held(&gate, 2, time::Duration::minutes(59)).await,
            1,
            "drop 1 is gone once another drop is seeded"
        );
        assert_eq!(
            held(&gate, 3, time::Duration::ZERO).await,
            2,
            "drop 2 is still in its grace hour"
        );
    }
}
