//! One middleware for `X-Request-Id`, the request's span (child of `traceparent`), the access
//! line, request metrics, and the two nets: a panic is `500 INTERNAL` ([`crate::panics`]), a
//! request past [`REQUEST_TIMEOUT`](crate::timeout::REQUEST_TIMEOUT) is `503`. One, so the
//! cheapest answers (a sold-out refusal) stay cheap.

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
const RUN_ID: HeaderName = HeaderName::from_static("x-load-test-run-id");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

fn acceptable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())
}

/// Request headers as OpenTelemetry's propagators read them.
struct Headers<'a>(&'a actix_web::http::header::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The access log line of one request (target `access`, level info), in the request's span.
fn answered_log(
    span: &tracing::Span,
    route: &'static str,
    status: u16,
    started: Instant,
    run_id: &str,
    id: &str,
) {
    if !tracing::enabled!(target: "access", tracing::Level::INFO) {
        return;
    }
    span.in_scope(|| {
        tracing::event!(
            target: "access",
            tracing::Level::INFO,
            { http.route = route, http.response.status_code = status, duration_ms = started.elapsed().as_secs_f64() * 1e3, request.id = id, load_test.run_id = run_id },
            "answered"
        );
    });
}

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
        .get(&RUN_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .unwrap_or("")
        .to_owned();
    let method_label = crate::metrics::method_label(req.method());
    // OpenTelemetry's HTTP server conventions; the name becomes "METHOD route" once routed.
    let span = tracing::info_span!(
        "http.request",
        otel.name = method_label,
        otel.kind = "server",
        http.request.method = method_label,
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        request.id = %id,
        load_test.run_id = %run_id,
        client.address = tracing::field::Empty,
    );
    if !span.is_disabled()
        && let Some(state) = req.app_data::<actix_web::web::Data<crate::ApiState>>()
        && let Some(client) = crate::rate::client_address(
            req.peer_addr().map(|a| a.ip()),
            req.headers(),
            &state.forwarders,
        )
    {
        span.record("client.address", tracing::field::display(client));
    }
    // A caller's W3C trace context (`traceparent`) makes this span a child of the caller's.
    if req.headers().contains_key(&TRACEPARENT) {
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&Headers(req.headers()))
        });
        let _ = tracing_opentelemetry::OpenTelemetrySpanExt::set_parent(&span, parent);
    }
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
            span.record("http.response.status_code", status);
            answered_log(&span, "unmatched", status, started, &run_id, &id);
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
    span.record("http.response.status_code", status);
    if !span.is_disabled() {
        // The exported span is named once it is routed ("POST /limited-drops/{dropId}/orders");
        // the OpenTelemetry span already exists by then, so it is renamed through its API.
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.context()
            .span()
            .update_name(format!("{method_label} {route}"));
    }
    answered_log(&span, route, status, started, &run_id, &id);
    crate::metrics::observe(&method, route, status, started.elapsed());
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    Ok(response)
}
