//! The fleet's write budget (`DB_WRITE_PERMITS_GLOBAL`): a [`PurchaseLedger`] taking a global
//! permit around each purchase transaction, however many instances there are. A batch with no
//! permit in time is refused whole (THROTTLED); when Redis does not answer it runs without one,
//! bounded by the instance's buffer (`budget_bypassed_total`).

use crate::telemetry;
use async_trait::async_trait;
use goods_domain::ports::{
    AppliedPayment, CancelOrderError, Cancelled, PaymentEventError, PlaceOrder, PlaceOrderError,
    Placement, PurchaseLedger, StaleResolution, WriteBudget, WritePermit,
};
use goods_domain::{
    GoodsOrder, IdempotencyKey, InfraError, OrderId, PaymentEvent, PaymentWindow, UserId,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// A ledger whose purchase transactions hold a permit of the fleet's budget.
pub struct Budgeted {
    inner: Arc<dyn PurchaseLedger>,
    budget: Arc<dyn WriteBudget>,
    /// How long a batch waits for a permit before it is refused.
    wait: Duration,
    /// How long a permit is held at most (a dead instance's permit comes back then).
    lease: Duration,
}

impl Budgeted {
    /// `inner`'s purchases under `budget`: a batch waits up to `wait` for a permit, held for at
    /// most `lease` (longer than a transaction may take).
    pub fn new(
        inner: Arc<dyn PurchaseLedger>,
        budget: Arc<dyn WriteBudget>,
        wait: Duration,
        lease: Duration,
    ) -> Self {
        Self {
            inner,
            budget,
            wait,
            lease,
        }
    }

    /// A permit; `Ok(None)` when the budget's store did not answer (run without one);
    /// `Err(())` when none was free within the wait.
    async fn permit(&self) -> Result<Option<WritePermit>, ()> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match self.budget.try_acquire(self.lease).await {
                Ok(Some((permit, held))) => {
                    metrics::gauge!(telemetry::GLOBAL_PERMITS_HELD).set(f64::from(held));
                    return Ok(Some(permit));
                }
                Ok(None) if start.elapsed() >= self.wait => {
                    metrics::counter!(telemetry::BUDGET_EXHAUSTED).increment(1);
                    return Err(());
                }
                Ok(None) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(10));
                }
                Err(error) => {
                    metrics::counter!(telemetry::BUDGET_BYPASSED).increment(1);
                    tracing::warn!(error = %error, "write budget unreachable; the transaction runs on the local bound only");
                    return Ok(None);
                }
            }
        }
    }
}

#[async_trait]
impl PurchaseLedger for Budgeted {
    async fn place_orders(&self, batch: &[PlaceOrder]) -> Result<Vec<Placement>, InfraError> {
        let Ok(permit) = self.permit().await else {
            return Ok(batch
                .iter()
                .map(|_| Err(PlaceOrderError::Throttled))
                .collect());
        };
        let result = self.inner.place_orders(batch).await;
        if let Some(permit) = permit
            && let Err(error) = self.budget.release(permit).await
        {
            tracing::warn!(error = %error, "write permit not given back; its lease will");
        }
        result
    }

    async fn cancel_order(
        &self,
        id: OrderId,
        by: UserId,
        expiry: goods_domain::Expiry,
    ) -> Result<Cancelled, CancelOrderError> {
        self.inner.cancel_order(id, by, expiry).await
    }

    async fn apply_payment(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> Result<AppliedPayment, PaymentEventError> {
        self.inner.apply_payment(event, now, window).await
    }

    async fn expire_order(
        &self,
        id: OrderId,
        expiry: goods_domain::Expiry,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        self.inner.expire_order(id, expiry).await
    }

    async fn resolve_stale(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError> {
        self.inner.resolve_stale(user, key, deadline).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{MockPurchaseLedger, MockWriteBudget};

    /// A 50 ms wait for a permit, held 5 s at most.
    fn budgeted(ledger: MockPurchaseLedger, budget: MockWriteBudget) -> Budgeted {
        Budgeted::new(
            Arc::new(ledger),
            Arc::new(budget),
            Duration::from_millis(50),
            Duration::from_secs(5),
        )
    }

    #[tokio::test]
    async fn a_transaction_runs_holding_a_permit_and_gives_it_back() {
        let mut ledger = MockPurchaseLedger::new();
        ledger.expect_place_orders().times(1).returning(|batch| {
            Ok(batch
                .iter()
                .map(|_| Err(PlaceOrderError::SoldOut { remaining: 0 }))
                .collect())
        });
        let mut budget = MockWriteBudget::new();
        budget
            .expect_try_acquire()
            .times(1)
            .returning(|_| Ok(Some((WritePermit("p".into()), 1))));
        budget
            .expect_release()
            .withf(|p| p.0 == "p")
            .times(1)
            .returning(|_| Ok(()));
        let budgeted = budgeted(ledger, budget);
        let answers = budgeted
            .place_orders(&[place_order(buyer().user_id.get())])
            .await
            .unwrap();
        assert!(matches!(
            answers[..],
            [Err(PlaceOrderError::SoldOut { .. })]
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn no_permit_within_the_wait_refuses_the_batch_without_touching_the_database() {
        let mut ledger = MockPurchaseLedger::new();
        ledger.expect_place_orders().times(0);
        let mut budget = MockWriteBudget::new();
        budget.expect_try_acquire().returning(|_| Ok(None));
        budget.expect_release().times(0);
        let budgeted = budgeted(ledger, budget);
        let answers = budgeted
            .place_orders(&[
                place_order(buyer().user_id.get()),
                place_order(buyer().user_id.get()),
            ])
            .await
            .unwrap();
        assert!(matches!(
            answers[..],
            [
                Err(PlaceOrderError::Throttled),
                Err(PlaceOrderError::Throttled)
            ]
        ));
    }

    #[tokio::test]
    async fn an_unreachable_budget_lets_the_transaction_run_on_the_local_bound() {
        let mut ledger = MockPurchaseLedger::new();
        ledger.expect_place_orders().times(1).returning(|batch| {
            Ok(batch
                .iter()
                .map(|_| Err(PlaceOrderError::KeyReused))
                .collect())
        });
        let mut budget = MockWriteBudget::new();
        budget
            .expect_try_acquire()
            .returning(|_| Err(InfraError::msg("redis down")));
        budget.expect_release().times(0);
        let budgeted = budgeted(ledger, budget);
        let answers = budgeted
            .place_orders(&[place_order(buyer().user_id.get())])
            .await
            .unwrap();
        assert!(matches!(answers[..], [Err(PlaceOrderError::KeyReused)]));
    }
}
