//! ReconcileDrop: compare the gate with the database's truth and alert on oversell. The
//! periodic healing pass (`heal`) acts on the same comparison.

use crate::{Actor, DropReadError, GoodsApp};
use goods_domain::{DropId, LimitedDrop};
use time::OffsetDateTime;

/// The comparison of one drop's gate and database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    pub drop_id: DropId,
    pub limited_quantity: u32,
    /// Units in orders PENDING or PAID (database; cancelled and expired units went back).
    pub sold_quantity: u32,
    /// Units of the drop's orders by state (database).
    pub units: goods_domain::ports::UnitsByStatus,
    /// The gate's counter; `None` when there is no gate, it is unreachable or holds nothing.
    pub gate_remaining: Option<u32>,
    /// `limited - sold - gateRemaining`: units the gate holds back without a sale (in-flight
    /// purchases, or under-sell after a failure). Positive is safe; negative means the gate
    /// would admit more than the database can sell, which the database still refuses.
    pub drift: Option<i64>,
    /// `sold > limited`. Must never be true.
    pub oversold: bool,
    /// When the comparison was made.
    pub checked_at: OffsetDateTime,
}

impl GoodsApp {
    /// Reconciles one drop, for the seller of its product or an admin; publishes an oversell
    /// alert when the database sold too much.
    ///
    /// # Errors
    /// [`DropReadError::NotFound`] (also for a drop `actor` does not manage), or `Infra` when the database fails (an unreachable
    /// gate is reported as `gate_remaining: None`, not as an error).
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn reconcile_drop(
        &self,
        id: DropId,
        actor: Actor,
    ) -> Result<Reconciliation, DropReadError> {
        let drop = self
            .managed_drop(id, actor)
            .await?
            .ok_or(DropReadError::NotFound)?;
        self.reconcile(&drop).await
    }

    async fn reconcile(&self, drop: &LimitedDrop) -> Result<Reconciliation, DropReadError> {
        let sold = self.ports.drops.sold_quantity(drop.id).await?;
        let units = self.ports.orders.units_by_status(drop.id).await?;
        let gate_remaining = match self.gate().filter(|_| !drop.mode.is_draw()) {
            Some(gate) => gate.remaining(drop.id).await.unwrap_or_else(|error| {
                self.breaker.trip();
                tracing::warn!(error = %error, "gate unreachable during reconciliation");
                None
            }),
            None => None,
        };
        let limited = drop.limited_quantity.get();
        let report = Reconciliation {
            drop_id: drop.id,
            limited_quantity: limited,
            sold_quantity: sold,
            units,
            gate_remaining,
            drift: gate_remaining.map(|g| i64::from(limited) - i64::from(sold) - i64::from(g)),
            oversold: sold > limited,
            checked_at: self.ports.clock.now(),
        };
        if report.oversold {
            self.raise_oversell(drop, sold).await;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::*;
    use goods_domain::ports::{DomainEvent, MockAdmissionGate};

    #[tokio::test]
    async fn drift_is_what_the_gate_holds_back_beyond_the_sales() {
        let mut m = Mocks::at(OPEN);
        m.drops.expect_sold_quantity().returning(|_| Ok(60));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_remaining().returning(|_| Ok(Some(30)));
        let report = m
            .app(Some(gate))
            .reconcile_drop(drop_id(), admin())
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
        m.drops.expect_sold_quantity().returning(|_| Ok(101));
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
            .reconcile_drop(drop_id(), admin())
            .await
            .unwrap();
        assert!(report.oversold);
        assert_eq!(report.gate_remaining, None);
    }

    #[tokio::test]
    async fn an_unreachable_gate_is_reported_as_unknown_not_as_an_error() {
        let mut m = Mocks::at(OPEN);
        m.drops.expect_sold_quantity().returning(|_| Ok(1));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_remaining()
            .returning(|_| Err(goods_domain::InfraError::msg("down")));
        let report = m
            .app(Some(gate))
            .reconcile_drop(drop_id(), admin())
            .await
            .unwrap();
        assert_eq!((report.gate_remaining, report.drift), (None, None));
    }
}
