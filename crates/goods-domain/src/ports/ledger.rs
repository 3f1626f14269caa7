//! The unit of work of a purchase: what must happen atomically in the source of truth.

use crate::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, OrderId, OrderStatus, ProductId, Quantity,
    UserId,
};
use async_trait::async_trait;
use time::OffsetDateTime;

/// A purchase to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    /// The drop.
    pub drop_id: DropId,
    /// The drop's product.
    pub product_id: ProductId,
    /// The drop's limit.
    pub limited_quantity: Quantity,
    /// The drop's per-buyer limit.
    pub per_user_limit: Quantity,
    /// The buyer.
    pub user_id: UserId,
    /// Units.
    pub quantity: Quantity,
    /// The buyer's idempotency key.
    pub key: IdempotencyKey,
    /// The order's creation time.
    pub now: OffsetDateTime,
    /// The admission lease's end: the transaction commits only if the database's clock has not
    /// passed it when the drop row is updated (the last statement before COMMIT). `None` when
    /// no gate reserved the units (`GATE=off`, or the gate's breaker is open).
    pub deadline: Option<OffsetDateTime>,
}

/// How many orders one buyer may place in one drop, cancelled ones included: the per-buyer
/// limit plus ten cancel-and-rebuy cycles. Bounds what one buyer can churn (orders, markers,
/// restock messages) in a drop.
pub fn max_orders_per_buyer(per_user_limit: Quantity) -> u32 {
    per_user_limit.get().saturating_add(10)
}

/// A committed purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// A new order was committed.
    Created(GoodsOrder),
    /// The same buyer, key and request had already committed this order.
    Replayed(GoodsOrder),
}

/// Why a purchase was not committed. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PlaceOrderError {
    /// The drop (or the product's stock) has fewer units left than asked for.
    #[error("sold out: {remaining} left")]
    SoldOut {
        /// Units left.
        remaining: u32,
    },
    /// The buyer would hold more than the per-buyer limit.
    #[error("per-user limit {limit} exceeded")]
    PerUserLimitExceeded {
        /// The limit.
        limit: u32,
    },
    /// The buyer's key already belongs to a different request.
    #[error("idempotency key reused for a different request")]
    KeyReused,
    /// The buyer has placed as many orders in the drop as anyone may, cancelled ones included
    /// ([`max_orders_per_buyer`]): no more cancel-and-rebuy cycles.
    #[error("at most {limit} orders per buyer in this drop")]
    OrderLimitReached {
        /// The cap.
        limit: u32,
    },
    /// The admission lease ended before the transaction could commit; nothing was committed,
    /// and a resolution of the reservation may already have given its units back.
    #[error("the admission lease ended before the purchase committed")]
    LeaseExpired,
    /// The store failed; nothing was committed.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// A cancellation's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// This call cancelled the order and gave its units back.
    Now(GoodsOrder),
    /// The order was cancelled before; nothing changed.
    Already(GoodsOrder),
}

/// Why an order was not cancelled.
#[derive(Debug, thiserror::Error)]
pub enum CancelOrderError {
    /// No such order.
    #[error("order not found")]
    NotFound,
    /// The order belongs to someone else.
    #[error("not the owner of the order")]
    NotOwner,
    /// The order's state does not allow it (paid).
    #[error("an order in state {} cannot be cancelled", .0.as_str())]
    NotCancellable(OrderStatus),
    /// The store failed; nothing changed.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// What the database says about a reservation whose lease has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaleResolution {
    /// Its purchase committed: this is the order (the units stay sold).
    Committed(GoodsOrder),
    /// No order exists and none can commit any more (the database's clock is past the lease):
    /// the units go back.
    Abandoned,
    /// The database's clock has not passed the lease yet; ask again later.
    Pending,
}

/// The source of truth's transactions. Each method is one database transaction that either
/// commits whole or leaves nothing behind.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait PurchaseLedger: Send + Sync + 'static {
    /// In one transaction: replay an existing order for (buyer, key); else add the units to the
    /// drop's sold count only if it stays within `limitedQuantity`, to the buyer's count only if
    /// it stays within `perUserLimit`, take them from the product's stock only if it covers
    /// them, and insert the PENDING order. Holds every invariant with no gate in front.
    ///
    /// # Errors
    /// [`PlaceOrderError`] naming the refused condition, or the store's failure.
    async fn place_order(&self, order: &PlaceOrder) -> Result<Placed, PlaceOrderError>;

    /// In one transaction: cancel the order if `by` owns it and it is PENDING, and give its
    /// units back to the product's stock, the drop's and the buyer's counts. Cancelling a
    /// cancelled order changes nothing.
    ///
    /// # Errors
    /// [`CancelOrderError`] naming the refused condition, or the store's failure.
    async fn cancel_order(&self, id: OrderId, by: UserId) -> Result<Cancelled, CancelOrderError>;

    /// Decides a reservation whose lease ended at `deadline`: with a locking read of the
    /// (buyer, key) order, so a purchase transaction still running is waited for, and only once
    /// the database's own clock is past `deadline` (the clock [`place_order`] checks), so no
    /// purchase can commit after an `Abandoned` answer.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    ///
    /// [`place_order`]: PurchaseLedger::place_order
    async fn resolve_stale(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError>;
}
