//! GetOrder.

use crate::{Actor, GoodsApp, Role};
use goods_domain::{GoodsOrder, OrderId};

/// Why an order could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetOrderError {
    /// No such order.
    #[error("order not found")]
    NotFound,
    /// Neither its buyer, the seller of its product, nor an admin.
    #[error("not allowed to read this order")]
    Forbidden,
    /// The store failed.
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

impl GoodsApp {
    /// Reads an order: its buyer, the seller of its product, or an admin may.
    ///
    /// # Errors
    /// [`GetOrderError`] when it does not exist or the caller may not read it.
    #[tracing::instrument(skip_all, fields(order.id = %id, user.id = %actor.user_id))]
    pub async fn get_order(&self, id: OrderId, actor: Actor) -> Result<GoodsOrder, GetOrderError> {
        let order = self
            .ports
            .orders
            .get(id)
            .await?
            .ok_or(GetOrderError::NotFound)?;
        if order.user_id == actor.user_id
            || (actor.role != Role::Buyer && self.manages_product(order.product_id, actor).await?)
        {
            Ok(self.settle_overdue(order).await?)
        } else {
            Err(GetOrderError::Forbidden)
        }
    }
}
