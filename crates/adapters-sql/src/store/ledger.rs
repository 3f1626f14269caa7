//! The source of truth's transactions ([`PurchaseLedger`]): the batch in `batch`, the order's
//! life in `lifecycle`.

use super::SqlStore;
use crate::Backend;
use async_trait::async_trait;
use goods_domain::ports::{
    AppliedPayment, Cancelled, PaymentEventError, PlaceOrder, Placement, PurchaseLedger,
    StaleResolution,
};
use goods_domain::{
    CancelOrderError, Expiry, GoodsOrder, IdempotencyKey, InfraError, OrderId, PaymentEvent,
    PaymentWindow, UserId,
};
use time::OffsetDateTime;

#[async_trait]
impl<B: Backend> PurchaseLedger for SqlStore<B> {
    #[tracing::instrument(level = "debug", skip_all, fields(drop.id, orders = batch.len()))]
    async fn place_orders(&self, batch: &[PlaceOrder]) -> Result<Vec<Placement>, InfraError> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        tracing::Span::current().record("drop.id", first.drop_id.get());
        if batch.iter().any(|o| !first.same_drop_terms(o)) {
            return Err(InfraError::msg("a batch of orders spans drops"));
        }
        self.place_batch(batch).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %id, user.id = %by))]
    async fn cancel_order(
        &self,
        id: OrderId,
        by: UserId,
        expiry: Expiry,
    ) -> Result<Cancelled, CancelOrderError> {
        self.cancel(id, by, expiry).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %event.order_id))]
    async fn apply_payment(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> Result<AppliedPayment, PaymentEventError> {
        self.pay(event, now, window).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %id))]
    async fn expire_order(
        &self,
        id: OrderId,
        expiry: Expiry,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        self.expire(id, expiry).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(user.id = %user))]
    async fn resolve_stale(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError> {
        self.resolve(user, key, deadline).await
    }
}
