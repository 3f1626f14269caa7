//! `/webhook-endpoints`: a seller's own endpoints (another seller's answer 404, as missing ones).

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{
    CreateEndpoint, DeliveryPageBody, EndpointBody, EndpointListBody, PatchEndpoint, SecretBody,
};
use crate::problem::Problem;
use actix_web::dev::Payload;
use actix_web::http::header::LOCATION;
use actix_web::{FromRequest, HttpRequest, HttpResponse, web};
use goods_app::{WebhookError, Webhooks};
use goods_domain::webhook::DeliveryStatus;
use goods_domain::{EndpointId, UserId};
use serde::Deserialize;
use std::future::{Ready, ready};

/// The calling seller (401 or 403 otherwise) and the webhook feature (503
/// `WEBHOOKS_NOT_CONFIGURED` when the service offers none), as every route here needs them.
pub struct SellerHooks {
    seller: UserId,
    webhooks: Webhooks,
}

impl FromRequest for SellerHooks {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        ready(Self::extract(req, payload))
    }
}

impl SellerHooks {
    fn extract(req: &HttpRequest, payload: &mut Payload) -> Result<Self, actix_web::Error> {
        let who = Identity::from_request(req, payload).into_inner()?;
        let seller = who.seller()?.user_id;
        let webhooks = req
            .app_data::<web::Data<ApiState>>()
            .and_then(|state| state.app.webhooks().cloned())
            .ok_or_else(|| Problem::from(WebhookError::NotConfigured))?;
        Ok(Self { seller, webhooks })
    }
}

fn endpoint_id(raw: &str) -> Result<EndpointId, Problem> {
    path_id(raw, EndpointId::parse, "ENDPOINT_NOT_FOUND")
}

/// `POST /webhook-endpoints` (seller): 201 with the secret, shown this once.
pub async fn create(hooks: SellerHooks, body: Body) -> Result<HttpResponse, Problem> {
    let input: CreateEndpoint = body.json()?;
    let (endpoint, secret) = hooks.webhooks.create(hooks.seller, input.into()).await?;
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, format!("/webhook-endpoints/{}", endpoint.id)))
        .json(EndpointBody::created(endpoint, &secret)))
}

/// `GET /webhook-endpoints` (seller): their own.
pub async fn list(hooks: SellerHooks) -> Result<HttpResponse, Problem> {
    let endpoints = hooks.webhooks.list(hooks.seller).await?;
    Ok(HttpResponse::Ok().json(EndpointListBody::from(endpoints)))
}

/// `GET /webhook-endpoints/{endpointId}` (its seller).
pub async fn get(hooks: SellerHooks, id: web::Path<String>) -> Result<HttpResponse, Problem> {
    let id = endpoint_id(&id)?;
    let endpoint = hooks.webhooks.get(hooks.seller, id).await?;
    Ok(HttpResponse::Ok().json(EndpointBody::from(endpoint)))
}

/// `PATCH /webhook-endpoints/{endpointId}` (its seller): the fields given, and only those.
pub async fn update(
    hooks: SellerHooks,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let id = endpoint_id(&id)?;
    let patch: PatchEndpoint = body.json()?;
    let endpoint = hooks
        .webhooks
        .update(hooks.seller, id, patch.into())
        .await?;
    Ok(HttpResponse::Ok().json(EndpointBody::from(endpoint)))
}

/// `DELETE /webhook-endpoints/{endpointId}` (its seller): 204.
pub async fn delete(hooks: SellerHooks, id: web::Path<String>) -> Result<HttpResponse, Problem> {
    let id = endpoint_id(&id)?;
    hooks.webhooks.delete(hooks.seller, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /webhook-endpoints/{endpointId}/rotate-secret` (its seller): the new secret, this
/// once; the old one signs beside it for 24 h.
pub async fn rotate(
    hooks: SellerHooks,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let id = endpoint_id(&id)?;
    body.none()?;
    let secret = hooks.webhooks.rotate(hooks.seller, id).await?;
    Ok(HttpResponse::Ok().json(SecretBody::from(&secret)))
}

/// `GET .../deliveries` query parameters, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    status: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

/// `GET /webhook-endpoints/{endpointId}/deliveries?status=&cursor=&limit=` (its seller):
/// newest first.
pub async fn deliveries(
    hooks: SellerHooks,
    id: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    let id = endpoint_id(&id)?;
    let query = web::Query::<DeliveriesQuery>::from_query(req.query_string())
        .map_err(|e| Problem::malformed(format!("bad query: {e}")))?
        .into_inner();
    let status = query
        .status
        .map(|raw| {
            DeliveryStatus::parse(&raw)
                .ok_or_else(|| Problem::malformed("status must be PENDING, DELIVERED or FAILED"))
        })
        .transpose()?;
    let cursor = super::page_cursor(query.cursor, Ok::<i64, goods_domain::ValidationError>)?;
    let limit = super::page_limit(
        query.limit,
        Webhooks::DEFAULT_DELIVERIES,
        Webhooks::MAX_DELIVERIES,
    )?;
    let page = hooks
        .webhooks
        .deliveries(hooks.seller, id, status, cursor, limit)
        .await?;
    Ok(HttpResponse::Ok().json(DeliveryPageBody::from(page)))
}

/// `POST /webhook-endpoints/{endpointId}/deliveries/{eventId}/retry` (its seller): 202, the
/// delivery is sent again at the next round.
pub async fn retry(
    hooks: SellerHooks,
    path: web::Path<(String, String)>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let (id, event) = path.into_inner();
    let id = endpoint_id(&id)?;
    body.none()?;
    hooks.webhooks.retry(hooks.seller, id, &event).await?;
    Ok(HttpResponse::Accepted().finish())
}
