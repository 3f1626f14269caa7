//! `application/problem+json` (RFC 9457) errors, and the single mapping from use-case errors
//! to HTTP statuses and stable `code`s.

use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, ResponseError};
use goods_app::{
    CreateProductError, DropReadError, EntryError, FlagError, GetOrderError, GetProductError,
    OperateDropError, PurchaseError,
};
use goods_domain::ValidationError;
use goods_domain::ports::PaymentEventError;
use goods_domain::{CancelOrderError, CreateDropError};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;
use time::OffsetDateTime;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The body of a drop's commonest answer, `SOLD_OUT` with nothing left, rendered once: every
/// buyer turned away after the sell-out gets the same bytes.
static SOLD_OUT_NONE_LEFT: LazyLock<Bytes> = LazyLock::new(|| Problem::sold_out(0).render());

fn sold_out_none_left() -> &'static [u8] {
    &SOLD_OUT_NONE_LEFT
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

    /// Adds an extension member.
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

    /// The JSON body.
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

    /// 500 INTERNAL: logs the cause once, here, and tells the client nothing about it; or 503
    /// when the cause is a bound on the database that ran out.
    pub fn internal(error: &anyhow::Error) -> Self {
        let unavailable = error.chain().any(|cause| {
            cause
                .downcast_ref::<goods_domain::InfraError>()
                .is_some_and(goods_domain::InfraError::is_unavailable)
        });
        if unavailable {
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

fn rfc3339(at: OffsetDateTime) -> Value {
    crate::dto::rfc3339(at).map_or(Value::Null, Value::String)
}

impl From<goods_app::RateLimited> for Problem {
    fn from(limited: goods_app::RateLimited) -> Self {
        Self::rate_limited(&limited)
    }
}

impl From<PurchaseError> for Problem {
    fn from(error: PurchaseError) -> Self {
        use StatusCode as S;
        match error {
            PurchaseError::DropNotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            PurchaseError::TooEarly { open_at } => {
                Self::too_early(open_at, OffsetDateTime::now_utc())
            }
            PurchaseError::KeyReused => Self::new(
                S::UNPROCESSABLE_ENTITY,
                "IDEMPOTENCY_KEY_REUSED",
                "Idempotency key reused",
                "this Idempotency-Key was used for a different request",
            ),
            PurchaseError::InProgress => Self::new(
                S::CONFLICT,
                "IDEMPOTENCY_KEY_IN_PROGRESS",
                "Request in progress",
                "a request with this Idempotency-Key is still being processed",
            )
            .retry_after(1),
            PurchaseError::Closed => {
                Self::new(S::CONFLICT, "CLOSED", "Drop closed", "the drop is closed")
            }
            PurchaseError::Paused => Self::paused(),
            PurchaseError::DrawDrop => Self::new(
                S::CONFLICT,
                "DRAW_DROP",
                "Draw drop",
                "this drop sells by draw: enter it with POST /limited-drops/{dropId}/entries",
            ),
            PurchaseError::SoldOut { remaining: 0 } => Self {
                rendered: Some(sold_out_none_left()),
                ..Self::sold_out(0)
            },
            PurchaseError::SoldOut { remaining } => Self::sold_out(remaining),
            PurchaseError::PerUserLimitExceeded { limit } => Self::new(
                S::FORBIDDEN,
                "PER_USER_LIMIT_EXCEEDED",
                "Per-user limit exceeded",
                format!("a buyer may hold at most {limit} units of this drop"),
            )
            .with("limit", json!(limit)),
            PurchaseError::OrderLimitReached { limit } => Self::new(
                S::CONFLICT,
                "ORDER_LIMIT_REACHED",
                "Order limit reached",
                format!(
                    "a buyer may place at most {limit} orders in this drop, cancelled ones included"
                ),
            )
            .with("limit", json!(limit)),
            PurchaseError::Throttled => Self::new(
                S::TOO_MANY_REQUESTS,
                "THROTTLED",
                "Throttled",
                "admitted, but no database write slot was free in time; nothing was bought",
            )
            .retry_after(1),
            PurchaseError::Unavailable => Self::unavailable(),
            PurchaseError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl Problem {
    /// 425 `TOO_EARLY` before `open_at`, asking to retry no sooner: `Retry-After` is the wait
    /// rounded up to whole seconds (a client that waits what it says is never early).
    fn too_early(open_at: OffsetDateTime, now: OffsetDateTime) -> Self {
        let wait_ms =
            u64::try_from((open_at - now).whole_milliseconds().max(0)).unwrap_or(u64::MAX);
        let wait_s = wait_ms.div_ceil(1000);
        Self::new(
            StatusCode::from_u16(425).unwrap_or(StatusCode::CONFLICT),
            "TOO_EARLY",
            "Too early",
            "the drop is not open yet; do not retry before openAt",
        )
        .with("openAt", rfc3339(open_at))
        .retry_after(wait_s.max(1))
    }

    fn paused() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "DROP_PAUSED",
            "Drop paused",
            "the drop is paused by its seller; retry later",
        )
        .retry_after(PAUSED_RETRY_AFTER_S)
    }
}

impl From<EntryError> for Problem {
    fn from(error: EntryError) -> Self {
        use StatusCode as S;
        match error {
            EntryError::DropNotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            EntryError::NotADraw => Self::new(
                S::CONFLICT,
                "NOT_A_DRAW",
                "Not a draw",
                "this drop sells first come, first served: buy with POST /limited-drops/{dropId}/orders",
            ),
            EntryError::TooEarly { open_at } => Self::too_early(open_at, OffsetDateTime::now_utc()),
            EntryError::Paused => Self::paused(),
            EntryError::EntriesClosed => Self::new(
                S::CONFLICT,
                "ENTRIES_CLOSED",
                "Entries closed",
                "the draw's entries are closed",
            ),
            EntryError::EntryNotFound => {
                Self::not_found("ENTRY_NOT_FOUND", "you have no entry in this drop")
            }
            EntryError::Throttled => Self::new(
                S::TOO_MANY_REQUESTS,
                "THROTTLED",
                "Throttled",
                "no database write slot was free in time; nothing was entered",
            )
            .retry_after(1),
            EntryError::Unavailable => Self::unavailable(),
            EntryError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<CreateDropError> for Problem {
    fn from(error: CreateDropError) -> Self {
        match error {
            CreateDropError::Invalid(errors) => Self::validation(&errors),
            CreateDropError::ProductNotFound => {
                Self::not_found("PRODUCT_NOT_FOUND", "no such product")
            }
            // The kill switch: as if the feature did not exist.
            CreateDropError::FeatureOff => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            CreateDropError::DropAlreadyActive => Self::new(
                StatusCode::CONFLICT,
                "DROP_ALREADY_ACTIVE",
                "Drop already active",
                "the product already has a drop that is not closed",
            ),
            CreateDropError::QuotaExceeded { limit } => Self::new(
                StatusCode::CONFLICT,
                "QUOTA_EXCEEDED",
                "Quota exceeded",
                format!(
                    "the seller has {limit} drops not yet closed, the most allowed; close one first"
                ),
            )
            .with("limit", json!(limit)),
            CreateDropError::DrawsNotConfigured => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "DRAWS_NOT_CONFIGURED",
                "Draws not configured",
                "no seal key for draw seeds is configured (DRAW_SEAL_KEY)",
            ),
            CreateDropError::Infra(e) => Self::internal(&anyhow::Error::new(e)),
        }
    }
}

impl From<CreateProductError> for Problem {
    fn from(error: CreateProductError) -> Self {
        match error {
            CreateProductError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<GetProductError> for Problem {
    fn from(error: GetProductError) -> Self {
        match error {
            GetProductError::NotFound => Self::not_found("PRODUCT_NOT_FOUND", "no such product"),
            GetProductError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<DropReadError> for Problem {
    fn from(error: DropReadError) -> Self {
        match error {
            DropReadError::NotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            DropReadError::Unexpected(e) => Self::internal(&e),
        }
    }
}

/// How long a buyer of a paused drop is told to wait before trying again.
const PAUSED_RETRY_AFTER_S: u64 = 5;

impl From<FlagError> for Problem {
    fn from(error: FlagError) -> Self {
        match error {
            FlagError::Forbidden => Self::forbidden("flags are for admins"),
            FlagError::NotFound => Self::not_found("FLAG_NOT_FOUND", "no such flag"),
            FlagError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<OperateDropError> for Problem {
    fn from(error: OperateDropError) -> Self {
        match error {
            OperateDropError::NotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            OperateDropError::Closed => Self::new(
                StatusCode::CONFLICT,
                "CLOSED",
                "Drop closed",
                "the drop is closed; it cannot be paused or resumed",
            ),
            OperateDropError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<GetOrderError> for Problem {
    fn from(error: GetOrderError) -> Self {
        match error {
            // Another's order answers exactly as one that does not exist: no existence oracle.
            GetOrderError::NotFound | GetOrderError::Forbidden => {
                Self::not_found("ORDER_NOT_FOUND", "no such order")
            }
            GetOrderError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<PaymentEventError> for Problem {
    fn from(error: PaymentEventError) -> Self {
        match error {
            PaymentEventError::EventIdReused => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "EVENT_ID_REUSED",
                "Event id reused",
                "this eventId was applied before with another body",
            ),
            PaymentEventError::Infra(e) => Self::internal(&anyhow::Error::new(e)),
        }
    }
}

impl From<goods_app::ListPaymentsError> for Problem {
    fn from(error: goods_app::ListPaymentsError) -> Self {
        match error {
            goods_app::ListPaymentsError::Forbidden => Self::forbidden("payments are for admins"),
            goods_app::ListPaymentsError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<goods_app::ListEventsError> for Problem {
    fn from(error: goods_app::ListEventsError) -> Self {
        match error {
            goods_app::ListEventsError::Forbidden => Self::forbidden("events are for admins"),
            goods_app::ListEventsError::Unexpected(e) => Self::internal(&e),
        }
    }
}

impl From<CancelOrderError> for Problem {
    fn from(error: CancelOrderError) -> Self {
        match error {
            // Another's order answers exactly as one that does not exist: no existence oracle.
            CancelOrderError::NotFound | CancelOrderError::NotOwner => {
                Self::not_found("ORDER_NOT_FOUND", "no such order")
            }
            CancelOrderError::NotCancellable(status) => Self::new(
                StatusCode::CONFLICT,
                "ORDER_NOT_CANCELLABLE",
                "Order not cancellable",
                format!("an order in state {} cannot be cancelled", status.as_str()),
            ),
            CancelOrderError::Infra(e) => Self::internal(&anyhow::Error::new(e)),
        }
    }
}

/// Rewrites an error response that did not come from a [`Problem`] (the framework's own: a body
/// over the size limit, a request it could not read) into problem+json, so every error a client
/// sees has a `code`.
///
/// # Errors
/// Never; the signature is the middleware's.
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

    fn body(problem: &Problem) -> Bytes {
        problem
            .error_response()
            .into_body()
            .try_into_bytes()
            .unwrap_or_default()
    }

    #[test]
    fn the_shared_sold_out_body_is_the_one_rendered_per_request() {
        let shared = Problem::from(PurchaseError::SoldOut { remaining: 0 });
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
            })))
            .unwrap_or_default();
        assert_eq!(some_left["remaining"], 2);
    }

    #[test]
    fn an_extension_added_later_is_not_hidden_by_a_shared_body() {
        let problem =
            Problem::from(PurchaseError::SoldOut { remaining: 0 }).with("extra", json!(1));
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
