//! CancelOrder: one ledger transaction gives the units back to the stock, the drop and the
//! buyer; then the gate gets them back too.

use super::Orders;
use crate::Actor;
use goods_domain::ports::Cancelled;
use goods_domain::{CancelOrderError, GoodsOrder, OrderId, OrderStatus};

impl Orders {
    /// Cancels the caller's order. Idempotent: cancelling again returns the cancelled order and
    /// gives nothing back twice.
    #[tracing::instrument(skip_all, fields(order.id = %id, user.id = %actor.user_id))]
    pub async fn cancel(&self, id: OrderId, actor: Actor) -> Result<GoodsOrder, CancelOrderError> {
        // An order past its deadline expired then, whether or not anyone noticed: the
        // ledger's transaction expires it instead of cancelling it.
        let expiry = goods_domain::Expiry::at(self.clock.now(), self.payment_window);
        let cancelled = self.ledger.cancel_order(id, actor.user_id, expiry).await?;
        match cancelled {
            Cancelled::Now(order) => {
                metrics::counter!(crate::telemetry::ORDER_TRANSITIONS, "to" => "CANCELLED")
                    .increment(1);
                self.freed.units_back(&order).await;
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
    use crate::orders::testing::OrderMocks;
    use crate::test_support::*;

    #[tokio::test]
    async fn a_fresh_cancellation_frees_the_units_once() {
        let mut m = OrderMocks::new().freeing(1);
        // The ledger's transaction reads the order itself: no read before it.
        m.orders.expect_get().never();
        m.ledger
            .expect_cancel_order()
            .times(1)
            .returning(|_, _, _| Ok(Cancelled::Now(sample_order(OrderStatus::Cancelled))));
        let order = m.service().cancel(order_id(), buyer()).await.unwrap();
        assert_eq!(order.status, OrderStatus::Cancelled);
    }

    #[tokio::test]
    async fn cancelling_again_frees_nothing() {
        let mut m = OrderMocks::new().freeing(0);
        m.ledger
            .expect_cancel_order()
            .returning(|_, _, _| Ok(Cancelled::Already(sample_order(OrderStatus::Cancelled))));
        m.service().cancel(order_id(), buyer()).await.unwrap();
    }

    #[tokio::test]
    async fn a_cancel_past_the_payment_window_expires_the_order_and_is_refused() {
        let mut m = OrderMocks::new().freeing(1);
        let asked = goods_domain::Expiry::at(OPEN, goods_domain::PaymentWindow::seconds(600));
        m.ledger
            .expect_cancel_order()
            .withf(move |_, _, at| *at == asked)
            .times(1)
            .returning(|_, _, _| Ok(Cancelled::Expired(sample_order(OrderStatus::Expired))));
        let err = m.service().cancel(order_id(), buyer()).await.unwrap_err();
        assert!(
            matches!(err, CancelOrderError::NotCancellable(OrderStatus::Expired)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn someone_elses_order_is_forbidden() {
        let mut m = OrderMocks::new().freeing(0);
        m.ledger
            .expect_cancel_order()
            .returning(|_, _, _| Err(CancelOrderError::NotOwner));
        let err = m.service().cancel(order_id(), buyer()).await.unwrap_err();
        assert!(matches!(err, CancelOrderError::NotOwner));
    }
}
