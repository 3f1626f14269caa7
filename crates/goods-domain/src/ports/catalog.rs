//! Reads and simple writes of products, drops and orders.

use crate::ports::GateSeed;
use crate::{
    DrawToSeal, DropId, Expiry, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop,
    NewLimitedDrop, NewProduct, OrderId, OrderStatus, Product, ProductId, UserId,
};
use async_trait::async_trait;
use time::OffsetDateTime;

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait ProductRepository: Send + Sync + 'static {
    /// Stores a new product with its initial stock.
    async fn create(&self, product: &NewProduct) -> Result<Product, InfraError>;

    /// The product with `id`, if any.
    async fn get(&self, id: ProductId) -> Result<Option<Product>, InfraError>;
}

pub use crate::drop::CreateDropError;

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait DropRepository: Send + Sync + 'static {
    /// Stores `drop` in one transaction with its checks against the product (it exists, its
    /// stock covers the drop, no other drop of it is open or scheduled at `now`) and, for a
    /// draw, its commitment and its seed sealed for the new id (never written again).
    ///
    /// # Errors
    /// The failed check; `QuotaExceeded` is counted under a lock of the owner's products, so
    /// racing creations cannot pass it together.
    async fn create(
        &self,
        drop: &NewLimitedDrop,
        draw: Option<DrawToSeal>,
        now: OffsetDateTime,
        seller_quota: Option<u32>,
    ) -> Result<LimitedDrop, CreateDropError>;

    /// The drop with `id`, if any.
    async fn get(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError>;

    /// The ids of the drops whose id is above `after` (all of them for `None`), ascending.
    async fn ids_after(&self, after: Option<DropId>) -> Result<Vec<DropId>, InfraError>;

    /// The drops among `ids` that exist, in one read.
    async fn get_many(&self, ids: &[DropId]) -> Result<Vec<LimitedDrop>, InfraError>;

    /// Units sold: the sum over the drop's orders that are not cancelled.
    async fn sold_quantity(&self, id: DropId) -> Result<u32, InfraError>;

    /// Units sold per size: [`sold_quantity`](Self::sold_quantity) by the orders' size
    /// (`None` for a drop without sizes); a size without such an order is absent.
    async fn sold_by_size(&self, id: DropId) -> Result<crate::batch::FreeUnits, InfraError>;

    /// Sets the drop's paused flag; `None` when there is no such drop.
    async fn set_paused(&self, id: DropId, paused: bool)
    -> Result<Option<LimitedDrop>, InfraError>;

    /// Ends the sale at `at` unless it has ended already, and lifts a pause. No order commits
    /// after this returns. Returns the drop as stored afterwards (an already closed drop
    /// unchanged); `None` when there is no such drop.
    async fn close(
        &self,
        id: DropId,
        at: OffsetDateTime,
    ) -> Result<Option<LimitedDrop>, InfraError>;

    /// Drops whose sale had not ended at `now`: `closeAt` after it, and not closed early before
    /// it. The healing pass asks with a time an hour back, so a drop that ended recently is
    /// still healed (its in-flight work settles, its draw is revealed).
    async fn list_unclosed(&self, now: OffsetDateTime) -> Result<Vec<LimitedDrop>, InfraError>;

    /// Everything an admission gate needs to be rebuilt from the database's truth.
    async fn gate_seed(&self, drop: &LimitedDrop) -> Result<GateSeed, InfraError>;
}

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait OrderRepository: Send + Sync + 'static {
    /// The order with `id`, if any.
    async fn get(&self, id: OrderId) -> Result<Option<GoodsOrder>, InfraError>;

    /// The order `user` created with `key`, if any.
    async fn find_by_key(
        &self,
        user: UserId,
        key: &IdempotencyKey,
    ) -> Result<Option<GoodsOrder>, InfraError>;

    /// A page of `query.user`'s orders, newest (highest id) first, below `query.before` when
    /// given.
    async fn list_for_buyer(&self, query: &OrderQuery) -> Result<Vec<GoodsOrder>, InfraError>;

    /// Up to `limit` PENDING orders past their payment window at `expiry`.
    async fn overdue(&self, expiry: Expiry, limit: u32) -> Result<Vec<OrderId>, InfraError>;

    /// Units of a drop's orders by status, in all and each size's.
    async fn units_by_status(&self, drop: DropId) -> Result<DropUnits, InfraError>;
}

/// Which of a buyer's orders to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderQuery {
    pub user: UserId,
    /// Only this drop's orders.
    pub drop: Option<DropId>,
    /// Only orders in this state.
    pub status: Option<OrderStatus>,
    /// Only orders with a lower id (the cursor of the previous page).
    pub before: Option<OrderId>,
    pub limit: u32,
}

/// Units of a drop's orders in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitsByStatus {
    /// Waiting for payment.
    pub pending: u32,
    pub paid: u32,
    /// Cancelled by their buyers.
    pub cancelled: u32,
    /// Not paid in time.
    pub expired: u32,
}

impl UnitsByStatus {
    /// Counts `units` of orders in `status`.
    pub fn add(&mut self, status: OrderStatus, units: u32) {
        let slot = match status {
            OrderStatus::Pending => &mut self.pending,
            OrderStatus::Paid => &mut self.paid,
            OrderStatus::Cancelled => &mut self.cancelled,
            OrderStatus::Expired => &mut self.expired,
        };
        *slot = slot.saturating_add(units);
    }

    /// Units sold: PENDING or PAID.
    pub fn sold(self) -> u32 {
        self.pending.saturating_add(self.paid)
    }
}

/// Units of a drop's orders in each state: in all, and each size's for a drop in sizes (a
/// size without orders has no entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropUnits {
    pub all: UnitsByStatus,
    pub sizes: std::collections::BTreeMap<crate::Sku, UnitsByStatus>,
}

impl DropUnits {
    /// Counts `units` of orders of `sku` (`None`: a drop without sizes) in `status`.
    pub fn add(&mut self, sku: Option<crate::Sku>, status: OrderStatus, units: u32) {
        self.all.add(status, units);
        if let Some(sku) = sku {
            self.sizes.entry(sku).or_default().add(status, units);
        }
    }

    /// A size's units (none for a size without orders).
    pub fn of(&self, sku: &crate::Sku) -> UnitsByStatus {
        self.sizes.get(sku).copied().unwrap_or_default()
    }
}
