//! `/products`.

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{CreateProduct, ProductBody};
use crate::problem::Problem;
use actix_web::http::header::LOCATION;
use actix_web::{HttpResponse, web};
use goods_domain::{NewProduct, ProductId, VariantInput};

/// `POST /products` (seller).
pub async fn create(
    state: web::Data<ApiState>,
    who: Identity,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let input: CreateProduct = body.json()?;
    let variants: Option<Vec<VariantInput>> = input
        .variants
        .map(|variants| variants.into_iter().map(VariantInput::from).collect());
    let product = NewProduct::from_input(&input.name, input.stock_quantity, variants.as_deref())
        .map_err(|errors| Problem::validation(&errors))?
        .owned_by(seller.user_id);
    let product = state.app.products().create(&product).await?;
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, format!("/products/{}", product.id)))
        .json(ProductBody::from(product)))
}

/// `GET /products/{productId}` (buyers, its seller, admins; another seller gets 404).
pub async fn get(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let id = path_id(&id, ProductId::parse, "PRODUCT_NOT_FOUND")?;
    let product = state.app.products().get(id, who.0).await?;
    Ok(HttpResponse::Ok().json(ProductBody::from(product)))
}
