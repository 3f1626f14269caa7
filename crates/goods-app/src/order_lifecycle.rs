//! The order's life after the purchase: payment, expiry of unpaid orders (by the healing pass,
//! and lazily when an order is read, listed, paid or cancelled after its deadline), and the
//! buyer's listing.
//!
//! Every change of an order's state is one ledger transaction that starts from a locked read of
//! the order, so a payment and an expiry of the same order run one after the other and exactly
//! one of them wins. Units given back by an expiry go back to the gate too (which tells every
//! instance's sold-out flag), exactly once: only the call that expired the order releases them.

use crate::{Actor, GoodsApp, Role, telemetry};
use goods_domain::ports::{self, OrderQuery, Paid, PayOrder};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, OrderId, OrderStatus, PaymentReference,
};

/// Why an order was not paid.
#[derive(Debug, thiserror::Error)]
pub enum PayOrderError {
    /// No such order.
    #[error("order not found")]
    NotFound,
    /// Not the order's buyer.
    #[error("only the buyer may pay an order")]
    Forbidden,
    /// Paid before, under another idempotency key.
    #[error("the order is paid already")]
    AlreadyPaid,
    /// The key paid this order with another reference.
    #[error("idempotency key reused for a different payment")]
    KeyReused,
    /// Cancelled or expired (also when the payment came after the deadline).
    #[error("an order in state {} cannot be paid", .0.as_str())]
    NotPayable(OrderStatus),
    /// The store failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// A payment's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaidOrder {
    /// The order, PAID.
    pub order: GoodsOrder,
    /// The same key and reference paid it before.
    pub replayed: bool,
}

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
    /// The orders.
    pub items: Vec<GoodsOrder>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<OrderId>,
}

impl GoodsApp {
    /// Pays the caller's order: `PENDING` -> `PAID`. The same key and reference again replay
    /// it; a payment after the order's deadline expires it instead and is refused.
    ///
    /// # Errors
    /// [`PayOrderError`] naming the refused condition.
    #[tracing::instrument(skip_all, fields(order.id = %id, user.id = %actor.user_id))]
    pub async fn pay_order(
        &self,
        id: OrderId,
        actor: Actor,
        key: IdempotencyKey,
        reference: PaymentReference,
    ) -> Result<PaidOrder, PayOrderError> {
        if actor.role != Role::Buyer {
            return Err(PayOrderError::Forbidden);
        }
        let now = self.ports.clock.now();
        let pay = PayOrder {
            id,
            by: actor.user_id,
            key,
            reference,
            now,
            cutoff: self.payment_window.cutoff(now),
        };
        let paid = self
            .ports
            .ledger
            .pay_order(&pay)
            .await
            .map_err(|e| match e {
                ports::PayOrderError::NotFound => PayOrderError::NotFound,
                ports::PayOrderError::NotOwner => PayOrderError::Forbidden,
                ports::PayOrderError::AlreadyPaid => PayOrderError::AlreadyPaid,
                ports::PayOrderError::KeyReused => PayOrderError::KeyReused,
                ports::PayOrderError::NotPayable(status) => PayOrderError::NotPayable(status),
                ports::PayOrderError::Infra(e) => PayOrderError::Unexpected(e.into()),
            })?;
        match paid {
            Paid::Now(order) => {
                metrics::counter!(telemetry::ORDER_TRANSITIONS, "to" => "PAID").increment(1);
                Ok(PaidOrder {
                    order,
                    replayed: false,
                })
            }
            Paid::Replayed(order) => Ok(PaidOrder {
                order,
                replayed: true,
            }),
            Paid::Expired(order) => {
                self.expired(&order).await;
                Err(PayOrderError::NotPayable(OrderStatus::Expired))
            }
        }
    }

    /// The caller's orders, newest first, a page at a time.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
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
    ///
    /// # Errors
    /// [`InfraError`] when the store fails; what was expired stays expired.
    pub async fn expire_overdue(&self) -> Result<usize, InfraError> {
        const BATCH: u32 = 200;
        const BATCHES_PER_PASS: usize = 10;
        let mut expired = 0;
        for _ in 0..BATCHES_PER_PASS {
            let cutoff = self.payment_window.cutoff(self.ports.clock.now());
            let due = self.ports.orders.overdue(cutoff, BATCH).await?;
            for id in &due {
                if let Some(order) = self.ports.ledger.expire_order(*id, cutoff).await? {
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
        if !order.is_overdue(now, self.payment_window) {
            return Ok(order);
        }
        let cutoff = self.payment_window.cutoff(now);
        if let Some(expired) = self.ports.ledger.expire_order(order.id, cutoff).await? {
            self.expired(&expired).await;
            return Ok(expired);
        }
        // Someone else changed it meanwhile: read what they left.
        Ok(self.ports.orders.get(order.id).await?.unwrap_or(order))
    }

    /// After the ledger expired `order`: the gate gets its units back (and tells every
    /// instance's sold-out flag), once, since only one call expires an order.
    pub(crate) async fn expired(&self, order: &GoodsOrder) {
        metrics::counter!(telemetry::ORDER_TRANSITIONS, "to" => "EXPIRED").increment(1);
        tracing::info!(order.id = %order.id, drop.id = %order.drop_id, "order expired unpaid");
        if let Some(gate) = &self.ports.gate
            && let Err(error) = gate
                .release(order.drop_id, order.user_id, order.quantity)
                .await
        {
            // As for a cancel: the database gave the units back; the healer resyncs a gate
            // that missed it once the same drift shows on two passes.
            tracing::warn!(error = %error, "gate did not take the expired units back");
        }
    }
}
