//! `/payments/events` (the payment provider, signed) and `/admin/payments` (admins).

use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{PaymentAnswer, PaymentEventInput, PaymentPageBody};
use crate::problem::Problem;
use crate::signature;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use goods_app::ListPayments;
use goods_domain::PaymentOutcome;
use serde::Deserialize;

/// The provider's signature header.
const SIGNATURE: &str = "Payment-Signature";

/// `POST /payments/events`: the signature first (nothing about the body is read or recorded
/// without it), then the event, applied once.
pub async fn event(
    state: web::Data<ApiState>,
    req: HttpRequest,
    body: Body,
) -> Result<HttpResponse, Problem> {
    let Some(secret) = &state.payment_secret else {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PAYMENTS_NOT_CONFIGURED",
            "Payments not configured",
            "this service has no PAYMENT_WEBHOOK_SECRET; no payment event is accepted",
        ));
    };
    let header = req
        .headers()
        .get(SIGNATURE)
        .map(|v| v.to_str().unwrap_or_default());
    let now = state.app.ports().clock.now().unix_timestamp();
    signature::verify(secret.as_bytes(), header, body.bytes(), now).map_err(|error| {
        crate::refusals::refused("payment_signature", &error);
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "INVALID_SIGNATURE",
            "Invalid signature",
            error.to_string(),
        )
    })?;
    let input: PaymentEventInput = body.json()?;
    let event = input
        .into_domain()
        .map_err(|errors| Problem::validation(&errors))?;
    let record = state.app.orders().apply_payment(event).await?;
    let answer = PaymentAnswer::from(&record);
    if record.outcome == PaymentOutcome::OrderNotFound {
        return Err(
            Problem::not_found("ORDER_NOT_FOUND", "no such order; the event is recorded")
                .with("eventId", serde_json::json!(record.event.id.as_str()))
                .with("outcome", serde_json::json!(record.outcome.as_str())),
        );
    }
    Ok(HttpResponse::Ok().json(answer))
}

/// `GET /admin/payments` query parameters, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    outcome: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

impl ListQuery {
    fn parse(self) -> Result<ListPayments, Problem> {
        let bad = |what: &str| Problem::malformed(what.to_owned());
        Ok(ListPayments {
            outcome: self
                .outcome
                .map(|raw| {
                    PaymentOutcome::parse(&raw).ok_or_else(|| {
                        bad("outcome must be PAID, ALREADY_PAID, REFUND_REQUIRED, AMOUNT_MISMATCH, FAILED_RECORDED or ORDER_NOT_FOUND")
                    })
                })
                .transpose()?,
            after: super::page_cursor(self.cursor, Ok)?,
            limit: super::page_limit(self.limit, 20, 100)?,
        })
    }
}

/// `GET /admin/payments?outcome=&cursor=&limit=` (admins): recorded events, newest first.
pub async fn list(
    state: web::Data<ApiState>,
    who: Identity,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    let query = super::admin_query::<ListQuery>(&who, &req, "payments")?.parse()?;
    let page = state.app.payment_log().list(who.0, query).await?;
    Ok(HttpResponse::Ok().json(PaymentPageBody::from(page)))
}
