//! Products and their stock.

use super::SqlStore;
use super::queries::last_insert_id;
use crate::rows::{ProductRow, VariantRow, column, units};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use goods_domain::ports::ProductRepository;
use goods_domain::{
    InfraError, NewProduct, Product, ProductId, ProductName, ProductVariant, Stock, UserId,
};

/// `products.owner_id` of a product no seller owns (created before ownership existed).
const NO_OWNER: i64 = 0;

#[async_trait]
impl<B: Backend> ProductRepository for SqlStore<B> {
    async fn create(&self, product: &NewProduct) -> Result<Product, InfraError> {
        let name = product.name.as_str().to_owned();
        let owner = product.owner.map_or(NO_OWNER, UserId::get);
        let stock = column(product.stock_quantity);
        let variants = &product.variants;
        let id: i64 = self
            .write_tx::<_, std::convert::Infallible, InfraError, _>(
                "create product",
                |_| false,
                |c, _| {
                    let name = name.clone();
                    Box::pin(async move {
                        c.run(
                            Sql::new("INSERT INTO products (name, owner_id) VALUES (")
                                .bind(Bind::Text(name))
                                .sql(", ")
                                .bind(Bind::BigInt(owner))
                                .sql(")"),
                        )
                        .await?;
                        let id = last_insert_id::<B>(c).await?;
                        c.run(
                            Sql::new("INSERT INTO stocks (product_id, quantity, version) VALUES (")
                                .bind(Bind::BigInt(id))
                                .sql(", ")
                                .bind(Bind::Integer(stock))
                                .sql(", 0)"),
                        )
                        .await?;
                        if !variants.is_empty() {
                            c.run(insert_variants(id, variants)).await?;
                        }
                        Ok::<_, TxError<std::convert::Infallible>>(id)
                    })
                },
            )
            .await?;
        Ok(Product {
            id: ProductId::parse(id).map_err(|e| InfraError::new("product id", e))?,
            name: product.name.clone(),
            stock: Stock::new(product.stock_quantity, 0),
            variants: product.variants.clone(),
            owner: product.owner,
        })
    }

    async fn get(&self, id: ProductId) -> Result<Option<Product>, InfraError> {
        let rows: Vec<ProductRow> = self
            .read(
                "get product",
                Sql::new(
                    "SELECT products.id, products.name, stocks.quantity, stocks.version, \
                     products.owner_id FROM products \
                     INNER JOIN stocks ON stocks.product_id = products.id WHERE products.id = ",
                )
                .bind(Bind::BigInt(id.get())),
            )
            .await?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let variants = variants(
            self.read("get product variants", variants_of(id.get()))
                .await?,
        )?;
        Ok(Some(Product {
            id,
            variants,
            name: ProductName::parse(&row.name)
                .map_err(|e| InfraError::new("corrupt product row", e))?,
            stock: Stock::new(units(row.quantity, "stock")?, row.version),
            // 0 is the backfill's "no seller" (user ids are positive).
            owner: UserId::parse(row.owner_id).ok(),
        }))
    }
}

/// One multi-row INSERT of a new product's variants, each at its place in the seller's list.
fn insert_variants(product: i64, variants: &[ProductVariant]) -> Sql {
    Sql::for_rows(variants.len())
        .sql("INSERT INTO product_variants (product_id, sku, position, label, stock) VALUES ")
        .list(variants.iter().enumerate(), |q, (position, variant)| {
            q.sql("(")
                .bind(Bind::BigInt(product))
                .sql(", ")
                .bind(Bind::Text(variant.sku.as_str().to_owned()))
                .sql(", ")
                .bind(Bind::Integer(i32::try_from(position).unwrap_or(i32::MAX)))
                .sql(", ")
                .bind(Bind::Text(variant.label.as_str().to_owned()))
                .sql(", ")
                .bind(Bind::Integer(column(variant.stock)))
                .sql(")")
        })
}

/// The statement reading a product's variants, in its seller's order.
pub(super) fn variants_of(product: i64) -> Sql {
    Sql::new("SELECT sku, label, stock FROM product_variants WHERE product_id = ")
        .bind(Bind::BigInt(product))
        .sql(" ORDER BY position")
}

/// The variants [`variants_of`] read.
pub(super) fn variants(rows: Vec<VariantRow>) -> Result<Vec<ProductVariant>, InfraError> {
    rows.into_iter().map(VariantRow::into_domain).collect()
}
