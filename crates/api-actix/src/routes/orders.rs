//! `/orders`.

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{OrderBody, OrderPageBody};
use crate::problem::Problem;
use actix_web::{HttpRequest, HttpResponse, web};
use goods_app::ListOrders;
use goods_domain::{OrderId, OrderStatus};
use serde::Deserialize;

fn order_id(raw: &str) -> Result<OrderId, Problem> {
    path_id(raw, OrderId::parse, "ORDER_NOT_FOUND")
}

/// `GET /orders/{orderId}` (its buyer, the owning seller, an admin).
pub async fn get(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let order = state.app.orders().get(order_id(&id)?, who.0).await?;
    Ok(HttpResponse::Ok().json(OrderBody::labelled(order, &state.app).await))
}

/// `POST /orders/{orderId}/cancel` (its buyer). Idempotent.
pub async fn cancel(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    if who.0.role == goods_app::Role::Buyer {
        state.app.limit_buyer(who.0.user_id, None).await?;
    }
    body.none()?;
    let order = state.app.orders().cancel(order_id(&id)?, who.0).await?;
    Ok(HttpResponse::Ok().json(OrderBody::labelled(order, &state.app).await))
}

/// `GET /orders` query parameters, as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    drop_id: Option<String>,
    status: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

impl ListQuery {
    fn parse(self) -> Result<ListOrders, Problem> {
        let bad = |what: &str| Problem::malformed(what.to_owned());
        Ok(ListOrders {
            drop: super::query_drop(self.drop_id)?,
            status: self
                .status
                .map(|raw| {
                    OrderStatus::parse(&raw)
                        .ok_or_else(|| bad("status must be PENDING, PAID, CANCELLED or EXPIRED"))
                })
                .transpose()?,
            after: super::page_cursor(self.cursor, OrderId::parse)?,
            limit: super::page_limit(self.limit, ListOrders::DEFAULT_LIMIT, ListOrders::MAX_LIMIT)?,
        })
    }
}

/// `GET /orders?dropId=&status=&cursor=&limit=` (a buyer): their own orders, newest first.
pub async fn list(
    state: web::Data<ApiState>,
    who: Identity,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    let buyer = who.buyer()?;
    let query = web::Query::<ListQuery>::from_query(req.query_string())
        .map_err(|e| Problem::malformed(format!("bad query: {e}")))?
        .into_inner()
        .parse()?;
    let page = state
        .app
        .orders()
        .list(buyer, &query)
        .await
        .map_err(Problem::from)?;
    Ok(HttpResponse::Ok().json(OrderPageBody::new(page, &state.app).await))
}
