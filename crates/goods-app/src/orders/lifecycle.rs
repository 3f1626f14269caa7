//! The order's life after the purchase: expiry of unpaid orders (by the healing pass, and
//! lazily when an order is read, listed, paid or cancelled after its deadline), and the buyer's
//! listing. Payment is in [`crate::payments`].
//!
//! Every change of an order's state is one ledger transaction that starts from a locked read of
//! the order, so a payment and an expiry of the same order run one after the other and exactly
//! one of them wins. Units given back by an expiry go back to the gate too (which tells every
//! instance's sold-out flag), exactly once: only the call that expired the order releases them.

use crate::{Actor, GoodsApp, telemetry};
use goods_domain::ports::OrderQuery;
use goods_domain::{DropId, Expiry, GoodsOrder, InfraError, OrderId, OrderStatus};

/// Which of the caller's orders to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOrders {
    /// Only this drop's.
    pub drop: Option<DropId>,
    /// Only in this state.
    pub status: Option<OrderStatus>,
    /// The `nextCursor` of the previous page.
    pub after: Option<OrderId>,
    /// Page size, 1 to [`ListOrders::MAX_LIMIT`].
    pub limit: u32,
}

impl ListOrders {
    /// The largest page.
    pub const MAX_LIMIT: u32 = 100;
    /// The page size when none is asked for.
    pub const DEFAULT_LIMIT: u32 = 20;
}

/// A page of orders, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderPage {
    pub items: Vec<GoodsOrder>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<OrderId>,
}

impl GoodsApp {
    /// The caller's orders, newest first, a page at a time.
    #[tracing::instrument(skip_all, fields(user.id = %actor.user_id))]
    pub async fn list_orders(
        &self,
        actor: Actor,
        list: &ListOrders,
    ) -> Result<OrderPage, InfraError> {
        let limit = list.limit.clamp(1, ListOrders::MAX_LIMIT);
        let mut items = self
            .ports
            .orders
            .list_for_buyer(&OrderQuery {
                user: actor.user_id,
                drop: list.drop,
                status: list.status,
                before: list.after,
                // One more than asked tells whether a next page exists.
                limit: limit + 1,
            })
            .await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|o| o.id)
        } else {
            None
        };
        for order in &mut items {
            *order = self.settle_overdue(order.clone()).await?;
        }
        // An order listed as PENDING that just expired no longer matches the filter; it is
        // shown as it is now (the next listing leaves it out).
        Ok(OrderPage { items, next_cursor })
    }

    /// Expires every order past its payment window, in batches (the healing pass runs it).
    /// Every instance may run it at once: each order is expired by exactly one of them.
    /// Returns how many orders this call expired.
    pub async fn expire_overdue(&self) -> Result<usize, InfraError> {
        const BATCH: u32 = 200;
        const BATCHES_PER_PASS: usize = 10;
        let mut expired = 0;
        for _ in 0..BATCHES_PER_PASS {
            let expiry = Expiry::at(self.ports.clock.now(), self.payment_window);
            let due = self.ports.orders.overdue(expiry, BATCH).await?;
            for id in &due {
                if let Some(order) = self.ports.ledger.expire_order(*id, expiry).await? {
                    self.expired(&order).await;
                    expired += 1;
                }
            }
            if due.len() < BATCH as usize {
                break;
            }
        }
        Ok(expired)
    }

    /// `order` as it is now: an order still PENDING past its deadline is expired first (by
    /// this call, or by whoever got there first).
    pub(crate) async fn settle_overdue(&self, order: GoodsOrder) -> Result<GoodsOrder, InfraError> {
        let now = self.ports.clock.now();
        let expiry = Expiry::at(now, self.payment_window);
        if !order.is_overdue(expiry) {
            return Ok(order);
        }
        if let Some(expired) = self.ports.ledger.expire_order(order.id, expiry).await? {
            self.expired(&expired).await;
            return Ok(expired);
        }
        // Someone else changed it meanwhile: read what they left.
        Ok(self.ports.orders.get(order.id).await?.unwrap_or(order))
    }

    /// After the ledger expired `order`: its units go back, once, since only one call expires
    /// an order.
    pub(crate) async fn expired(&self, order: &GoodsOrder) {
        metrics::counter!(telemetry::ORDER_TRANSITIONS, "to" => "EXPIRED").increment(1);
        tracing::info!(order.id = %order.id, drop.id = %order.drop_id, "order expired unpaid");
        self.units_back(order).await;
    }

    /// After the ledger gave `order`'s units back (cancelled or expired, by exactly one call):
    /// the gate gets them back (and tells every instance's sold-out flag), or, in a draw drop,
    /// the first waitlisted entry does.
    pub(crate) async fn units_back(&self, order: &GoodsOrder) {
        self.drops.units_changed(order.drop_id);
        let draw = matches!(self.drops.load(order.drop_id).await, Ok(Some(d)) if d.mode.is_draw());
        if draw {
            self.promote_after(order);
            return;
        }
        if let Some(gate) = &self.ports.gate
            && let Err(error) = gate
                .release(order.drop_id, order.user_id, order.quantity)
                .await
        {
            // The database gave the units back; a gate that missed it under-sells until the
            // healer sees the same drift on two passes and resyncs it.
            tracing::warn!(error = %error, "gate did not take the units back");
        }
    }
}
