//! GetOrder.

use super::Orders;
use crate::{Actor, Role};
use goods_domain::{GoodsOrder, OrderId};

/// Why an order could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetOrderError {
    #[error("order not found")]
    NotFound,
    /// Neither its buyer, the seller of its product, nor an admin.
    #[error("not allowed to read this order")]
    Forbidden,
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

impl Orders {
    /// Reads an order: its buyer, the seller of its product, or an admin may.
    #[tracing::instrument(skip_all, fields(order.id = %id, user.id = %actor.user_id))]
    pub async fn get(&self, id: OrderId, actor: Actor) -> Result<GoodsOrder, GetOrderError> {
        let order = self.orders.get(id).await?.ok_or(GetOrderError::NotFound)?;
        if order.user_id == actor.user_id
            || (actor.role != Role::Buyer
                && crate::actor::manages_product(&*self.products, order.product_id, actor).await?)
        {
            Ok(self.settle(order).await?)
        } else {
            Err(GetOrderError::Forbidden)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::testing::OrderMocks;
    use crate::test_support::*;
    use goods_domain::{NewProduct, OrderStatus, Product, ProductId, Stock, UserId};

    fn product_of(owner: i64) -> Product {
        Product {
            id: ProductId::parse(1).unwrap(),
            name: NewProduct::parse("Sneaker", 10).unwrap().name,
            stock: Stock::new(10, 0),
            variants: Vec::new(),
            owner: Some(UserId::parse(owner).unwrap()),
        }
    }

    fn orders_holding(status: OrderStatus, deadline: Option<time::OffsetDateTime>) -> OrderMocks {
        let mut m = OrderMocks::new();
        m.orders.expect_get().returning(move |_| {
            Ok(Some(GoodsOrder {
                deadline,
                ..sample_order(status)
            }))
        });
        m.products
            .expect_get()
            .returning(|_| Ok(Some(product_of(5))));
        m
    }

    #[tokio::test]
    async fn its_buyer_its_seller_and_admins_read_an_order_and_nobody_else() {
        for (actor, readable) in [
            (buyer(), true),
            (seller(5), true),
            (admin(), true),
            (seller(6), false),
        ] {
            let result = orders_holding(OrderStatus::Pending, None)
                .freeing(0)
                .service()
                .get(order_id(), actor)
                .await;
            assert_eq!(result.is_ok(), readable, "{actor:?}: {result:?}");
            if !readable {
                assert!(
                    matches!(result, Err(GetOrderError::Forbidden)),
                    "{result:?}"
                );
            }
        }
        let mut m = OrderMocks::new();
        m.orders.expect_get().returning(|_| Ok(None));
        let missing = m.service().get(order_id(), buyer()).await;
        assert!(
            matches!(missing, Err(GetOrderError::NotFound)),
            "{missing:?}"
        );
    }

    #[tokio::test]
    async fn a_pending_order_read_past_its_deadline_is_expired_by_the_read_and_frees_its_units() {
        let mut m = orders_holding(OrderStatus::Pending, Some(OPEN)).freeing(1);
        m.ledger
            .expect_expire_order()
            .withf(|id, expiry| *id == order_id() && expiry.now == OPEN)
            .times(1)
            .returning(|_, _| Ok(Some(sample_order(OrderStatus::Expired))));
        let order = m.service().get(order_id(), buyer()).await.unwrap();
        assert_eq!(order.status, OrderStatus::Expired);
    }

    #[tokio::test]
    async fn an_order_someone_else_expired_first_is_read_again_and_frees_nothing_here() {
        let mut m = OrderMocks::new().freeing(0);
        let mut reads = 0;
        m.orders.expect_get().times(2).returning(move |_| {
            reads += 1;
            let status = if reads == 1 {
                OrderStatus::Pending
            } else {
                OrderStatus::Expired
            };
            Ok(Some(GoodsOrder {
                deadline: Some(OPEN),
                ..sample_order(status)
            }))
        });
        m.ledger
            .expect_expire_order()
            .times(1)
            .returning(|_, _| Ok(None));
        let order = m.service().get(order_id(), buyer()).await.unwrap();
        assert_eq!(order.status, OrderStatus::Expired);
    }
}
