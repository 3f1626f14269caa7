//! An order after its purchase: view, cancel, payment, expiry, listing. Where freed units go
//! (the gate, or a draw's waitlist) is the core's, behind [`FreedUnits`].

pub(crate) mod cancel;
pub(crate) mod lifecycle;
pub(crate) mod payments;
pub(crate) mod view;

use crate::GoodsApp;
use goods_domain::ports::{Clock, OrderRepository, ProductRepository, PurchaseLedger};
use goods_domain::{GoodsOrder, PaymentWindow};
use std::sync::Arc;

/// Takes the units of an order that the ledger gave back (cancelled or expired, by exactly
/// one call, so each order's units arrive here once).
#[cfg_attr(test, mockall::automock)]
#[async_trait::async_trait]
pub(crate) trait FreedUnits: Send + Sync {
    async fn units_back(&self, order: &GoodsOrder);
}

#[derive(Clone)]
pub struct Orders {
    orders: Arc<dyn OrderRepository>,
    ledger: Arc<dyn PurchaseLedger>,
    products: Arc<dyn ProductRepository>,
    clock: Arc<dyn Clock>,
    payment_window: PaymentWindow,
    freed: Arc<dyn FreedUnits>,
}

impl GoodsApp {
    /// Orders after their purchase (`/orders`, `/payments/events`); their freed units go back
    /// through this application's gate or draw waitlists.
    pub fn orders(&self) -> Orders {
        let ports = self.ports();
        Orders {
            orders: Arc::clone(&ports.orders),
            ledger: Arc::clone(&ports.ledger),
            products: Arc::clone(&ports.products),
            clock: Arc::clone(&ports.clock),
            payment_window: self.payment_window(),
            freed: Arc::new(self.clone()),
        }
    }
}

#[async_trait::async_trait]
impl FreedUnits for GoodsApp {
    /// The gate gets the units back (and tells every instance's sold-out flag), or, in a draw
    /// drop, the first waitlisted entry does.
    async fn units_back(&self, order: &GoodsOrder) {
        self.drops.units_changed(order.drop_id);
        let draw = matches!(self.drops.load(order.drop_id).await, Ok(Some(d)) if d.mode.is_draw());
        if draw {
            self.draws().promote_after(order);
            return;
        }
        if let Some(gate) = &self.ports.gate
            && let Err(error) = gate
                .release(
                    order.drop_id,
                    order.user_id,
                    order.sku.clone(),
                    order.quantity,
                )
                .await
        {
            // The database gave the units back; a gate that missed it under-sells until the
            // healer sees the same drift on two passes and resyncs it.
            tracing::warn!(error = %error, "gate did not take the units back");
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::test_support::OPEN;
    use goods_domain::ports::{
        MockClock, MockOrderRepository, MockProductRepository, MockPurchaseLedger,
    };

    /// The ports of [`Orders`], mocked; the clock reads [`OPEN`].
    pub struct OrderMocks {
        pub orders: MockOrderRepository,
        pub ledger: MockPurchaseLedger,
        pub products: MockProductRepository,
        pub freed: MockFreedUnits,
    }

    impl OrderMocks {
        pub fn new() -> Self {
            Self {
                orders: MockOrderRepository::new(),
                ledger: MockPurchaseLedger::new(),
                products: MockProductRepository::new(),
                freed: MockFreedUnits::new(),
            }
        }

        /// Expects `n` orders' units back.
        pub fn freeing(mut self, n: usize) -> Self {
            self.freed.expect_units_back().times(n).return_const(());
            self
        }

        pub fn service(self) -> Orders {
            let mut clock = MockClock::new();
            clock.expect_now().return_const(OPEN);
            Orders {
                orders: Arc::new(self.orders),
                ledger: Arc::new(self.ledger),
                products: Arc::new(self.products),
                clock: Arc::new(clock),
                payment_window: PaymentWindow::default(),
                freed: Arc::new(self.freed),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::*;
    use goods_domain::ports::{Cancelled, MockAdmissionGate};
    use goods_domain::{InfraError, OrderStatus};
    use rstest::rstest;

    /// A gate that does not take the units back leaves the cancel standing: the healer
    /// resyncs the drift.
    #[rstest]
    #[case::taken(Ok(()))]
    #[case::refused(Err(InfraError::unavailable("gate down")))]
    #[tokio::test]
    async fn units_freed_in_a_sale_go_back_to_the_gate_once(
        #[case] answer: Result<(), InfraError>,
    ) {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_cancel_order()
            .returning(|_, _, _| Ok(Cancelled::Now(sample_order(OrderStatus::Cancelled))));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_release()
            .withf(|d, u, s, q| {
                *d == drop_id() && *u == buyer().user_id && s.is_none() && *q == qty(1)
            })
            .times(1)
            .return_once(move |_, _, _, _| answer);
        let order = m
            .app(Some(gate))
            .orders()
            .cancel(order_id(), buyer())
            .await
            .unwrap();
        assert_eq!(order.status, OrderStatus::Cancelled);
    }
}
