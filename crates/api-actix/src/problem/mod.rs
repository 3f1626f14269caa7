//! `application/problem+json` (RFC 9457) errors: the type, its rendering, and the one mapping
//! of an infrastructure failure. The use cases' errors map to it in [`mappings`].

mod mappings;

use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, ResponseError};
use goods_domain::{InfraError, ValidationError};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The body of a drop's commonest answer, `SOLD_OUT` with nothing left, rendered once: every
/// buyer turned away after the sell-out gets the same bytes.
static SOLD_OUT_NONE_LEFT: LazyLock<Bytes> = LazyLock::new(|| Problem::sold_out(0).render());

fn sold_out_none_left() -> &'static [u8] {
    &SOLD_OUT_NONE_LEFT
}

/// How many sizes' sold-out bodies are kept for the life of the process (skus repeat from drop
/// to drop; at about 150 bytes each this is at most some 600 KB; past it, a size's body is
/// rendered per request).
const SIZE_BODIES: usize = 4096;

/// The `SOLD_OUT` bodies of sold-out sizes (nothing left of it), rendered once per sku: a
/// size's refusal costs what a drop without sizes' does.
static SIZE_SOLD_OUT: LazyLock<
    std::sync::RwLock<std::collections::HashMap<goods_domain::Sku, &'static [u8]>>,
> = LazyLock::new(Default::default);

/// The body of `sku`'s SOLD_OUT with nothing left, kept once rendered; `None` when the kept
/// bodies are at [`SIZE_BODIES`] (render it per request).
fn size_sold_out_none_left(sku: &goods_domain::Sku) -> Option<&'static [u8]> {
    if let Some(body) = SIZE_SOLD_OUT.read().ok().and_then(|b| b.get(sku).copied()) {
        return Some(body);
    }
    let mut bodies = SIZE_SOLD_OUT.write().ok()?;
    if let Some(body) = bodies.get(sku) {
        return Some(body);
    }
    if bodies.len() >= SIZE_BODIES {
        return None;
    }
    let rendered = Problem::sold_out(0)
        .with("sku", json!(sku.as_str()))
        .render();
    let body: &'static [u8] = Vec::leak(rendered.to_vec());
    bodies.insert(sku.clone(), body);
    Some(body)
}

/// The IETF `RateLimit-Policy` and `RateLimit` header values of a `RATE_LIMITED` answer.
#[derive(Debug)]
struct RateHeaders {
    policy: String,
    state: String,
}

/// A problem response: status, stable code, human text and extension members.
#[derive(Debug)]
pub struct Problem {
    status: StatusCode,
    code: &'static str,
    title: &'static str,
    detail: Cow<'static, str>,
    extensions: Vec<(&'static str, Value)>,
    /// `Retry-After`, in seconds (never 0: a client must not retry at once).
    retry_after: Option<std::num::NonZeroU64>,
    /// The rate limit's headers, boxed: most problems have none.
    rate: Option<Box<RateHeaders>>,
    /// The body, when it was rendered once for all requests (see [`SOLD_OUT_NONE_LEFT`]).
    rendered: Option<&'static [u8]>,
}

impl Problem {
    /// The problem's `code`, as in the body.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// A problem with no extensions.
    pub fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            status,
            code,
            title,
            detail: detail.into(),
            extensions: Vec::new(),
            retry_after: None,
            rate: None,
            rendered: None,
        }
    }

    pub fn with(mut self, key: &'static str, value: Value) -> Self {
        self.extensions.push((key, value));
        self.rendered = None;
        self
    }

    /// 409 SOLD_OUT with the units left.
    fn sold_out(remaining: u32) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "SOLD_OUT",
            "Sold out",
            "fewer units left than requested",
        )
        .with("remaining", json!(remaining))
    }

    fn render(&self) -> Bytes {
        let mut body = Vec::with_capacity(256);
        // A map of strings and JSON values cannot fail to serialise into a Vec.
        let _ = serde_json::to_writer(&mut body, &ProblemBody(self));
        Bytes::from(body)
    }

    /// 429 `RATE_LIMITED`: a token bucket refused the request. `Retry-After` in whole seconds
    /// rounded up, and the IETF `RateLimit-Policy` (the bucket: `q` requests at once, full
    /// again in `w` seconds) and `RateLimit` (`r` left, full again in `t` seconds) headers.
    pub fn rate_limited(limited: &goods_app::RateLimited) -> Self {
        let (policy, decision) = (limited.key.policy(), limited.decision);
        let wait = decision.retry_after_seconds();
        let mut problem = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMITED",
            "Too many requests",
            format!("over the {policy} rate limit; retry in {wait} s"),
        )
        .retry_after(wait);
        problem.rate = Some(Box::new(RateHeaders {
            policy: format!(
                "\"{policy}\";q={};w={}",
                limited.limit.burst(),
                goods_domain::rate::ceil_seconds(limited.limit.window())
            ),
            state: format!(
                "\"{policy}\";r={};t={}",
                decision.remaining,
                decision.reset_seconds()
            ),
        }));
        problem
    }

    /// Adds a `Retry-After` header, in seconds.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = std::num::NonZeroU64::new(seconds.max(1));
        self
    }

    /// 400 MALFORMED_REQUEST.
    pub fn malformed(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "MALFORMED_REQUEST",
            "Malformed request",
            detail,
        )
    }

    /// 401 UNAUTHENTICATED.
    pub fn unauthenticated(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "Authentication required",
            detail,
        )
    }

    /// 403 FORBIDDEN.
    pub fn forbidden(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", "Forbidden", detail)
    }

    /// 404 with a resource-specific code.
    pub fn not_found(code: &'static str, detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, "Not found", detail)
    }

    /// 422 VALIDATION_FAILED listing every failing field.
    pub fn validation(errors: &[ValidationError]) -> Self {
        let fields: Vec<Value> = errors
            .iter()
            .map(|e| json!({"field": e.field, "message": e.message}))
            .collect();
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION_FAILED",
            "Validation failed",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
        .with("errors", Value::Array(fields))
    }

    /// 503 SERVICE_UNAVAILABLE: the database did not answer within its bound.
    pub fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "SERVICE_UNAVAILABLE",
            "Service unavailable",
            "the database did not answer in time; retry with the same Idempotency-Key",
        )
        .retry_after(1)
    }
}

/// The one mapping of an infrastructure failure: 503 `SERVICE_UNAVAILABLE` when a bound on the
/// database ran out ([`InfraError::is_unavailable`]), else 500 `INTERNAL`. The cause is logged
/// once, here, and the client is told nothing about it.
impl From<InfraError> for Problem {
    fn from(error: InfraError) -> Self {
        if error.is_unavailable() {
            tracing::warn!(error = format!("{error:#}"), "database unavailable");
            return Self::unavailable();
        }
        tracing::error!(error = format!("{error:#}"), "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "Internal error",
            "the request could not be completed; it changed nothing that was not committed",
        )
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.detail)
    }
}

impl ResponseError for Problem {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        response.insert_header((CONTENT_TYPE, PROBLEM_JSON));
        if let Some(seconds) = self.retry_after {
            response.insert_header((RETRY_AFTER, HeaderValue::from(seconds.get())));
        }
        if let Some(rate) = &self.rate {
            response.insert_header(("RateLimit-Policy", rate.policy.as_str()));
            response.insert_header(("RateLimit", rate.state.as_str()));
        }
        let body = self
            .rendered
            .map_or_else(|| self.render(), Bytes::from_static);
        let mut response = response.body(body);
        if self.status.as_u16() == 425 {
            // The http crate has no reason phrase for 425; RFC 8470 names it.
            response.head_mut().reason = Some("Too Early");
        }
        response
    }
}

/// The serialised form: the RFC 9457 members, `code`, then the extensions.
struct ProblemBody<'a>(&'a Problem);

impl serde::Serialize for ProblemBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let p = self.0;
        let mut map = serializer.serialize_map(Some(5 + p.extensions.len()))?;
        map.serialize_entry("type", &ProblemType(p.code))?;
        map.serialize_entry("title", p.title)?;
        map.serialize_entry("status", &p.status.as_u16())?;
        map.serialize_entry("detail", &p.detail)?;
        map.serialize_entry("code", p.code)?;
        for (key, value) in &p.extensions {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `/problems/sold-out` for `SOLD_OUT`, written without an intermediate string.
struct ProblemType(&'static str);

impl serde::Serialize for ProblemType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for ProblemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("/problems/")?;
        for c in self.0.chars() {
            fmt::Write::write_char(
                f,
                if c == '_' {
                    '-'
                } else {
                    c.to_ascii_lowercase()
                },
            )?;
        }
        Ok(())
    }
}

/// Rewrites an error response that did not come from a [`Problem`] (the framework's own: a body
/// over the size limit, a request it could not read) into problem+json, so every error a client
/// sees has a `code`.
pub fn framework_errors<B>(res: ServiceResponse<B>) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_problem = res
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if is_problem {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let problem = match status.as_u16() {
        413 => Problem::new(
            status,
            "PAYLOAD_TOO_LARGE",
            "Payload too large",
            "the request body is larger than 64 KiB",
        ),
        404 => Problem::not_found("NOT_FOUND", "no such resource"),
        400..=499 => Problem::new(
            status,
            "MALFORMED_REQUEST",
            "Malformed request",
            "the request could not be read",
        ),
        _ => Problem::new(
            status,
            "INTERNAL",
            "Internal error",
            "the request could not be completed",
        ),
    };
    let (req, _) = res.into_parts();
    let res = ServiceResponse::new(req, problem.error_response()).map_into_right_body();
    Ok(ErrorHandlerResponse::Response(res))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::MessageBody as _;
    use goods_app::PurchaseError;
    use time::OffsetDateTime;

    fn body(problem: &Problem) -> Bytes {
        problem
            .error_response()
            .into_body()
            .try_into_bytes()
            .unwrap_or_default()
    }

    #[test]
    fn the_shared_sold_out_body_is_the_one_rendered_per_request() {
        let shared = Problem::from(PurchaseError::SoldOut {
            remaining: 0,
            sku: None,
        });
        assert!(shared.rendered.is_some());
        assert_eq!(body(&shared), Problem::sold_out(0).render());
        let parsed: Value = serde_json::from_slice(&body(&shared)).unwrap_or_default();
        assert_eq!(
            parsed,
            json!({"type": "/problems/sold-out", "title": "Sold out", "status": 409,
                   "detail": "fewer units left than requested", "code": "SOLD_OUT", "remaining": 0})
        );
        let some_left: Value =
            serde_json::from_slice(&body(&Problem::from(PurchaseError::SoldOut {
                remaining: 2,
                sku: None,
            })))
            .unwrap_or_default();
        assert_eq!(some_left["remaining"], 2);
        assert!(some_left.get("sku").is_none(), "no size, no sku");
        let a_size: Value = serde_json::from_slice(&body(&Problem::from(PurchaseError::SoldOut {
            remaining: 0,
            sku: goods_domain::Sku::parse("sku", "US-9").ok(),
        })))
        .unwrap_or_default();
        assert_eq!(
            (a_size["remaining"].clone(), a_size["sku"].clone()),
            (json!(0), json!("US-9"))
        );
    }

    /// Every use case's infrastructure failure takes this one path: a bound that ran out is a
    /// 503 to retry, anything else a 500 that says nothing of its cause.
    #[rstest::rstest]
    #[case::a_bound_ran_out(|| InfraError::unavailable("pool timed out"), 503, "SERVICE_UNAVAILABLE", Some("1"))]
    #[case::anything_else(|| InfraError::msg("corrupt row in table orders"), 500, "INTERNAL", None)]
    fn an_infrastructure_failure_is_a_503_when_a_bound_ran_out_else_a_500(
        #[case] error: fn() -> InfraError,
        #[case] status: u16,
        #[case] code: &str,
        #[case] retry_after: Option<&str>,
    ) {
        for problem in [
            Problem::from(PurchaseError::from(error())),
            Problem::from(goods_app::EntryError::from(error())),
            Problem::from(goods_domain::CancelOrderError::from(error())),
            Problem::from(goods_app::GetOrderError::from(error())),
        ] {
            let response = problem.error_response();
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(
                response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok()),
                retry_after
            );
            let parsed: Value = serde_json::from_slice(&body(&problem)).unwrap_or_default();
            assert_eq!(parsed["code"], code);
            assert!(!parsed.to_string().contains("corrupt"), "{parsed}");
        }
    }

    #[test]
    fn an_extension_added_later_is_not_hidden_by_a_shared_body() {
        let problem = Problem::from(PurchaseError::SoldOut {
            remaining: 0,
            sku: None,
        })
        .with("extra", json!(1));
        let parsed: Value = serde_json::from_slice(&body(&problem)).unwrap_or_default();
        assert_eq!(parsed["extra"], 1);
        assert_eq!(
            problem.error_response().headers().get(CONTENT_TYPE),
            Some(&PROBLEM_JSON)
        );
    }

    #[rstest::rstest]
    #[case(time::Duration::milliseconds(1), "1")]
    #[case(time::Duration::milliseconds(1000), "1")]
    #[case(time::Duration::milliseconds(1001), "2")]
    #[case(time::Duration::milliseconds(59_999), "60")]
    #[case(time::Duration::ZERO, "1")]
    fn too_early_asks_to_wait_at_least_until_open_at(
        #[case] before: time::Duration,
        #[case] retry_after: &str,
    ) {
        let now = OffsetDateTime::UNIX_EPOCH;
        let response = Problem::too_early(now + before, now).error_response();
        assert_eq!(response.status().as_u16(), 425);
        assert_eq!(
            response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some(retry_after)
        );
    }
}
