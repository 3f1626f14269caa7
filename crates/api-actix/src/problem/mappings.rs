//! Each use case's error as a [`Problem`]: one exhaustive `From` per error type, so a new
//! variant does not compile until it has its status and `code`.

use super::{Problem, size_sold_out_none_left, sold_out_none_left};
use actix_web::http::StatusCode;
use goods_app::{
    CreateProductError, DropReadError, EntryError, FlagError, GetOrderError, GetProductError,
    OperateDropError, PurchaseError,
};
use goods_domain::draw::EntryRejection;
use goods_domain::ports::PaymentEventError;
use goods_domain::{
    CancelOrderError, CreateDropError, PurchaseRejection, SkuRejection, ValidationError,
};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// An instant as a JSON string in RFC 3339 (UTC), or `null` when it has none.
fn rfc3339(at: OffsetDateTime) -> Value {
    crate::rfc3339::format(at).map_or(Value::Null, Value::String)
}

impl From<goods_app::RateLimited> for Problem {
    fn from(limited: goods_app::RateLimited) -> Self {
        Self::rate_limited(&limited)
    }
}

/// A size named for a drop that has none (400, as any unknown field), missing or unknown (422
/// naming `sku`): purchases and entries alike.
impl From<SkuRejection> for Problem {
    fn from(refused: SkuRejection) -> Self {
        match refused {
            SkuRejection::Unsized => Self::malformed(
                "unknown field `sku`: this drop has no sizes, so its requests name none",
            ),
            SkuRejection::Missing => Self::validation(&[ValidationError::new(
                "sku",
                "is required: this drop sells sizes",
            )]),
            SkuRejection::Unknown => Self::validation(&[ValidationError::new(
                "sku",
                "is not one of this drop's sizes",
            )]),
        }
    }
}

impl From<PurchaseRejection> for Problem {
    fn from(refused: PurchaseRejection) -> Self {
        match refused {
            PurchaseRejection::TooEarly { open_at } => {
                Self::too_early(open_at, OffsetDateTime::now_utc())
            }
            PurchaseRejection::Closed => Self::new(
                StatusCode::CONFLICT,
                "CLOSED",
                "Drop closed",
                "the drop is closed",
            ),
            PurchaseRejection::Paused => Self::paused(),
            PurchaseRejection::DrawDrop => Self::new(
                StatusCode::CONFLICT,
                "DRAW_DROP",
                "Draw drop",
                "this drop sells by draw: enter it with POST /limited-drops/{dropId}/entries",
            ),
        }
    }
}

impl From<PurchaseError> for Problem {
    fn from(error: PurchaseError) -> Self {
        use StatusCode as S;
        match error {
            PurchaseError::DropNotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            PurchaseError::Refused(refused) => refused.into(),
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
            PurchaseError::SoldOut {
                remaining: 0,
                sku: None,
            } => Self {
                rendered: Some(sold_out_none_left()),
                ..Self::sold_out(0)
            },
            PurchaseError::SoldOut {
                remaining,
                sku: None,
            } => Self::sold_out(remaining),
            PurchaseError::SoldOut {
                remaining: 0,
                sku: Some(sku),
            } => match size_sold_out_none_left(&sku) {
                Some(body) => Self {
                    rendered: Some(body),
                    ..Self::sold_out(0)
                },
                None => Self::sold_out(0).with("sku", json!(sku.as_str())),
            },
            PurchaseError::SoldOut {
                remaining,
                sku: Some(sku),
            } => Self::sold_out(remaining).with("sku", json!(sku.as_str())),
            PurchaseError::Size(refused) => refused.into(),
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
            PurchaseError::Throttled => Self::throttled(
                "admitted, but no database write slot was free in time; nothing was bought",
            ),
            PurchaseError::RateLimited(limited) => limited.into(),
            PurchaseError::Infra(e) => e.into(),
        }
    }
}

impl Problem {
    /// 425 `TOO_EARLY` before `open_at`, asking to retry no sooner: `Retry-After` is the wait
    /// rounded up to whole seconds (a client that waits what it says is never early).
    pub(super) fn too_early(open_at: OffsetDateTime, now: OffsetDateTime) -> Self {
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

    /// 429 `THROTTLED`: no database write slot in time; retry in a second.
    fn throttled(detail: &'static str) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "THROTTLED",
            "Throttled",
            detail,
        )
        .retry_after(1)
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
            EntryError::Size(refused) => refused.into(),
            EntryError::Refused(EntryRejection::NotADraw) => Self::new(
                S::CONFLICT,
                "NOT_A_DRAW",
                "Not a draw",
                "this drop sells first come, first served: buy with POST /limited-drops/{dropId}/orders",
            ),
            EntryError::Refused(EntryRejection::TooEarly { open_at }) => {
                Self::too_early(open_at, OffsetDateTime::now_utc())
            }
            EntryError::Refused(EntryRejection::Paused) => Self::paused(),
            EntryError::Refused(EntryRejection::EntriesClosed) => Self::new(
                S::CONFLICT,
                "ENTRIES_CLOSED",
                "Entries closed",
                "the draw's entries are closed",
            ),
            EntryError::EntryNotFound => {
                Self::not_found("ENTRY_NOT_FOUND", "you have no entry in this drop")
            }
            EntryError::Throttled => {
                Self::throttled("no database write slot was free in time; nothing was entered")
            }
            EntryError::Infra(e) => e.into(),
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
            CreateDropError::Infra(e) => e.into(),
        }
    }
}

impl From<CreateProductError> for Problem {
    fn from(error: CreateProductError) -> Self {
        match error {
            CreateProductError::Infra(e) => e.into(),
        }
    }
}

impl From<GetProductError> for Problem {
    fn from(error: GetProductError) -> Self {
        match error {
            GetProductError::NotFound => Self::not_found("PRODUCT_NOT_FOUND", "no such product"),
            GetProductError::Infra(e) => e.into(),
        }
    }
}

impl From<DropReadError> for Problem {
    fn from(error: DropReadError) -> Self {
        match error {
            DropReadError::NotFound => Self::not_found("DROP_NOT_FOUND", "no such drop"),
            DropReadError::Infra(e) => e.into(),
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
            FlagError::Infra(e) => e.into(),
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
            OperateDropError::Infra(e) => e.into(),
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
            GetOrderError::Infra(e) => e.into(),
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
            PaymentEventError::Infra(e) => e.into(),
        }
    }
}

impl From<goods_app::ListPaymentsError> for Problem {
    fn from(error: goods_app::ListPaymentsError) -> Self {
        match error {
            goods_app::ListPaymentsError::Forbidden => Self::forbidden("payments are for admins"),
            goods_app::ListPaymentsError::Infra(e) => e.into(),
        }
    }
}

impl From<goods_app::ListEventsError> for Problem {
    fn from(error: goods_app::ListEventsError) -> Self {
        match error {
            goods_app::ListEventsError::Forbidden => Self::forbidden("events are for admins"),
            goods_app::ListEventsError::Infra(e) => e.into(),
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
            CancelOrderError::Infra(e) => e.into(),
        }
    }
}

impl From<goods_app::WebhookError> for Problem {
    fn from(error: goods_app::WebhookError) -> Self {
        use goods_app::WebhookError;
        match error {
            WebhookError::Invalid(errors) => Self::validation(&errors),
            WebhookError::NotFound => {
                Self::not_found("ENDPOINT_NOT_FOUND", "no such webhook endpoint")
            }
            WebhookError::DeliveryNotFound => Self::not_found(
                "DELIVERY_NOT_FOUND",
                "the endpoint has no delivery of this event",
            ),
            WebhookError::QuotaExceeded { limit } => Self::new(
                StatusCode::CONFLICT,
                "QUOTA_EXCEEDED",
                "Quota exceeded",
                format!(
                    "the seller has {limit} webhook endpoints, the most allowed; delete one first"
                ),
            )
            .with("limit", json!(limit)),
            WebhookError::NotConfigured => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "WEBHOOKS_NOT_CONFIGURED",
                "Webhooks not configured",
                "no seal key for webhook secrets is configured (DRAW_SEAL_KEY)",
            ),
            WebhookError::Infra(e) => e.into(),
        }
    }
}
