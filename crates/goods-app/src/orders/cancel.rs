//! CancelOrder: one ledger transaction gives the units back to the stock, the drop and the
//! buyer; then the gate gets them back too.

use crate::{Actor, GoodsApp};
use goods_domain::ports::Cancelled;
use goods_domain::{CancelOrderError, GoodsOrder, OrderId, OrderStatus};

impl GoodsApp {
    /// Cancels the caller's order. Idempotent: cancelling again returns the cancelled order and
    /// gives nothing back twice.
    ///
    /// # Errors
    /// [`CancelOrderError`] naming the refused condition.
    #[tracing::instrument(skip_all, fields(order.id = %id, user.id = %actor.user_id))]
    pub async fn cancel_order(
        &self,
        id: OrderId,
        actor: Actor,
    ) -> Result<GoodsOrder, CancelOrderError> {
        // An order past its deadline expired then, whether or not anyone noticed: the
        // ledger's transaction expires it instead of cancelling it.
        let expiry = goods_domain::Expiry::at(self.ports.clock.now(), self.payment_window);
        let cancelled = self
            .ports
            .ledger
            .cancel_order(id, actor.user_id, expiry)
            .await?;
        match cancelled {
            Cancelled::Now(order) => {
                metrics::counter!(crate::telemetry::ORDER_TRANSITIONS, "to" => "CANCELLED")
                    .increment(1);
                self.units_back(&order).await;
                Ok(order)
            }
            Cancelled::Already(order) => Ok(order),
            Cancelled::Expired(order) => {
                self.expired(&order).await;
                Err(CancelOrderError::NotCancellable(OrderStatus::Expired))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::MockAdmissionGate;

    #[tokio::test]
    async fn a_fresh_cancellation_gives_the_units_back_to_the_gate_once() {
        let mut m = Mocks::at(OPEN);
        // The ledger's transaction reads the order itself: no read before it.
        m.orders.expect_get().never();
        m.ledger
            .expect_cancel_order()
            .times(1)
            .returning(|_, _, _| Ok(Cancelled::Now(sample_order(OrderStatus::Cancelled))));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_release().times(1).returning(|_, _, _| Ok(()));
        let order = m
            .app(Some(gate))
            .cancel_order(order_id(), buyer())
            .await
            .unwrap();
        assert_eq!(order.status, OrderStatus::Cancelled);
    }

    #[tokio::test]
    async fn cancelling_again_gives_nothing_back() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_cancel_order()
            .returning(|_, _, _| Ok(Cancelled::Already(sample_order(OrderStatus::Cancelled))));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_release().times(0);
        m.app(Some(gate))
            .cancel_order(order_id(), buyer())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_cancel_past_the_payment_window_expires_the_order_and_is_refused() {
        let mut m = Mocks::at(OPEN);
        let asked = goods_domain::Expiry::at(OPEN, goods_domain::PaymentWindow::seconds(600));
        m.ledger
            .expect_cancel_order()
            .withf(move |_, _, at| *at == asked)
            .times(1)
            .returning(|_, _, _| Ok(Cancelled::Expired(sample_order(OrderStatus::Expired))));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_release().times(1).returning(|_, _, _| Ok(()));
        let err = m
            .app(Some(gate))
            .cancel_order(order_id(), buyer())
            .await
            .unwrap_err();
        assert!(
            matches!(err, CancelOrderError::NotCancellable(OrderStatus::Expired)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn someone_elses_order_is_forbidden() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_cancel_order()
            .returning(|_, _, _| Err(CancelOrderError::NotOwner));
        let err = m
            .app(None)
            .cancel_order(order_id(), buyer())
            .await
            .unwrap_err();
        assert!(matches!(err, CancelOrderError::NotOwner));
    }
}
