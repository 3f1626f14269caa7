//! The unit of work of a purchase: what must happen atomically in the source of truth.

pub use crate::order::CancelOrderError;
use crate::{
    DropId, Expiry, GoodsOrder, IdempotencyKey, InfraError, Money, OrderId, OrderStatus,
    PaymentEvent, PaymentRecord, PaymentWindow, Price, ProductId, Quantity, Sku, UserId,
};
use async_trait::async_trait;
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    pub drop_id: DropId,
    pub product_id: ProductId,
    pub limited_quantity: Quantity,
    pub per_user_limit: Quantity,
    /// The drop's unit price: the order's amount is fixed from it.
    pub price: Price,
    pub user_id: UserId,
    /// The size it buys (`None`: the drop has no sizes).
    pub sku: Option<Sku>,
    pub quantity: Quantity,
    pub key: IdempotencyKey,
    /// The order's creation time.
    pub now: OffsetDateTime,
    /// How long the order holds its units unpaid: its deadline is `now` plus this.
    pub window: PaymentWindow,
    /// The admission lease's end: the order commits only if the database's clock has not passed
    /// it when the drop row is updated (the last statement before COMMIT). `None` when
    /// no gate reserved the units (`GATE=off`, or the gate's breaker is open).
    pub deadline: Option<OffsetDateTime>,
}

impl PlaceOrder {
    /// When the order's payment window ends.
    pub fn deadline(&self) -> OffsetDateTime {
        self.now.saturating_add(self.window.length())
    }

    /// Whether `other` is of the same drop on the same terms (product, limits): what the orders
    /// of one batch share.
    pub fn same_drop_terms(&self, other: &Self) -> bool {
        self.drop_id == other.drop_id
            && self.product_id == other.product_id
            && self.limited_quantity == other.limited_quantity
            && self.per_user_limit == other.per_user_limit
            && self.price == other.price
    }

    /// What the order costs; `None` past 2^53 - 1, which only a quantity over the per-buyer
    /// limit can reach (a drop's price is validated against that limit), and such an order is
    /// refused.
    pub fn amount(&self) -> Option<Money> {
        self.price.amount_for(self.quantity)
    }

    /// The order that placing this creates, numbered `id` by the ledger: PENDING and unpaid,
    /// of this buyer, key, size and quantity, its [`amount`](Self::amount) fixed, created `now`,
    /// its payment window ending at [`deadline`](Self::deadline). `None` where the amount is
    /// (such an order is refused, never created).
    pub fn created(&self, id: OrderId) -> Option<GoodsOrder> {
        Some(GoodsOrder {
            id,
            drop_id: self.drop_id,
            product_id: self.product_id,
            user_id: self.user_id,
            sku: self.sku.clone(),
            quantity: self.quantity,
            amount: self.amount()?,
            status: OrderStatus::Pending,
            idempotency_key: self.key.clone(),
            created_at: self.now,
            deadline: Some(self.deadline()),
            payment: None,
        })
    }
}

/// How many orders one buyer may place in one drop, cancelled ones included: the per-buyer
/// limit plus ten cancel-and-rebuy cycles. Bounds what one buyer can churn (orders, markers,
/// restock messages) in a drop.
pub fn max_orders_per_buyer(per_user_limit: Quantity) -> u32 {
    per_user_limit.get().saturating_add(10)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    Created(GoodsOrder),
    /// The same buyer, key and request had already committed this order.
    Replayed(GoodsOrder),
}

/// One order's answer in a batch: committed (or replayed), or refused.
pub type Placement = Result<Placed, PlaceOrderError>;

/// Why a purchase was not committed. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PlaceOrderError {
    /// The drop (or the product's stock) has fewer units left than asked for.
    #[error("sold out: {remaining} left")]
    SoldOut { remaining: u32 },
    /// The buyer would hold more than the per-buyer limit.
    #[error("per-user limit {limit} exceeded")]
    PerUserLimitExceeded { limit: u32 },
    /// The buyer's key already belongs to a different request.
    #[error("idempotency key reused for a different request")]
    KeyReused,
    /// The buyer has placed as many orders in the drop as anyone may, cancelled ones included
    /// ([`max_orders_per_buyer`]): no more cancel-and-rebuy cycles.
    #[error("at most {limit} orders per buyer in this drop")]
    OrderLimitReached { limit: u32 },
    /// The admission lease ended before the transaction could commit; nothing was committed,
    /// and a resolution of the reservation may already have given its units back.
    #[error("the admission lease ended before the purchase committed")]
    LeaseExpired,
    /// The drop was closed (early) before the order could commit; a replay still wins.
    #[error("the drop is closed")]
    Closed,
    /// No purchase transaction could start in time (the fleet's write budget was spent);
    /// nothing was written.
    #[error("no database write permit in time")]
    Throttled,
    /// The store failed; nothing was committed.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl PlaceOrderError {
    /// The refusal's stable name (the contract's error code), kept as a voided draw entry's
    /// reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SoldOut { .. } => "SOLD_OUT",
            Self::PerUserLimitExceeded { .. } => "PER_USER_LIMIT_EXCEEDED",
            Self::KeyReused => "IDEMPOTENCY_KEY_REUSED",
            Self::OrderLimitReached { .. } => "ORDER_LIMIT_REACHED",
            Self::LeaseExpired => "LEASE_EXPIRED",
            Self::Closed => "CLOSED",
            Self::Throttled => "THROTTLED",
            Self::Infra(_) => "UNAVAILABLE",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// This call cancelled the order and gave its units back.
    Now(GoodsOrder),
    /// The order was cancelled before; nothing changed.
    Already(GoodsOrder),
    /// It was past its window: this call expired it and gave its units back (and cancelled
    /// nothing).
    Expired(GoodsOrder),
}

/// A payment event applied to its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedPayment {
    /// The event as recorded, with its outcome: the first application's, for a repeat.
    pub record: PaymentRecord,
    /// The event had been applied before: this call changed nothing.
    pub repeated: bool,
    /// The order, when this call expired it (a payment past the window: the units went back).
    pub expired: Option<GoodsOrder>,
}

/// Why a payment event was not applied. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum PaymentEventError {
    /// The event id was applied before with other contents.
    #[error("event id reused with another body")]
    EventIdReused,
    /// The store failed; nothing was recorded.
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
    /// Commits a batch of one drop's purchases (same drop terms) in one transaction, answering
    /// each as [`crate::batch::plan_batch`] decides; holds every invariant with no gate in front.
    ///
    /// # Errors
    /// The batch could not be committed at all: nothing was (or, when
    /// [`InfraError::is_unavailable`], it is unknown whether it was).
    async fn place_orders(&self, batch: &[PlaceOrder]) -> Result<Vec<Placement>, InfraError>;

    /// In one transaction: cancel `by`'s PENDING order within its window (expire it past it),
    /// giving its units back to stock, drop and buyer. Cancelling again changes nothing.
    async fn cancel_order(
        &self,
        id: OrderId,
        by: UserId,
        expiry: Expiry,
    ) -> Result<Cancelled, CancelOrderError>;

    /// In one transaction: records `event` once by its id with the outcome
    /// [`GoodsOrder::apply_payment`] decides on the locked order, and writes that change (PAID,
    /// or EXPIRED with its units back). A repeat (same id, same contents) answers the recorded
    /// outcome and changes nothing; of a payment and an expiry of one order exactly one wins.
    ///
    async fn apply_payment(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> Result<AppliedPayment, PaymentEventError>;

    /// In one transaction: expire the order if it is still PENDING and past its payment window
    /// at `expiry`, giving its units back to the product's stock, the drop's and the buyer's
    /// counts. `Some` only for the call that expired it.
    async fn expire_order(
        &self,
        id: OrderId,
        expiry: Expiry,
    ) -> Result<Option<GoodsOrder>, InfraError>;

    /// Decides a reservation whose lease ended at `deadline`, by a locking read of the (buyer,
    /// key) order and only once the database's clock is past `deadline`, so no purchase can
    /// commit after `Abandoned`.
    async fn resolve_stale(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError>;
}
