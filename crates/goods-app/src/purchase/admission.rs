//! Admission: the gate reserves the buyer's units before the database is asked, and is told
//! what the database decided. A gate that fails is skipped: the database decides alone, and the
//! gate is resynced when it is back.

use super::{Asked, Chosen, PurchaseError, PurchaseHooks, Purchased, Purchases, place_order};
use crate::mechanisms::group_commit::Commit;
use crate::telemetry;
use goods_domain::ports::{
    AdmissionGate, DomainEvent, PlaceOrder, PurchaseLedger, Reservation, ReserveOutcome,
    StaleReservation, StaleResolution,
};
use goods_domain::{InfraError, LimitedDrop, OrderId};
use std::sync::Arc;
use time::OffsetDateTime;

impl Purchases {
    /// The purchase through the gate: reserve, then commit what it admitted, then settle it.
    pub(super) async fn through_gate(
        &self,
        hooks: &dyn PurchaseHooks,
        gate: Arc<dyn AdmissionGate>,
        drop: &LimitedDrop,
        cmd: Chosen,
        now: OffsetDateTime,
        bucket: Option<goods_domain::RateLimit>,
    ) -> Result<Purchased, PurchaseError> {
        let reservation = Reservation {
            bucket,
            ..reservation(drop, cmd, now.saturating_add(self.lease))
        };
        let asked = std::time::Instant::now();
        let reserved = self.reserve(gate.as_ref(), drop, &reservation).await;
        let result = if reserved.is_ok() {
            "answered"
        } else {
            "failed"
        };
        telemetry::gate_decision(result, asked.elapsed());
        match reserved {
            Ok(outcome) => {
                if self.access.breaker.reset() {
                    hooks.gate_is_back();
                }
                self.after_reserve(hooks, &gate, drop, outcome, &reservation, now, true)
                    .await
            }
            Err(error) => {
                // Degraded: the gate's answer is unknown (a timeout may even have taken the
                // units). The database alone keeps every invariant, so it decides, and the
                // next purchases skip the gate until its breaker lets one try again.
                metrics::counter!(telemetry::GATE_FALLBACKS, "reason" => "gate_failed")
                    .increment(1);
                if self.access.breaker.trip() {
                    metrics::counter!(telemetry::GATE_DEGRADED_EVENTS).increment(1);
                    tracing::warn!(error = %error, "gate_degraded: purchases fall back to the database");
                    let event = DomainEvent::GateDegraded {
                        reason: error.to_string(),
                    };
                    if let Err(error) = self.events.publish(event).await {
                        tracing::warn!(error = %error, "gate_degraded event not published");
                    }
                }
                hooks.gate_bypassed(drop.id, true).await;
                let result = self
                    .commit(Commit {
                        order: place_order_for(drop, &reservation, now, self.payment_window),
                        confirm_at: None,
                    })
                    .await;
                // If the gate did reserve, settle it like any admitted reservation, so a
                // retry replays the order instead of finding it in progress. In the
                // background: the gate has just failed, so the settle would most likely wait
                // out the same timeout, and the buyer's answer does not depend on it (a settle
                // that is lost is healed when the reservation's lease ends).
                let settling = settlement(&result);
                self.tasks.spawn(async move {
                    settle(gate.as_ref(), &reservation, settling, true).await;
                });
                result
            }
        }
    }

    /// Reserves at the gate, seeding it from the database once if it holds nothing yet (the
    /// second try is the same request: its bucket was charged by the first).
    async fn reserve(
        &self,
        gate: &dyn AdmissionGate,
        drop: &LimitedDrop,
        reservation: &Reservation,
    ) -> Result<ReserveOutcome, InfraError> {
        match gate.reserve(reservation).await? {
            ReserveOutcome::NotSeeded => {
                // Every buyer of the drop finds it empty at once: one of them seeds it.
                self.seedings
                    .run(drop.id, || async {
                        let seed = self.drop_store.gate_seed(drop).await.map_err(Arc::new)?;
                        gate.seed_if_absent(&seed).await.map_err(Arc::new)
                    })
                    .await
                    .map_err(|error| crate::mechanisms::single_flight::unshared(&error))?;
                let again = Reservation {
                    bucket: None,
                    ..reservation.clone()
                };
                match gate.reserve(&again).await? {
                    ReserveOutcome::NotSeeded => Err(InfraError::msg("gate lost its seed twice")),
                    outcome => Ok(outcome),
                }
            }
            outcome => Ok(outcome),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn after_reserve(
        &self,
        hooks: &dyn PurchaseHooks,
        gate: &Arc<dyn AdmissionGate>,
        drop: &LimitedDrop,
        outcome: ReserveOutcome,
        reservation: &Reservation,
        now: OffsetDateTime,
        may_resolve: bool,
    ) -> Result<Purchased, PurchaseError> {
        match outcome {
            ReserveOutcome::Admitted => {
                // The ledger command is built only for admitted purchases: refusals, the bulk
                // of a drop's traffic, allocate nothing for it.
                // The committer confirms the order at the gate with its batch.
                let result = self
                    .commit(Commit {
                        order: place_order_for(drop, reservation, now, self.payment_window),
                        confirm_at: Some((Arc::clone(gate), reservation.clone())),
                    })
                    .await;
                if matches!(
                    result,
                    Err(PurchaseError::SoldOut { .. } | PurchaseError::PerUserLimitExceeded { .. })
                ) {
                    // The gate admitted what the database refuses: its counter or holdings
                    // are off (a sale it did not see). Rebuild it from the truth.
                    hooks.resync_soon(drop.clone());
                }
                if !matches!(
                    result,
                    Ok(Purchased {
                        replayed: false,
                        ..
                    })
                ) {
                    settle(gate.as_ref(), reservation, settlement(&result), false).await;
                }
                result
            }
            ReserveOutcome::InProgress { deadline } if may_resolve && now > deadline => {
                // The first attempt's lease has passed (its process died, or its settle was
                // lost): the database decides, then this request replays or starts afresh.
                let stale = StaleReservation {
                    user_id: reservation.user_id,
                    key: reservation.key.clone(),
                    sku: reservation.sku.clone(),
                    quantity: reservation.quantity,
                    deadline,
                };
                match resolve_stale(self.ledger.as_ref(), gate.as_ref(), drop, &stale).await? {
                    StaleResolution::Committed(order) => {
                        if order.matches_request(
                            drop.id,
                            reservation.sku.as_ref(),
                            reservation.quantity,
                        ) {
                            Ok(Purchased {
                                order,
                                replayed: true,
                            })
                        } else {
                            Err(PurchaseError::KeyReused)
                        }
                    }
                    StaleResolution::Pending => Err(PurchaseError::InProgress),
                    StaleResolution::Abandoned => {
                        // The same request again: its bucket was charged by the first try.
                        let reservation = &Reservation {
                            bucket: None,
                            ..reservation.clone()
                        };
                        let outcome = self.reserve(gate.as_ref(), drop, reservation).await?;
                        Box::pin(self.after_reserve(
                            hooks,
                            gate,
                            drop,
                            outcome,
                            reservation,
                            now,
                            false,
                        ))
                        .await
                    }
                }
            }
            ReserveOutcome::Replay(id) => {
                // The gate's marker is a hint: the answer is the database's order, and only if
                // it is this buyer's, for this key, drop and quantity. Anyone who can write to
                // the gate's store must not make a buyer see another's order.
                let hinted = self.orders.get(id).await?;
                if let Some(order) = hinted.filter(|o| {
                    o.answers(
                        reservation.user_id,
                        &reservation.key,
                        drop.id,
                        reservation.sku.as_ref(),
                        reservation.quantity,
                    )
                }) {
                    return Ok(Purchased {
                        order,
                        replayed: true,
                    });
                }
                metrics::counter!(telemetry::GATE_MARKER_MISMATCHES).increment(1);
                tracing::warn!(order.id = %id, "a gate marker names an order that does not answer this request; the database decides, and the drop is resynced");
                hooks.resync_soon(drop.clone());
                let cmd = Chosen {
                    drop_id: drop.id,
                    user_id: reservation.user_id,
                    sku: reservation.sku.clone(),
                    quantity: reservation.quantity,
                    key: reservation.key.clone(),
                };
                // Nothing of this request in the database: the marker is false, and the resync
                // drops it; until then the buyer is asked to retry.
                self.find_replay(&cmd).await?.ok_or_else(|| {
                    InfraError::unavailable("the gate holds a marker the database does not").into()
                })
            }
            ReserveOutcome::InProgress { .. } => Err(PurchaseError::InProgress),
            ReserveOutcome::KeyReused => Err(PurchaseError::KeyReused),
            ReserveOutcome::SoldOut { remaining } => Err(PurchaseError::SoldOut {
                remaining,
                sku: None,
            }),
            ReserveOutcome::PerUserLimitExceeded { limit } => {
                Err(PurchaseError::PerUserLimitExceeded { limit })
            }
            ReserveOutcome::NotSeeded => {
                Err(InfraError::msg("gate not seeded after seeding").into())
            }
            ReserveOutcome::RateLimited(decision) => match &self.fleet_bucket {
                Some(fleet) => Err(PurchaseError::RateLimited(
                    fleet.refused(reservation.user_id, decision),
                )),
                None => Err(InfraError::msg("the gate charged a bucket it was not given").into()),
            },
        }
    }
}

/// What the gate is told once the database has decided. An unknown outcome (or a missed
/// settle) leaves the marker to its lease: the key's retry or the healer resolves it.
enum Settlement {
    /// Committed as this order.
    Confirm(OrderId),
    /// Not committed: the units go back.
    Cancel,
    /// Unknown (the database did not answer): the reservation's lease decides later.
    Leave,
}

fn settlement(result: &Result<Purchased, PurchaseError>) -> Settlement {
    match result {
        Ok(Purchased {
            order,
            replayed: false,
        }) => Settlement::Confirm(order.id),
        Err(PurchaseError::Infra(_)) => Settlement::Leave,
        _ => Settlement::Cancel,
    }
}

async fn settle(
    gate: &dyn AdmissionGate,
    reservation: &Reservation,
    settlement: Settlement,
    degraded: bool,
) {
    let settled = match settlement {
        Settlement::Confirm(order) => gate.confirm(reservation, order).await,
        Settlement::Cancel => gate.cancel(reservation).await,
        Settlement::Leave => return,
    };
    match settled {
        Ok(()) => {}
        Err(error) if degraded => tracing::debug!(error = %error, "gate still unreachable"),
        Err(error) => tracing::warn!(error = %error, "gate not settled after the database decided"),
    }
}

fn reservation(drop: &LimitedDrop, cmd: Chosen, deadline: OffsetDateTime) -> Reservation {
    Reservation {
        drop_id: drop.id,
        user_id: cmd.user_id,
        sku: cmd.sku,
        quantity: cmd.quantity,
        per_user_limit: drop.per_user_limit,
        key: cmd.key,
        deadline,
        bucket: None,
    }
}

fn place_order_for(
    drop: &LimitedDrop,
    r: &Reservation,
    now: OffsetDateTime,
    default_window: goods_domain::PaymentWindow,
) -> PlaceOrder {
    place_order(
        drop,
        Asked {
            user_id: r.user_id,
            sku: r.sku.as_ref(),
            quantity: r.quantity,
            key: &r.key,
        },
        now,
        Some(r.deadline),
        default_window,
    )
}

/// Decides a stale reservation (its lease passed with no answer) with the database, and tells
/// the gate: confirmed when its order committed, given back when it never will.
pub(crate) async fn resolve_stale(
    ledger: &dyn PurchaseLedger,
    gate: &dyn AdmissionGate,
    drop: &LimitedDrop,
    stale: &StaleReservation,
) -> Result<StaleResolution, InfraError> {
    let resolution = ledger
        .resolve_stale(stale.user_id, &stale.key, stale.deadline)
        .await?;
    let reservation = Reservation {
        drop_id: drop.id,
        user_id: stale.user_id,
        // The attempt's own size: its marker, and the units a cancel gives back, are that size's.
        sku: stale.sku.clone(),
        quantity: stale.quantity,
        per_user_limit: drop.per_user_limit,
        key: stale.key.clone(),
        deadline: stale.deadline,
        bucket: None,
    };
    match &resolution {
        StaleResolution::Committed(order) if order.drop_id == drop.id => {
            gate.confirm(&reservation, order.id).await?;
            metrics::counter!(telemetry::STALE_RESOLVED, "resolution" => "committed").increment(1);
            tracing::info!(user.id = %stale.user_id, order.id = %order.id, "stale reservation had committed; confirmed");
        }
        // No order of this drop for the key: this attempt will never commit.
        StaleResolution::Committed(_) | StaleResolution::Abandoned => {
            gate.cancel(&reservation).await?;
            metrics::counter!(telemetry::STALE_RESOLVED, "resolution" => "abandoned").increment(1);
            tracing::info!(user.id = %stale.user_id, "stale reservation abandoned; units given back");
        }
        StaleResolution::Pending => {}
    }
    Ok(resolution)
}
