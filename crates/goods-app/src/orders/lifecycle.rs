//! Expiry of unpaid orders (by the healing pass, and lazily whenever an order is touched after
//! its deadline) and the buyer's listing. Each change is one ledger transaction from a locked
//! read, so of a payment and an expiry exactly one wins, and only the call that expired an
//! order gives its units back to the gate.

use super::Orders;
use crate::{Actor, telemetry};
use goods_domain::ports::OrderQuery;
use goods_domain::{DropId, Expiry, GoodsOrder, InfraError, OrderId, OrderStatus};

/// Which of the caller's orders to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOrders {
    pub drop: Option<DropId>,
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

impl Orders {
    /// The caller's orders, newest first, a page at a time.
    #[tracing::instrument(skip_all, fields(user.id = %actor.user_id))]
    pub async fn list(&self, actor: Actor, list: &ListOrders) -> Result<OrderPage, InfraError> {
        let limit = list.limit.clamp(1, ListOrders::MAX_LIMIT);
        let mut items = self
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
            *order = self.settle(order.clone()).await?;
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
            let expiry = Expiry::at(self.clock.now(), self.payment_window);
            let due = self.orders.overdue(expiry, BATCH).await?;
            for id in &due {
                if let Some(order) = self.ledger.expire_order(*id, expiry).await? {
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
    pub(crate) async fn settle(&self, order: GoodsOrder) -> Result<GoodsOrder, InfraError> {
        let now = self.clock.now();
        let expiry = Expiry::at(now, self.payment_window);
        if !order.is_overdue(expiry) {
            return Ok(order);
        }
        if let Some(expired) = self.ledger.expire_order(order.id, expiry).await? {
            self.expired(&expired).await;
            return Ok(expired);
        }
        // Someone else changed it meanwhile: read what they left.
        Ok(self.orders.get(order.id).await?.unwrap_or(order))
    }

    /// After the ledger expired `order`: its units go back, once, since only one call expires
    /// an order.
    pub(crate) async fn expired(&self, order: &GoodsOrder) {
        metrics::counter!(telemetry::ORDER_TRANSITIONS, "to" => "EXPIRED").increment(1);
        tracing::info!(order.id = %order.id, drop.id = %order.drop_id, "order expired unpaid");
        self.freed.units_back(order).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::testing::OrderMocks;
    use crate::test_support::*;

    fn numbered(id: i64) -> GoodsOrder {
        GoodsOrder {
            id: OrderId::parse(id).unwrap(),
            ..sample_order(OrderStatus::Paid)
        }
    }

    #[tokio::test]
    async fn a_page_asks_one_more_than_it_shows_and_names_its_last_order_as_the_cursor() {
        let mut m = OrderMocks::new().freeing(0);
        m.orders
            .expect_list_for_buyer()
            .withf(|q| q.limit == 3 && q.user == buyer().user_id && q.before.is_none())
            .times(1)
            .returning(|_| Ok((0..3).map(|i| numbered(9 - i)).collect()));
        let list = ListOrders {
            drop: None,
            status: None,
            after: None,
            limit: 2,
        };
        let page = m.service().list(buyer(), &list).await.unwrap();
        let ids: Vec<i64> = page.items.iter().map(|o| o.id.get()).collect();
        assert_eq!(ids, [9, 8]);
        assert_eq!(page.next_cursor, Some(OrderId::parse(8).unwrap()));
    }

    #[tokio::test]
    async fn expiry_runs_in_batches_of_200_and_frees_only_what_this_call_expired() {
        let mut m = OrderMocks::new().freeing(399);
        let mut batch = 0;
        m.orders
            .expect_overdue()
            .times(3)
            .returning(move |_, limit| {
                assert_eq!(limit, 200);
                let first = batch * 200 + 1;
                batch += 1;
                let ids = if batch < 3 { first..first + 200 } else { 0..0 };
                Ok(ids.map(|i| OrderId::parse(i).unwrap()).collect())
            });
        // Order 7 was expired by another instance first.
        m.ledger
            .expect_expire_order()
            .times(400)
            .returning(|id, _| Ok((id.get() != 7).then(|| sample_order(OrderStatus::Expired))));
        assert_eq!(m.service().expire_overdue().await.unwrap(), 399);
    }
}
