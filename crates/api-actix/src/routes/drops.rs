//! `/limited-drops`.

use super::path_id;
use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{
    CreateDrop, DropBody, EntryBody, EntryInput, OrderBody, Purchase, ReconciliationBody, StatsBody,
};
use crate::problem::Problem;
use actix_web::http::header::{HeaderName, LOCATION};
use actix_web::{HttpRequest, HttpResponse, ResponseError as _, web};
use goods_app::PurchaseCommand;
use goods_domain::{Currency, DropId, DropInput, DropMode, IdempotencyKey, Quantity, Sku};

fn drop_id(raw: &str) -> Result<DropId, Problem> {
    path_id(raw, DropId::parse, "DROP_NOT_FOUND")
}

/// The request's `Idempotency-Key` (400 `IDEMPOTENCY_KEY_REQUIRED` when missing or invalid).
pub(super) fn idempotency_key(req: &HttpRequest) -> Result<IdempotencyKey, Problem> {
    req.headers()
        .get(IDEMPOTENCY_KEY)
        .ok_or_else(|| key_required("is missing"))?
        .to_str()
        .map_err(|_| key_required("must be printable ASCII"))
        .and_then(|raw| IdempotencyKey::parse(raw).map_err(|e| key_required(&e.message)))
}

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

fn key_required(why: &str) -> Problem {
    Problem::new(
        actix_web::http::StatusCode::BAD_REQUEST,
        "IDEMPOTENCY_KEY_REQUIRED",
        "Idempotency-Key required",
        format!("Idempotency-Key {why}: send 1-255 printable ASCII characters"),
    )
}

/// `POST /limited-drops` (seller).
pub async fn create(
    state: web::Data<ApiState>,
    who: Identity,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let input: CreateDrop = body.json()?;
    let view = state
        .app
        .drops()
        .create(
            DropInput {
                product_id: input.product_id,
                open_at: input.open_at,
                close_at: input.close_at,
                limited_quantity: input.limited_quantity,
                variants: input
                    .variants
                    .map(|sizes| sizes.into_iter().map(Into::into).collect()),
                per_user_limit: input.per_user_limit.unwrap_or(1),
                price_minor: input.price_minor.unwrap_or(0),
                currency: input
                    .currency
                    .unwrap_or_else(|| Currency::NONE.as_str().to_owned()),
                mode: input
                    .mode
                    .unwrap_or_else(|| DropMode::FirstCome.as_str().to_owned()),
                entry_close_at: input.entry_close_at,
                payment_window_seconds: input.payment_window_seconds,
            },
            seller,
        )
        .await?;
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, format!("/limited-drops/{}", view.drop.id)))
        .json(DropBody::from(view)))
}

/// `GET /limited-drops/{dropId}` (anyone, no identity needed).
pub async fn get(
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let view = state.app.drops().get(drop_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(DropBody::from(view)))
}

/// `POST /limited-drops/{dropId}/entries` (buyer): 202 with the new entry, 200 with the
/// buyer's existing one. The request carries no body (an empty JSON object is accepted), or
/// `{sku}` for a draw drop in sizes.
pub async fn enter(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let buyer = who.buyer()?;
    state.app.limit_buyer(buyer.user_id, None).await?;
    let input: EntryInput = body.json_or_default()?;
    let entry = state
        .app
        .draws()
        .enter(drop_id(&id)?, buyer, input.sku.as_deref())
        .await?;
    let mut response = if entry.created {
        HttpResponse::Accepted()
    } else {
        HttpResponse::Ok()
    };
    Ok(response.json(EntryBody::from(entry)))
}

/// `GET /limited-drops/{dropId}/entries/me` (buyer): the buyer's entry and where it stands.
pub async fn my_entry(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let buyer = who.buyer()?;
    let entry = state.app.draws().my_entry(drop_id(&id)?, buyer).await?;
    Ok(HttpResponse::Ok().json(EntryBody::from(entry)))
}

/// `POST /limited-drops/{dropId}/orders`, in the contract's order of checks. Most answers are
/// refusals, so it renders its problem itself, not through actix's boxed `Error`.
pub async fn purchase(
    state: web::Data<ApiState>,
    who: Identity,
    req: HttpRequest,
    body: Body,
) -> HttpResponse {
    match purchase_inner(&state, &who, &req, &body).await {
        Ok((response, replayed)) => {
            crate::metrics::purchase_outcome(if replayed { "REPLAYED" } else { "SUCCESS" });
            response
        }
        Err(problem) => {
            crate::metrics::purchase_outcome(problem.code());
            problem.error_response()
        }
    }
}

async fn purchase_inner(
    state: &ApiState,
    who: &Identity,
    req: &HttpRequest,
    body: &Body,
) -> Result<(HttpResponse, bool), Problem> {
    let buyer = who.buyer()?;
    let drop = drop_id(req.match_info().get("dropId").unwrap_or_default());
    // Read before the rate limit, which a sold-out size answers from memory (no fleet bucket);
    // a body that does not parse is answered after the limit, as before.
    let input: Result<Purchase, Problem> = body.json();
    let size = input
        .as_ref()
        .ok()
        .and_then(|i| i.sku.as_deref())
        .and_then(|raw| Sku::parse("sku", raw).ok());
    state
        .app
        .limit_buyer(
            buyer.user_id,
            drop.as_ref().ok().map(|d| (*d, size.as_ref())),
        )
        .await?;
    let input = input?;
    let key = idempotency_key(req)?;
    let quantity =
        Quantity::parse("quantity", input.quantity).map_err(|e| Problem::validation(&[e]))?;
    let cmd = PurchaseCommand {
        drop_id: drop?,
        user_id: buyer.user_id,
        sku: input.sku,
        quantity,
        key,
    };
    let bought = state.app.purchase(cmd).await?;
    let mut response = HttpResponse::Accepted();
    response.insert_header((LOCATION, format!("/orders/{}", bought.order.id)));
    if bought.replayed {
        response.insert_header(("Idempotent-Replayed", "true"));
    }
    Ok((
        response.json(OrderBody::labelled(bought.order, &state.app).await),
        bought.replayed,
    ))
}

/// `POST /limited-drops/{dropId}/pause` (the owning seller, an admin).
pub async fn pause(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    set_paused(&state, &who, &id, &body, true).await
}

/// `POST /limited-drops/{dropId}/resume` (the owning seller, an admin).
pub async fn resume(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    set_paused(&state, &who, &id, &body, false).await
}

async fn set_paused(
    state: &ApiState,
    who: &Identity,
    id: &str,
    body: &Body,
    paused: bool,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    body.none()?;
    let view = state
        .app
        .drops()
        .set_paused(drop_id(id)?, seller, paused)
        .await?;
    Ok(HttpResponse::Ok().json(DropBody::from(view)))
}

/// `POST /limited-drops/{dropId}/close` (the owning seller, an admin). Idempotent.
pub async fn close(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    body.none()?;
    let view = state.app.drops().close(drop_id(&id)?, seller).await?;
    Ok(HttpResponse::Ok().json(DropBody::from(view)))
}

/// `GET /limited-drops/{dropId}/stats` (seller).
pub async fn stats(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let stats = state.app.drops().stats(drop_id(&id)?, seller).await?;
    Ok(HttpResponse::Ok().json(StatsBody::from(stats)))
}

/// `GET /limited-drops/{dropId}/reconciliation` (seller).
pub async fn reconciliation(
    state: web::Data<ApiState>,
    who: Identity,
    id: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let seller = who.seller()?;
    let report = state
        .app
        .reconciler()
        .reconcile(drop_id(&id)?, seller)
        .await?;
    Ok(HttpResponse::Ok().json(ReconciliationBody::from(report)))
}
