//! The healing pass over every open or recently closed drop.

use super::{CLOSED_GRACE, HealReport, RELAY_BATCH};
use crate::GoodsApp;
use goods_domain::ports::{StaleResolution, units_in_all};
use goods_domain::variant::any_oversold;
use goods_domain::{InfraError, LimitedDrop, SizeCount};
use tracing::Instrument as _;

impl GoodsApp {
    /// One healing pass over every open or recently closed drop; one drop's failure is counted
    /// in [`HealReport::failed`], not returned.
    pub async fn heal_all(&self) -> Result<HealReport, InfraError> {
        let now = self.ports.clock.now();
        self.drops.prune(now, CLOSED_GRACE);
        let drops = self
            .ports
            .drops
            .list_unclosed(now.saturating_sub(CLOSED_GRACE))
            .await?;
        let mut report = HealReport {
            drops: drops.len(),
            ..HealReport::default()
        };
        for drop in &drops {
            if let Err(error) = self.heal_drop(drop, &mut report).await {
                report.failed += 1;
                tracing::warn!(drop.id = %drop.id, error = %error, "healing the drop failed");
            }
        }
        match self.orders().expire_overdue().await {
            Ok(expired) => report.expired = expired,
            Err(error) => {
                report.failed += 1;
                tracing::warn!(error = %error, "expiring unpaid orders failed");
            }
        }
        match self.relay_outbox().await {
            Ok(relayed) => report.relayed = relayed,
            Err(error) => tracing::warn!(error = %error, "outbox relay failed"),
        }
        if let Some(retention) = self.event_retention {
            match self.events().prune(now, retention).await {
                Ok(pruned) => report.pruned = pruned,
                Err(error) => tracing::warn!(error = %error, "pruning the event log failed"),
            }
        }
        if report.failed == 0 {
            metrics::gauge!(crate::telemetry::LAST_PASS).set(now.unix_timestamp() as f64);
        }
        Ok(report)
    }

    pub(super) async fn heal_drop(
        &self,
        drop: &LimitedDrop,
        report: &mut HealReport,
    ) -> Result<(), InfraError> {
        let now = self.ports.clock.now();
        let sold = self.ports.drops.sold_by_size(drop.id).await?;
        // Size by size: an oversold size is an oversell even when the drop's total is not.
        let counts = drop.sizes.counts(&sold, None);
        if any_oversold(&counts) {
            crate::operations::reconcile::raise_oversell(
                &*self.ports.outbox,
                self.ports.clock.now(),
                drop,
                &counts,
            )
            .await;
        }
        // A draw drop is never in the gate: its draw, and its waitlist, are what to tend (the
        // draws' own schedule does it too, for the draw drops this instance holds).
        if drop.mode.is_draw() {
            let draws = self.draws();
            if draws.run(drop).await? {
                report.draws += 1;
            }
            report.promoted += draws.promote_waitlist(drop).await?;
            return Ok(());
        }
        let Some(gate) = self.gate().cloned() else {
            return Ok(());
        };
        for stale in gate.stale(drop.id, now).await? {
            if crate::purchase::resolve_stale(
                self.ports.ledger.as_ref(),
                gate.as_ref(),
                drop,
                &stale,
            )
            .await?
                != StaleResolution::Pending
            {
                report.stale_resolved += 1;
            }
        }
        if drop.is_closed(now) {
            return Ok(());
        }
        let needs_resync = match gate.remaining(drop.id).await? {
            // Redis lost the drop (restarted empty, or flushed): seed it before anyone asks.
            None => true,
            // Sold was read first: a purchase admitted in between shows as positive drift for
            // one pass, which the two-pass rule ignores.
            Some(remaining) => match gate_drift(&drop.sizes.counts(&sold, Some(&remaining))) {
                // A size the gate holds no counter for: rebuild every size.
                None => true,
                Some(drift) => {
                    let id = drop.id.to_string();
                    metrics::gauge!(crate::telemetry::DRIFT, "drop_id" => id.clone())
                        .set(drift as f64);
                    metrics::gauge!(crate::telemetry::GATE_REMAINING, "drop_id" => id)
                        .set(f64::from(units_in_all(&remaining)));
                    if drift < 0 {
                        self.confirm_gate_oversell(drop).await?;
                    }
                    self.healing.drift_calls_for_resync(drop.id, drift)
                }
            },
        };
        if needs_resync && self.resync_drop(drop).await? {
            report.resynced += 1;
        }
        Ok(())
    }

    /// Negative drift: the gate would admit more units than the database can still sell, the
    /// design document's own definition of an oversell at the gate. A cancel or expiry racing
    /// this pass's two reads can show it for a moment, so it is read again: confirmed, it is
    /// counted and logged as critical (`source=oversell`); the caller resyncs either way.
    pub(super) async fn confirm_gate_oversell(&self, drop: &LimitedDrop) -> Result<(), InfraError> {
        let Some(gate) = self.gate() else {
            return Ok(());
        };
        let sold = self.ports.drops.sold_by_size(drop.id).await?;
        let Some(remaining) = gate.remaining(drop.id).await? else {
            return Ok(());
        };
        let drift = gate_drift(&drop.sizes.counts(&sold, Some(&remaining))).unwrap_or(0);
        if drift < 0 {
            metrics::counter!(crate::telemetry::GATE_OVERSELLS).increment(1);
            tracing::error!(
                source = "oversell",
                severity = "critical",
                kind = "gate",
                drop.id = %drop.id,
                sold = units_in_all(&sold),
                gate_remaining = units_in_all(&remaining),
                drift,
                "the gate admits more than the database can sell; resyncing it from the database"
            );
        }
        Ok(())
    }

    /// Hands recorded events to the publisher, each under its outbox id, then marks them.
    pub(super) async fn relay_outbox(&self) -> Result<usize, InfraError> {
        let entries = self.ports.outbox.unpublished(RELAY_BATCH).await?;
        let mut relayed = 0;
        for entry in entries {
            let span = tracing::info_span!("outbox", event.id = entry.id);
            self.ports
                .events
                .publish(entry.event)
                .instrument(span)
                .await?;
            self.ports
                .outbox
                .mark_published(entry.id, self.ports.clock.now())
                .await?;
            relayed += 1;
        }
        Ok(relayed)
    }
}

/// The drift healing acts on: the most negative size's when one is below zero (the gate would
/// admit more of that size than the database can sell, whatever the others hold back), else
/// the sum of the sizes' ([`SizeCount::drift`]); `None` when the gate lacks a size's counter.
fn gate_drift(counts: &[SizeCount]) -> Option<i64> {
    let drifts: Vec<i64> = counts.iter().map(SizeCount::drift).collect::<Option<_>>()?;
    let worst = drifts.iter().copied().min().unwrap_or(0);
    Some(if worst < 0 {
        worst
    } else {
        drifts.iter().sum()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{
        GateSeed, MockAdmissionGate, OutboxEntry, Placed, ReserveOutcome, StaleReservation,
    };
    use goods_domain::{DropId, Fact, IdempotencyKey, OrderStatus};
    use std::sync::{Arc, Mutex};
    use time::Duration;

    /// Mocks for a pass over the one sample drop (100 units) with `sold` units sold and an
    /// empty outbox.
    fn pass_over(sold: u32) -> Mocks {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_list_unclosed()
            .returning(|_| Ok(vec![sample_drop(100, 2)]));
        m.drops
            .expect_sold_by_size()
            .returning(move |_| Ok(goods_domain::ports::whole_units(sold)));
        m.drops.expect_gate_seed().returning(move |drop| {
            Ok(GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: goods_domain::ports::whole_units(100 - sold),
                expires_at: CLOSE,
                orders: Vec::new(),
            })
        });
        m.outbox.expect_unpublished().returning(|_| Ok(Vec::new()));
        m
    }

    fn gate_with(remaining: Vec<Option<u32>>) -> MockAdmissionGate {
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_stale().returning(|_, _| Ok(Vec::new()));
        let mut remaining = remaining.into_iter();
        gate.expect_remaining().returning(move |_| {
            Ok(remaining
                .next()
                .unwrap_or(Some(0))
                .map(goods_domain::ports::whole_units))
        });
        gate
    }

    #[tokio::test]
    async fn a_gate_that_lost_an_open_drop_is_seeded_by_the_next_pass() {
        let m = pass_over(10);
        let mut gate = gate_with(vec![None]);
        gate.expect_resync()
            .withf(|seed| seed.remaining == goods_domain::ports::whole_units(90))
            .times(1)
            .returning(|_| Ok(()));
        let report = m.app(Some(gate)).heal_all().await.unwrap();
        assert_eq!((report.drops, report.resynced, report.failed), (1, 1, 0));
    }

    #[tokio::test]
    async fn the_same_drift_on_two_passes_resyncs_and_drift_that_moves_does_not() {
        let m = pass_over(10);
        // Drift 3, then 1 (purchases in flight come and go), then 1 again: resync.
        let mut gate = gate_with(vec![Some(87), Some(89), Some(89)]);
        gate.expect_resync().times(1).returning(|_| Ok(()));
        let app = m.app(Some(gate));
        assert_eq!(app.heal_all().await.unwrap().resynced, 0);
        assert_eq!(app.heal_all().await.unwrap().resynced, 0);
        assert_eq!(app.heal_all().await.unwrap().resynced, 1);
    }

    #[tokio::test]
    async fn negative_drift_resyncs_at_once() {
        let m = pass_over(10);
        // The gate would admit 95 while only 90 exist.
        let mut gate = gate_with(vec![Some(95)]);
        gate.expect_resync().times(1).returning(|_| Ok(()));
        assert_eq!(m.app(Some(gate)).heal_all().await.unwrap().resynced, 1);
    }

    #[tokio::test]
    async fn stale_reservations_are_resolved_by_the_database_and_settled_in_the_gate() {
        let mut m = pass_over(1);
        let (committed, abandoned) = (key(), IdempotencyKey::parse("gone").unwrap());
        let deadline = OPEN - Duration::seconds(1);
        m.ledger.expect_resolve_stale().returning(move |_, key, _| {
            Ok(if key.as_str() == "k-1" {
                StaleResolution::Committed(sample_order(OrderStatus::Pending))
            } else {
                StaleResolution::Abandoned
            })
        });
        let mut gate = gate_with(vec![Some(99)]);
        gate.checkpoint();
        // Each settles in its own size (the gate's marker and units are that size's).
        let size = || goods_domain::Sku::parse("sku", "US-9").ok();
        let stale = [committed, abandoned].map(|key| StaleReservation {
            user_id: buyer().user_id,
            key,
            sku: size(),
            quantity: qty(1),
            deadline,
        });
        gate.expect_stale()
            .withf(|_, now| *now == OPEN)
            .returning(move |_, _| Ok(stale.to_vec()));
        gate.expect_remaining()
            .returning(|_| Ok(Some(goods_domain::ports::whole_units(99))));
        gate.expect_confirm()
            .withf(move |r, id| r.key.as_str() == "k-1" && r.sku == size() && *id == order_id())
            .times(1)
            .returning(|_, _| Ok(()));
        gate.expect_cancel()
            .withf(move |r| r.key.as_str() == "gone" && r.sku == size() && r.deadline == deadline)
            .times(1)
            .returning(|_| Ok(()));
        let report = m.app(Some(gate)).heal_all().await.unwrap();
        assert_eq!((report.stale_resolved, report.failed), (2, 0));
    }

    #[tokio::test]
    async fn a_drop_is_resynced_once_at_a_time_per_instance() {
        let mut m = pass_over(10);
        m.drops.checkpoint();
        m.drops.expect_gate_seed().times(1).returning(|drop| {
            Ok(GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: goods_domain::ports::whole_units(90),
                expires_at: CLOSE,
                orders: Vec::new(),
            })
        });
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_resync().times(1).returning(|_| Ok(()));
        let app = m.app(Some(gate));
        let sample = sample_drop(100, 2);
        let running = app.healing.claim(sample.id).unwrap();
        assert!(
            !app.resync_drop(&sample).await.unwrap(),
            "another resync of it is running"
        );
        std::mem::drop(running);
        assert!(app.resync_drop(&sample).await.unwrap());
    }

    #[tokio::test]
    async fn a_pass_forgets_cached_drops_an_hour_after_they_closed() {
        let mut m = Mocks::at(CLOSE + CLOSED_GRACE);
        m.drops.expect_list_unclosed().returning(|_| Ok(Vec::new()));
        m.outbox.expect_unpublished().returning(|_| Ok(Vec::new()));
        let app = m.app(None);
        app.drops.load(drop_id()).await.unwrap();
        assert_eq!(app.drops.len(), 1);
        app.heal_all().await.unwrap();
        assert_eq!(app.drops.len(), 0);
    }

    #[tokio::test]
    async fn a_failure_on_one_drop_does_not_stop_the_pass() {
        let mut m = Mocks::at(OPEN);
        let other = LimitedDrop {
            id: DropId::parse(2).unwrap(),
            ..sample_drop(100, 2)
        };
        m.drops
            .expect_list_unclosed()
            .returning(move |_| Ok(vec![sample_drop(100, 2), other.clone()]));
        m.drops.expect_sold_by_size().returning(|id| {
            if id.get() == 1 {
                Err(InfraError::msg("lost"))
            } else {
                Ok(goods_domain::ports::whole_units(0))
            }
        });
        m.outbox.expect_unpublished().returning(|_| Ok(Vec::new()));
        let gate = gate_with(vec![Some(100)]);
        let report = m.app(Some(gate)).heal_all().await.unwrap();
        assert_eq!((report.drops, report.failed), (2, 1));
    }

    #[tokio::test]
    async fn an_oversold_drop_is_recorded_once_and_relayed_with_its_event_id() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_list_unclosed()
            .returning(|_| Ok(vec![sample_drop(100, 2)]));
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(101)));
        // The outbox's record carries goods.drop.oversold for the event log: one transaction.
        let mut recorded = false;
        m.outbox
            .expect_record_once()
            .withf(|key, _, facts, at| {
                key == "oversell:1"
                    && *at == OPEN
                    && facts
                        == [goods_domain::Fact::DropOversold {
                            drop: drop_id(),
                            limited: 100,
                            sold: 101,
                            sizes: vec![],
                        }]
            })
            .times(2)
            .returning(move |_, _, _, _| Ok(!std::mem::replace(&mut recorded, true)));
        m.event_log.expect_record().never();
        let event = goods_domain::ports::DomainEvent::Oversold {
            drop_id: drop_id(),
            limited_quantity: 100,
            sold_quantity: 101,
            sizes: vec![],
        };
        let mut pending = vec![vec![], vec![OutboxEntry { id: 7, event }]];
        m.outbox
            .expect_unpublished()
            .times(2)
            .returning(move |_| Ok(pending.pop().unwrap()));
        m.events.expect_publish().times(1).returning(|_| Ok(()));
        m.outbox
            .expect_mark_published()
            .withf(|id, _| *id == 7)
            .times(1)
            .returning(|_, _| Ok(()));
        let (metrics, _guard) = local_metrics();
        let app = m.app(None);
        assert_eq!(app.heal_all().await.unwrap().relayed, 1);
        assert_eq!(app.heal_all().await.unwrap().relayed, 0);
        // Two passes saw it; the metric counts the one occurrence.
        let counted = counters(&metrics);
        assert_eq!(
            counted.get("oversell_events_total{}"),
            Some(&1),
            "{counted:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_coming_back_resyncs_the_drops_the_database_sold_while_it_was_away() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().returning(|_| {
            Ok(vec![Ok(Placed::Created(sample_order(
                OrderStatus::Pending,
            )))])
        });
        m.events.expect_publish().returning(|_| Ok(()));
        // One outage of the drop, told once, though two purchases bypassed the gate: degraded,
        // then recovered after the resync.
        let gate_events = Arc::new(Mutex::new(Vec::new()));
        let told = Arc::clone(&gate_events);
        m.event_log
            .expect_record_gate()
            .times(2)
            .returning(move |fact, _| {
                told.lock().unwrap().push(fact.clone());
                Ok(true)
            });
        m.drops.expect_gate_seed().times(1).returning(|drop| {
            Ok(GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: goods_domain::ports::whole_units(97),
                expires_at: CLOSE,
                orders: Vec::new(),
            })
        });
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        let mut answers = vec![
            Ok(ReserveOutcome::Admitted),
            Err(InfraError::msg("timeout")),
        ];
        gate.expect_reserve()
            .times(2)
            .returning(move |_| answers.pop().unwrap());
        gate.expect_confirm().returning(|_, _| Ok(()));
        gate.expect_confirm_all().returning(|_| Ok(()));
        let (resynced, mut done) = tokio::sync::mpsc::unbounded_channel();
        gate.expect_resync()
            .withf(|seed| seed.remaining == goods_domain::ports::whole_units(97))
            .times(1)
            .returning(move |_| {
                resynced.send(()).unwrap();
                Ok(())
            });
        let app = m.app(Some(gate));
        let buy = |key: &str| crate::PurchaseCommand {
            drop_id: drop_id(),
            user_id: buyer().user_id,
            sku: None,
            quantity: qty(1),
            key: IdempotencyKey::parse(key).unwrap(),
        };
        app.purchase(buy("a")).await.unwrap(); // the gate fails: the database sells alone
        app.purchase(buy("b")).await.unwrap(); // breaker open: the gate is not asked
        tokio::time::advance(crate::breaker::COOL_DOWN).await;
        app.purchase(buy("c")).await.unwrap(); // the gate answers again
        done.recv().await.unwrap();
        // The recovery is written right after the resync, in the resync's task.
        let written = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while gate_events.lock().unwrap().len() < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        });
        assert!(written.await.is_ok(), "{:?}", gate_events.lock().unwrap());
        let drop = drop_id();
        assert_eq!(
            *gate_events.lock().unwrap(),
            [Fact::GateDegraded { drop }, Fact::GateRecovered { drop }]
        );
    }

    #[tokio::test]
    async fn a_size_the_gate_oversells_resyncs_at_once_though_another_hides_it_in_the_total() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_list_unclosed()
            .returning(|_| Ok(vec![sample_sized_drop()]));
        // US-9 sold 10 of 50 and the gate would admit 45 more (-5); US-10 sold 0 and the gate
        // holds 10 back (+10): +5 in all, which alone would wait for a second pass.
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::batch::FreeUnits::from([(sku("US-9"), 10)])));
        m.drops.expect_gate_seed().returning(|drop| {
            Ok(GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: GateSeed::remaining_of(drop, &[]),
                expires_at: CLOSE,
                orders: Vec::new(),
            })
        });
        m.outbox.expect_unpublished().returning(|_| Ok(Vec::new()));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_stale().returning(|_, _| Ok(Vec::new()));
        gate.expect_remaining().returning(|_| {
            Ok(Some(goods_domain::batch::FreeUnits::from([
                (sku("US-9"), 45),
                (sku("US-10"), 40),
            ])))
        });
        gate.expect_resync().times(1).returning(|_| Ok(()));
        let report = m.app(Some(gate)).heal_all().await.unwrap();
        assert_eq!((report.resynced, report.failed), (1, 0));
    }
}
