//! `/webhook-endpoints`: a seller's own endpoints (another seller's answer 404, as missing ones).

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{
    CreateEndpoint, DeliveryPageBody, EndpointBody, EndpointListBody, PatchEndpoint, SecretBody,
};
use crate::problem::Problem;
use actix_web::http::header::LOCATION;
use actix_web::{HttpRequest, HttpResponse, web};
use goods_app::{WebhookError, Webhooks};
use goods_domain::EndpointId;
use goods_domain::webhook::DeliveryStatus;
use serde::Deserialize;

fn webhooks(state: &ApiState) -> Result<&Webhooks, Problem> {
    state
        .app
        .webhooks()
        .ok_or_else(|| WebhookError::NotConfigured.into())
}

fn endpoint_id(raw: &str) -> Result<EndpointId, Problem> {
    path_id(raw, EndpointId::parse, "ENDPOINT_NOT_FOUND")
}

/// `POST /webhook-endpoints` (seller): 201 with the secret, shown this once.
pub async fn create(
    state: web::Data<ApiState>,
    who: Identity,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let input: CreateEndpoint = body.json()?;
    let (endpoint, secret) = webhooks(&state)?
        .create(seller.user_id, input.into())
        .await?;
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, format!("/webhook-endpoints/{}", endpoint.id)))
        .json(EndpointBody::created(endpoint, &secret)))
}

/// `GET /webhook-endpoints` (seller): their own.
pub async fn list(state: web::Data<ApiState>, who: Identity) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let endpoints = webhooks(&state)?.list(seller.user_id).await?;
    Ok(HttpResponse::Ok().json(EndpointListBody::from(endpoints)))
}

/// `GET /webhook-endpoints/{endpointId}` (its seller).
pub async fn get(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let id = endpoint_id(&id)?;
    let endpoint = webhooks(&state)?.get(seller.user_id, id).await?;
    Ok(HttpResponse::Ok().json(EndpointBody::from(endpoint)))
}

/// `PATCH /webhook-endpoints/{endpointId}` (its seller): the fields given, and only those.
pub async fn update(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let id = endpoint_id(&id)?;
    let patch: PatchEndpoint = body.json()?;
    let endpoint = webhooks(&state)?
        .update(seller.user_id, id, patch.into())
        .await?;
    Ok(HttpResponse::Ok().json(EndpointBody::from(endpoint)))
}

/// `DELETE /webhook-endpoints/{endpointId}` (its seller): 204.
pub async fn delete(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let id = endpoint_id(&id)?;
    webhooks(&state)?.delete(seller.user_id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /webhook-endpoints/{endpointId}/rotate-secret` (its seller): the new secret, this
/// once; the old one signs beside it for 24 h.
pub async fn rotate(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let id = endpoint_id(&id)?;
    body.none()?;
    let secret = webhooks(&state)?.rotate(seller.user_id, id).await?;
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
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
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
    let page = webhooks(&state)?
        .deliveries(seller.user_id, id, status, cursor, limit)
        .await?;
    Ok(HttpResponse::Ok().json(DeliveryPageBody::from(page)))
}

/// `POST /webhook-endpoints/{endpointId}/deliveries/{eventId}/retry` (its seller): 202, the
/// delivery is sent again at the next round.
pub async fn retry(
    state: web::Data<ApiState>,
    who: Identity,
    path: web::Path<(String, String)>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let (id, event) = path.into_inner();
    let id = endpoint_id(&id)?;
    body.none()?;
    webhooks(&state)?.retry(seller.user_id, id, &event).await?;
    Ok(HttpResponse::Accepted().finish())
}
