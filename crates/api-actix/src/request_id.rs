//! `X-Request-Id` on every response (echoed or generated), one tracing span per request with
//! the request id and the load-test run id, request counting for `/metrics`, and the two nets
//! under every handler: a panic becomes `500 INTERNAL` with the request id ([`crate::panics`]),
//! and a request past [`REQUEST_TIMEOUT`](crate::timeout::REQUEST_TIMEOUT) becomes `503`
//! ([`crate::timeout`]). One middleware for all of it keeps the per-request cost of the
//! cheapest answers (a sold-out refusal) low.

use crate::routes::RouteLabel;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use futures::FutureExt as _;
use std::panic::AssertUnwindSafe;
use std::time::Instant;
use tracing::Instrument as _;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const RUN_ID: &str = "x-load-test-run-id";

fn acceptable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())
}

/// The middleware.
///
/// # Errors
/// Whatever the inner service returns.
pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let run_id = req
        .headers()
        .get(RUN_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .unwrap_or("")
        .to_owned();
    let span = tracing::info_span!(
        "http.request",
        http.method = %req.method(),
        http.route = tracing::field::Empty,
        http.status = tracing::field::Empty,
        request.id = %id,
        load_test.run_id = %run_id,
    );
    let method = req.method().clone();
    let started = Instant::now();
    let guarded = AssertUnwindSafe(next.call(req)).catch_unwind();
    let answered = tokio::time::timeout(crate::timeout::REQUEST_TIMEOUT, guarded)
        .instrument(span.clone())
        .await;
    let answered = match answered {
        Ok(Ok(answered)) => answered,
        Ok(Err(panic)) => Err(crate::panics::internal(&panic, &id)),
        Err(_) => Err(crate::timeout::too_long()),
    };
    let mut response = match answered {
        Ok(response) => response,
        Err(error) => {
            // A handler's panic (see `panics`) or a framework error: the server renders it;
            // it is still counted and traced here.
            let status = error.as_response_error().status_code().as_u16();
            span.record("http.status", status);
            crate::metrics::observe(&method, "unmatched", status, started.elapsed());
            return Err(error);
        }
    };
    // Routing attached the route's label to the request; unmatched paths have none.
    let route = response
        .request()
        .app_data::<RouteLabel>()
        .map_or("unmatched", |label| label.0);
    let status = response.status().as_u16();
    span.record("http.route", route);
    span.record("http.status", status);
    crate::metrics::observe(&method, route, status, started.elapsed());
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    Ok(response)
}
