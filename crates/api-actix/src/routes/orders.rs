//! `/orders`.

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::dto::OrderBody;
use crate::problem::Problem;
use actix_web::{HttpResponse, web};
use goods_domain::OrderId;

fn order_id(raw: &str) -> Result<OrderId, Problem> {
    path_id(raw, OrderId::parse, "ORDER_NOT_FOUND")
}

/// `GET /orders/{orderId}` (its buyer, or a seller).
pub async fn get(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let order = state.app.get_order(order_id(&id)?, who.0).await?;
    Ok(HttpResponse::Ok().json(OrderBody::from(order)))
}

/// `POST /orders/{orderId}/cancel` (its buyer). Idempotent.
pub async fn cancel(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let order = state.app.cancel_order(order_id(&id)?, who.0).await?;
    Ok(HttpResponse::Ok().json(OrderBody::from(order)))
}
