//! ReconcileDrop: compare the gate with the database's truth and alert on oversell. The
//! periodic healing pass (`heal`) acts on the same comparison.

use crate::drops::cache::DropCache;
use crate::mechanisms::breaker::GateAccess;
use crate::operations::flags::FlagCache;
use crate::{Actor, DropReadError, GoodsApp};
use goods_domain::ports::{
    Clock, DomainEvent, DropRepository, EventOutbox, OrderRepository, ProductRepository,
    units_in_all,
};
use goods_domain::variant::{any_oversold, oversold_sizes};
use goods_domain::{DropId, LimitedDrop, SizeCount};
use std::sync::Arc;
use time::OffsetDateTime;

/// The comparison of one drop's gate and database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    pub drop_id: DropId,
    pub limited_quantity: u32,
    /// Units in orders PENDING or PAID (database; cancelled and expired units went back).
    pub sold_quantity: u32,
    /// Units of the drop's orders by state (database), in all and each size's.
    pub units: goods_domain::ports::DropUnits,
    /// The gate's counter; `None` when there is no gate, it is unreachable or holds nothing.
    pub gate_remaining: Option<u32>,
    /// [`SizeCount::drift`]: `limited - sold - gateRemaining`.
    pub drift: Option<i64>,
    /// [`SizeCount::oversold`]: `sold > limited`. Must never be true.
    pub oversold: bool,
    /// When the comparison was made.
    pub checked_at: OffsetDateTime,
    /// A drop in sizes: each size's comparison (empty without sizes). The drop is oversold
    /// when any size is, even with its total within its limit.
    pub sizes: Vec<SizeCount>,
}

/// Compares a drop's gate with the database's truth.
#[derive(Clone)]
pub struct Reconciler {
    drops: Arc<dyn DropRepository>,
    orders: Arc<dyn OrderRepository>,
    products: Arc<dyn ProductRepository>,
    outbox: Arc<dyn EventOutbox>,
    clock: Arc<dyn Clock>,
    cache: Arc<DropCache>,
    flags: Arc<FlagCache>,
    gate: GateAccess,
}

impl GoodsApp {
    /// The reconciliation of drops (`/limited-drops/{id}/reconciliation`).
    pub fn reconciler(&self) -> Reconciler {
        let ports = self.ports();
        Reconciler {
            drops: Arc::clone(&ports.drops),
            orders: Arc::clone(&ports.orders),
            products: Arc::clone(&ports.products),
            outbox: Arc::clone(&ports.outbox),
            clock: Arc::clone(&ports.clock),
            cache: Arc::clone(&self.drops),
            flags: Arc::clone(&self.flags_cache),
            gate: self.access.clone(),
        }
    }
}

impl Reconciler {
    /// Reconciles one drop (its seller or an admin), recording an oversell alert when the
    /// database sold too much; an unreachable gate is `gate_remaining: None`.
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn reconcile(
        &self,
        id: DropId,
        actor: Actor,
    ) -> Result<Reconciliation, DropReadError> {
        let drop = crate::drops::managed_drop(&self.cache, &self.flags, &*self.products, id, actor)
            .await?
            .ok_or(DropReadError::NotFound)?;
        let sold_by_size = self.drops.sold_by_size(drop.id).await?;
        let units = self.orders.units_by_status(drop.id).await?;
        let gate = self.gate.remaining(&drop).await;
        let now = self.clock.now();
        let by_size = drop.sizes.counts(&sold_by_size, gate.as_ref());
        let sold = units_in_all(&sold_by_size);
        let gate_remaining = gate.as_ref().map(units_in_all);
        let report = Reconciliation {
            drop_id: drop.id,
            limited_quantity: drop.limited_quantity.get(),
            sold_quantity: sold,
            units,
            gate_remaining,
            drift: drift_in_all(&by_size),
            oversold: any_oversold(&by_size),
            checked_at: now,
            sizes: match drop.sizes.is_sized() {
                true => by_size.clone(),
                false => Vec::new(),
            },
        };
        if report.oversold {
            raise_oversell(&*self.outbox, now, &drop, &by_size).await;
        }
        Ok(report)
    }
}

/// The drop's drift: the sum of its sizes' ([`SizeCount::drift`]); `None` when the gate has
/// no counter for one of them.
pub(crate) fn drift_in_all(counts: &[SizeCount]) -> Option<i64> {
    counts.iter().map(SizeCount::drift).sum()
}

/// Records the oversell alert once per drop in the outbox, and its `goods.drop.oversold`
/// event in the log in the same transaction, both naming the oversold sizes of a drop in
/// sizes; logs it the first time. Not recorded (the store failed): the next pass finds the
/// oversell again and records both.
pub(crate) async fn raise_oversell(
    outbox: &dyn EventOutbox,
    now: OffsetDateTime,
    drop: &LimitedDrop,
    counts: &[SizeCount],
) {
    let limited = drop.limited_quantity.get();
    let sold = counts.iter().map(|size| size.sold).sum::<u32>();
    let sizes = oversold_sizes(counts);
    let skus = sizes
        .iter()
        .map(|size| size.sku.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let event = DomainEvent::Oversold {
        drop_id: drop.id,
        limited_quantity: limited,
        sold_quantity: sold,
        sizes: sizes.clone(),
    };
    let fact = goods_domain::Fact::DropOversold {
        drop: drop.id,
        limited,
        sold,
        sizes,
    };
    let key = format!("oversell:{}", drop.id);
    match outbox.record_once(&key, &event, &[fact], now).await {
        Ok(true) => {
            metrics::counter!(crate::telemetry::OVERSELLS).increment(1);
            tracing::error!(
                source = "oversell",
                severity = "critical",
                drop.id = %drop.id,
                sold,
                limited,
                skus,
                "drop oversold"
            );
        }
        Ok(false) => {}
        Err(error) => {
            // Not recorded: say it now, and the next pass tries to record it again.
            tracing::error!(source = "oversell", severity = "critical", drop.id = %drop.id, sold, limited, skus, error = %error, "drop oversold; alert not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::*;
    use goods_domain::ports::{DomainEvent, MockAdmissionGate};

    #[tokio::test]
    async fn drift_is_what_the_gate_holds_back_beyond_the_sales() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(60)));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_remaining()
            .returning(|_| Ok(Some(goods_domain::ports::whole_units(30))));
        let report = m
            .app(Some(gate))
            .reconciler()
            .reconcile(drop_id(), admin())
            .await
            .unwrap();
        assert_eq!(
            (report.sold_quantity, report.gate_remaining, report.drift),
            (60, Some(30), Some(10))
        );
        assert!(!report.oversold);
    }

    #[tokio::test]
    async fn an_oversold_drop_records_the_critical_alert_in_the_outbox() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(101)));
        m.outbox
            .expect_record_once()
            .withf(|key, e, facts, _| {
                key == "oversell:1"
                    && matches!(
                        e,
                        DomainEvent::Oversold {
                            sold_quantity: 101,
                            ..
                        }
                    )
                    && matches!(
                        facts,
                        [goods_domain::Fact::DropOversold {
                            limited: 100,
                            sold: 101,
                            ..
                        }]
                    )
            })
            .times(1)
            .returning(|_, _, _, _| Ok(true));
        m.event_log.expect_record().never();
        let report = m
            .app(None)
            .reconciler()
            .reconcile(drop_id(), admin())
            .await
            .unwrap();
        assert!(report.oversold);
        assert_eq!(report.gate_remaining, None);
    }

    #[tokio::test]
    async fn an_unreachable_gate_is_reported_as_unknown_not_as_an_error() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(1)));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_remaining()
            .returning(|_| Err(goods_domain::InfraError::msg("down")));
        let app = m.app(Some(gate));
        let report = app
            .reconciler()
            .reconcile(drop_id(), admin())
            .await
            .unwrap();
        assert_eq!((report.gate_remaining, report.drift), (None, None));
        // Its failure trips the breaker: the next reads skip the gate for the cool-down.
        assert!(app.access.breaker.is_open());
    }

    #[tokio::test]
    async fn a_size_sold_past_its_limit_is_an_oversell_though_the_total_is_not() {
        let mut m = Mocks::at(OPEN);
        m.drops = drops_serving(sample_sized_drop());
        // US-9: 51 of 50 sold; US-10: 10 of 50. In all 61 of 100.
        m.drops.expect_sold_by_size().returning(|_| {
            Ok(goods_domain::batch::FreeUnits::from([
                (sku("US-9"), 51),
                (sku("US-10"), 10),
            ]))
        });
        // The alert and the event name the oversold size, with its own limit and units.
        let us9 = vec![goods_domain::SizeSold {
            sku: sku("US-9").unwrap(),
            limited: 50,
            sold: 51,
        }];
        let named = us9.clone();
        m.outbox
            .expect_record_once()
            .withf(move |_, event, facts, _| {
                matches!(event, DomainEvent::Oversold { limited_quantity: 100, sold_quantity: 61, sizes, .. } if *sizes == named)
                    && matches!(facts, [goods_domain::Fact::DropOversold { limited: 100, sold: 61, sizes, .. }] if *sizes == us9)
            })
            .times(1)
            .returning(|_, _, _, _| Ok(true));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_remaining().returning(|_| {
            Ok(Some(goods_domain::batch::FreeUnits::from([
                (sku("US-9"), 0),
                (sku("US-10"), 38),
            ])))
        });
        let report = m
            .app(Some(gate))
            .reconciler()
            .reconcile(drop_id(), admin())
            .await
            .unwrap();
        assert!(report.oversold);
        assert_eq!(
            (report.sold_quantity, report.gate_remaining, report.drift),
            (61, Some(38), Some(-1 + 2))
        );
        let by_size: Vec<_> = report
            .sizes
            .iter()
            .map(|s| (s.sku.clone(), s.sold, s.drift(), s.oversold()))
            .collect();
        assert_eq!(
            by_size,
            [
                (sku("US-9"), 51, Some(-1), true),
                (sku("US-10"), 10, Some(2), false)
            ]
        );
    }
}
