//! CreateProduct and GetProduct: a service over the product repository alone.

use crate::{Actor, Role};
use goods_domain::ports::ProductRepository;
use goods_domain::{NewProduct, Product, ProductId};
use std::sync::Arc;

/// Why a product was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateProductError {
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

/// Why a product could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetProductError {
    /// No such product, or another seller's.
    #[error("product not found")]
    NotFound,
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

#[derive(Clone)]
pub struct Products {
    repo: Arc<dyn ProductRepository>,
}

impl Products {
    pub fn new(repo: Arc<dyn ProductRepository>) -> Self {
        Self { repo }
    }

    /// Creates a product with its initial stock.
    #[tracing::instrument(skip_all)]
    pub async fn create(&self, product: &NewProduct) -> Result<Product, CreateProductError> {
        Ok(self.repo.create(product).await?)
    }

    /// Reads a product and its stock. Buyers, its seller and admins may; to another seller
    /// it does not exist.
    #[tracing::instrument(skip_all, fields(product.id = %id))]
    pub async fn get(&self, id: ProductId, actor: Actor) -> Result<Product, GetProductError> {
        self.repo
            .get(id)
            .await?
            .filter(|p| actor.role == Role::Buyer || actor.manages(p.owner))
            .ok_or(GetProductError::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{admin, buyer, seller};
    use goods_domain::InfraError;
    use goods_domain::ports::MockProductRepository;
    use rstest::rstest;

    fn owned_by(owner: i64) -> Product {
        let product = NewProduct::parse("Sneaker", 10)
            .unwrap()
            .owned_by(goods_domain::UserId::parse(owner).unwrap());
        Product {
            id: ProductId::parse(3).unwrap(),
            name: product.name,
            stock: goods_domain::Stock::new(10, 0),
            variants: Vec::new(),
            owner: product.owner,
        }
    }

    fn holding(product: Option<Product>) -> Products {
        let mut repo = MockProductRepository::new();
        repo.expect_get()
            .withf(|id| id.get() == 3)
            .returning(move |_| Ok(product.clone()));
        Products::new(Arc::new(repo))
    }

    #[rstest]
    #[case::a_buyer(buyer(), true)]
    #[case::its_seller(seller(7), true)]
    #[case::an_admin(admin(), true)]
    #[case::another_seller(seller(8), false)]
    #[tokio::test]
    async fn a_product_is_seen_by_buyers_its_seller_and_admins_only(
        #[case] actor: Actor,
        #[case] sees: bool,
    ) {
        let read = holding(Some(owned_by(7)))
            .get(ProductId::parse(3).unwrap(), actor)
            .await;
        match read {
            Ok(product) => assert!(sees && product.stock.quantity() == 10),
            Err(GetProductError::NotFound) => assert!(!sees),
            Err(other) => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_missing_product_is_not_found_and_a_failing_store_is_infra() {
        let missing = holding(None)
            .get(ProductId::parse(3).unwrap(), buyer())
            .await;
        assert!(
            matches!(missing, Err(GetProductError::NotFound)),
            "{missing:?}"
        );
        let mut repo = MockProductRepository::new();
        repo.expect_create()
            .returning(|_| Err(InfraError::unavailable("pool timed out")));
        let created = Products::new(Arc::new(repo))
            .create(&NewProduct::parse("Sneaker", 1).unwrap())
            .await;
        assert!(
            matches!(&created, Err(CreateProductError::Infra(e)) if e.is_unavailable()),
            "{created:?}"
        );
    }
}
