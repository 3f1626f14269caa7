//! CreateProduct and GetProduct.

use crate::{Actor, GoodsApp, Role};
use goods_domain::{NewProduct, Product, ProductId};

/// Why a product was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateProductError {
    /// The store failed.
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

/// Why a product could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetProductError {
    /// No such product.
    #[error("product not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

impl GoodsApp {
    /// Creates a product with its initial stock.
    ///
    /// # Errors
    /// [`CreateProductError::Infra`] when the store fails.
    #[tracing::instrument(skip_all)]
    pub async fn create_product(
        &self,
        product: &NewProduct,
    ) -> Result<Product, CreateProductError> {
        Ok(self.ports.products.create(product).await?)
    }

    /// Reads a product and its stock. Buyers, its seller and admins may; to another seller
    /// it does not exist.
    ///
    /// # Errors
    /// [`GetProductError::NotFound`], or `Infra` when the store fails.
    #[tracing::instrument(skip_all, fields(product.id = %id))]
    pub async fn get_product(
        &self,
        id: ProductId,
        actor: Actor,
    ) -> Result<Product, GetProductError> {
        self.ports
            .products
            .get(id)
            .await?
            .filter(|p| actor.role == Role::Buyer || actor.manages(p.owner))
            .ok_or(GetProductError::NotFound)
    }
}
