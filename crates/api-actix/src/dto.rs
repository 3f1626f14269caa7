//! Request and response bodies (camelCase JSON, RFC 3339 UTC timestamps) and their conversion
//! from and into domain and use-case types.

use crate::rfc3339::format as rfc3339;
use goods_app::{
    DrawView, DropStats, DropView, EntryView, EventPage, OrderPage, PaymentPage, Reconciliation,
    SizeView,
};
use goods_domain::ports::{Endpoint, OutcomeCounts, UnitsByStatus};
use goods_domain::webhook::WebhookSecret;
use goods_domain::{
    Currency, EntryStatus, GoodsOrder, Money, OrderId, PaymentEvent, PaymentEventId,
    PaymentEventKind, PaymentRecord, PaymentReference, PaymentWindow, Product, UserId,
    ValidationError,
};
use serde::de::{Deserializer, Error as _, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;

/// A JSON Schema `integer`: a JSON number with no fractional part, so `2` and `2.0` alike
/// (serde alone refuses the second; the OpenAPI description allows it).
fn whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    struct Whole;
    impl Visitor<'_> for Whole {
        type Value = i64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer")
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("{v} is too large")))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<i64, E> {
            // Exactly representable whole numbers only (|v| < 2^53), so nothing is rounded.
            const EXACT: f64 = 9_007_199_254_740_992.0;
            if v.fract() == 0.0 && v.abs() < EXACT {
                #[allow(clippy::cast_possible_truncation)]
                Ok(v as i64)
            } else {
                Err(E::custom(format!("{v} is not an integer")))
            }
        }
    }
    deserializer.deserialize_any(Whole)
}

/// An optional field that, when present, is not `null` (the description gives it one type).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// [`whole`] for an optional field that, when present, is not `null`.
fn present_whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    whole(deserializer).map(Some)
}

/// [`whole`] for an optional field.
fn whole_opt<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    struct Wrapped(#[serde(deserialize_with = "whole")] i64);
    Option::<Wrapped>::deserialize(deserializer)
        .map(|w| w.map(|Wrapped(v)| v))
        .map_err(D::Error::custom)
}

/// `POST /products`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateProduct {
    pub name: String,
    /// Units on hand of a product without variants.
    #[serde(default, deserialize_with = "present_whole")]
    pub stock_quantity: Option<i64>,
    /// Its variants (sizes), each with its stock, instead of `stockQuantity`.
    #[serde(default, deserialize_with = "present")]
    pub variants: Option<Vec<CreateVariant>>,
}

/// One variant of `POST /products`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateVariant {
    pub sku: String,
    pub label: String,
    #[serde(deserialize_with = "whole")]
    pub stock_quantity: i64,
}

impl From<CreateVariant> for goods_domain::VariantInput {
    fn from(v: CreateVariant) -> Self {
        Self {
            sku: v.sku,
            label: v.label,
            stock_quantity: v.stock_quantity,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProductBody {
    product_id: i64,
    name: String,
    /// Units on hand: the sum of its variants' when it has variants.
    stock_quantity: u32,
    /// The seller who owns it; `null` for a product from before ownership (admins only).
    owner_id: Option<i64>,
    /// Its variants; absent for a product without, as before sizes existed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    variants: Vec<VariantBody>,
}

/// One variant of a product's view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VariantBody {
    sku: String,
    label: String,
    stock_quantity: u32,
}

impl From<Product> for ProductBody {
    fn from(p: Product) -> Self {
        Self {
            product_id: p.id.get(),
            name: p.name.as_str().to_owned(),
            stock_quantity: p.stock.quantity(),
            owner_id: p.owner.map(UserId::get),
            variants: p
                .variants
                .into_iter()
                .map(|v| VariantBody {
                    sku: v.sku.as_str().to_owned(),
                    label: v.label.as_str().to_owned(),
                    stock_quantity: v.stock,
                })
                .collect(),
        }
    }
}

/// `POST /limited-drops`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateDrop {
    #[serde(deserialize_with = "whole")]
    pub product_id: i64,
    #[serde(with = "time::serde::rfc3339")]
    pub open_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub close_at: OffsetDateTime,
    /// Units on sale of a product without variants.
    #[serde(default, deserialize_with = "present_whole")]
    pub limited_quantity: Option<i64>,
    /// The sizes on sale, each with its units, instead of `limitedQuantity` (a product with
    /// variants).
    #[serde(default, deserialize_with = "present")]
    pub variants: Option<Vec<CreateDropVariant>>,
    /// Units per buyer; 1 when absent.
    #[serde(default, deserialize_with = "whole_opt")]
    pub per_user_limit: Option<i64>,
    /// Unit price in the currency's minor units; 0 when absent.
    #[serde(default, deserialize_with = "whole_opt")]
    pub price_minor: Option<i64>,
    /// ISO 4217 code; `XXX` when absent.
    #[serde(default)]
    pub currency: Option<String>,
    /// `FIRST_COME` (when absent) or `DRAW`.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub entry_close_at: Option<OffsetDateTime>,
    /// Seconds its orders hold their units unpaid (60 to 604800).
    #[serde(default, deserialize_with = "whole_opt")]
    pub payment_window_seconds: Option<i64>,
}

/// One size of `POST /limited-drops`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateDropVariant {
    pub sku: String,
    #[serde(deserialize_with = "whole")]
    pub limited_quantity: i64,
}

impl From<CreateDropVariant> for goods_domain::SizeInput {
    fn from(v: CreateDropVariant) -> Self {
        Self {
            sku: v.sku,
            limited_quantity: v.limited_quantity,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DropBody {
    drop_id: i64,
    product_id: i64,
    status: &'static str,
    open_at: Option<String>,
    close_at: Option<String>,
    limited_quantity: u32,
    per_user_limit: u32,
    remaining: u32,
    paused: bool,
    price_minor: u64,
    currency: String,
    mode: &'static str,
    payment_window_seconds: i64,
    /// A drop in sizes: each size (absent without sizes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    variants: Vec<DropSizeBody>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    draw: Option<DrawBody>,
}

/// One size in a drop's view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DropSizeBody {
    sku: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    limited_quantity: u32,
    remaining: u32,
    status: &'static str,
}

impl From<SizeView> for DropSizeBody {
    fn from(v: SizeView) -> Self {
        Self {
            sku: v
                .size
                .sku
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            label: v.size.label.map(|l| l.as_str().to_owned()),
            limited_quantity: v.size.limited.get(),
            remaining: v.remaining,
            status: v.status.as_str(),
        }
    }
}

/// What a draw drop's view adds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DrawBody {
    entry_close_at: Option<String>,
    entry_count: u32,
    draw_commitment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    drawn_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    draw_seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    winning_rank_cutoff: Option<String>,
    /// A drawn drop in sizes: each size somebody won, with its own cutoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    winning_rank_cutoffs: Option<std::collections::BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    entries_root: Option<String>,
}

impl From<DrawView> for DrawBody {
    fn from(d: DrawView) -> Self {
        Self {
            entry_close_at: rfc3339(d.entry_close_at),
            entry_count: d.counts.entries,
            draw_commitment: d.commitment.to_hex(),
            drawn_at: d.drawn_at.and_then(rfc3339),
            draw_seed: d.seed.map(|s| s.to_hex()),
            winning_rank_cutoff: d.cutoff.map(|c| c.to_hex()),
            winning_rank_cutoffs: (!d.size_cutoffs.is_empty()).then(|| {
                d.size_cutoffs
                    .iter()
                    .filter_map(|(sku, c)| c.map(|c| (sku.as_str().to_owned(), c.to_hex())))
                    .collect()
            }),
            entries_root: d.entries_root.map(|r| r.to_hex()),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryBody {
    drop_id: i64,
    user_id: i64,
    /// The size entered for, in a draw drop in sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    sku: Option<String>,
    status: &'static str,
    entered_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    order_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_key: Option<String>,
    /// Present (true) only on a won entry whose unit came from the waitlist.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    promoted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    promoted_at: Option<String>,
    /// Why a VOID entry's award was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inclusion_proof: Option<InclusionProofBody>,
}

/// An entry's RFC 6962 audit path in the published entry set.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct InclusionProofBody {
    leaf_index: u64,
    tree_size: u64,
    audit_path: Vec<String>,
}

impl From<EntryView> for EntryBody {
    fn from(e: EntryView) -> Self {
        let status = e.status.as_str();
        let (mut order_id, mut position, mut promoted_at, mut reason) = (None, None, None, None);
        match e.status {
            EntryStatus::Won {
                order_id: id,
                promoted_at: at,
            } => {
                order_id = Some(id.get());
                promoted_at = at;
            }
            EntryStatus::Forfeited { order_id: id } => order_id = Some(id.get()),
            EntryStatus::Waitlisted { position: p } => position = Some(p),
            EntryStatus::Void { reason: r } => reason = Some(r),
            EntryStatus::Entered | EntryStatus::Lost => {}
        }
        Self {
            drop_id: e.drop_id.get(),
            user_id: e.user_id.get(),
            sku: e.sku.map(|s| s.as_str().to_owned()),
            status,
            entered_at: rfc3339(e.entered_at),
            order_id,
            position,
            rank_key: e.rank_key.map(|k| k.to_hex()),
            promoted: promoted_at.is_some(),
            promoted_at: promoted_at.and_then(rfc3339),
            reason,
            inclusion_proof: e.inclusion_proof.map(|p| InclusionProofBody {
                leaf_index: p.leaf_index,
                tree_size: p.tree_size,
                audit_path: p.audit_path.iter().map(hex::encode).collect(),
            }),
        }
    }
}

impl From<DropView> for DropBody {
    fn from(v: DropView) -> Self {
        Self {
            drop_id: v.drop.id.get(),
            product_id: v.drop.product_id.get(),
            status: v.status.as_str(),
            open_at: rfc3339(v.drop.window.open_at()),
            // When the sale ends: the planned closeAt, or the instant it was closed.
            close_at: rfc3339(v.drop.ends_at()),
            limited_quantity: v.drop.limited_quantity.get(),
            per_user_limit: v.drop.per_user_limit.get(),
            remaining: v.remaining,
            paused: v.drop.paused,
            price_minor: v.drop.price.minor(),
            currency: v.drop.price.currency().as_str().to_owned(),
            mode: v.drop.mode.as_str(),
            payment_window_seconds: v.payment_window.as_seconds(),
            variants: v.sizes.into_iter().map(DropSizeBody::from).collect(),
            draw: v.draw.map(DrawBody::from),
        }
    }
}

/// `POST /limited-drops/{dropId}/entries`: no body, `{}`, or the size of a draw in sizes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryInput {
    /// The size, for a draw drop that sells sizes.
    #[serde(default, deserialize_with = "present")]
    pub sku: Option<String>,
}

/// `POST /limited-drops/{dropId}/orders`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Purchase {
    #[serde(deserialize_with = "whole")]
    pub quantity: i64,
    /// The size, for a drop that sells sizes.
    #[serde(default, deserialize_with = "present")]
    pub sku: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderBody {
    order_id: i64,
    drop_id: i64,
    product_id: i64,
    user_id: i64,
    /// The size bought (an order of a drop without sizes has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    sku: Option<String>,
    /// That size's label.
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    quantity: u32,
    amount_minor: u64,
    currency: String,
    status: &'static str,
    created_at: Option<String>,
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    paid_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payment_reference: Option<String>,
}

impl OrderBody {
    /// The order's view as `app` shows it: its `expiresAt` by the service's window, and its
    /// size's label.
    pub async fn labelled(o: GoodsOrder, app: &goods_app::GoodsApp) -> Self {
        let label = app.size_label(&o).await;
        Self {
            label: label.map(|l| l.as_str().to_owned()),
            ..Self::new(o, app.payment_window())
        }
    }

    /// The order's view; `window` gives its `expiresAt`.
    pub fn new(o: GoodsOrder, window: PaymentWindow) -> Self {
        Self {
            order_id: o.id.get(),
            drop_id: o.drop_id.get(),
            product_id: o.product_id.get(),
            user_id: o.user_id.get(),
            sku: o.sku.as_ref().map(|s| s.as_str().to_owned()),
            label: None,
            quantity: o.quantity.get(),
            amount_minor: o.amount.minor(),
            currency: o.amount.currency().as_str().to_owned(),
            status: o.status.as_str(),
            created_at: rfc3339(o.created_at),
            expires_at: rfc3339(o.expires_at(window)),
            paid_at: o.payment.as_ref().and_then(|p| rfc3339(p.at)),
            payment_reference: o.payment.map(|p| p.reference.as_str().to_owned()),
        }
    }
}

/// `POST /payments/events`: what the payment provider sends.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PaymentEventInput {
    pub event_id: String,
    /// `payment.succeeded` or `payment.failed`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(deserialize_with = "whole")]
    pub order_id: i64,
    /// What was paid, in minor units.
    #[serde(deserialize_with = "whole")]
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    pub payment_reference: String,
}

impl PaymentEventInput {
    /// The domain event, or every field that breaks a rule.
    pub fn into_domain(self) -> Result<PaymentEvent, Vec<ValidationError>> {
        let mut errors = Vec::new();
        let id = PaymentEventId::parse(&self.event_id)
            .map_err(|e| errors.push(e))
            .ok();
        let kind = PaymentEventKind::parse(&self.kind);
        if kind.is_none() {
            errors.push(ValidationError::new(
                "type",
                "must be payment.succeeded or payment.failed",
            ));
        }
        let order_id = OrderId::parse(self.order_id)
            .map_err(|_| {
                errors.push(ValidationError::new(
                    "orderId",
                    "must be a positive integer",
                ))
            })
            .ok();
        let amount = Currency::parse("currency", &self.currency)
            .map_err(|e| errors.push(e))
            .ok()
            .and_then(|currency| {
                Money::parse("amountMinor", self.amount_minor, currency)
                    .map_err(|e| errors.push(e))
                    .ok()
            });
        let reference = PaymentReference::parse(&self.payment_reference)
            .map_err(|e| errors.push(e))
            .ok();
        match (id, kind, order_id, amount, reference) {
            (Some(id), Some(kind), Some(order_id), Some(amount), Some(reference)) => {
                Ok(PaymentEvent {
                    id,
                    kind,
                    order_id,
                    amount,
                    reference,
                })
            }
            _ => Err(errors),
        }
    }
}

/// The provider's answer: the event's id and what it did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentAnswer {
    event_id: String,
    outcome: &'static str,
}

impl From<&PaymentRecord> for PaymentAnswer {
    fn from(r: &PaymentRecord) -> Self {
        Self {
            event_id: r.event.id.as_str().to_owned(),
            outcome: r.outcome.as_str(),
        }
    }
}

/// A recorded payment event, for admins.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentBody {
    event_id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    order_id: i64,
    amount_minor: u64,
    currency: String,
    payment_reference: String,
    outcome: &'static str,
    received_at: Option<String>,
}

impl From<PaymentRecord> for PaymentBody {
    fn from(r: PaymentRecord) -> Self {
        Self {
            event_id: r.event.id.as_str().to_owned(),
            kind: r.event.kind.as_str(),
            order_id: r.event.order_id.get(),
            amount_minor: r.event.amount.minor(),
            currency: r.event.amount.currency().as_str().to_owned(),
            payment_reference: r.event.reference.as_str().to_owned(),
            outcome: r.outcome.as_str(),
            received_at: rfc3339(r.received_at),
        }
    }
}

/// A page of recorded payment events.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentPageBody {
    items: Vec<PaymentBody>,
    next_cursor: Option<String>,
}

impl From<PaymentPage> for PaymentPageBody {
    fn from(page: PaymentPage) -> Self {
        Self {
            items: page.items.into_iter().map(PaymentBody::from).collect(),
            next_cursor: page.next_cursor.map(|seq| seq.to_string()),
        }
    }
}

/// A page of events, oldest first.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventPageBody {
    /// Each event as CloudEvents 1.0 JSON, the same bytes the broker gets.
    items: Vec<serde_json::Value>,
    next_cursor: Option<String>,
}

impl From<EventPage> for EventPageBody {
    fn from(page: EventPage) -> Self {
        Self {
            items: page
                .items
                .iter()
                // The store wrote the data; a row it could not have written reads as null.
                .map(|e| serde_json::from_str(&e.to_cloud_event()).unwrap_or_default())
                .collect(),
            next_cursor: page.next_cursor.map(|cursor| cursor.to_string()),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderPageBody {
    items: Vec<OrderBody>,
    next_cursor: Option<String>,
}

impl OrderPageBody {
    /// The page's orders, each with its size's label (`app` holds the drops).
    pub async fn new(page: OrderPage, app: &goods_app::GoodsApp) -> Self {
        let mut items = Vec::with_capacity(page.items.len());
        for order in page.items {
            items.push(OrderBody::labelled(order, app).await);
        }
        Self {
            items,
            next_cursor: page.next_cursor.map(|id| id.get().to_string()),
        }
    }
}

/// The outcome counters of a drop or of one of its sizes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OutcomeCountsBody {
    success_count: u64,
    sold_out_reject_count: u64,
    too_early_reject_count: u64,
    closed_reject_count: u64,
    per_user_limit_reject_count: u64,
    throttled_count: u64,
}

impl From<OutcomeCounts> for OutcomeCountsBody {
    fn from(c: OutcomeCounts) -> Self {
        Self {
            success_count: c.success,
            sold_out_reject_count: c.sold_out,
            too_early_reject_count: c.too_early,
            closed_reject_count: c.closed,
            per_user_limit_reject_count: c.per_user_limit,
            throttled_count: c.throttled,
        }
    }
}

/// The units of a drop's (or one size's) orders in each state.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct UnitsBody {
    pending_quantity: u32,
    paid_quantity: u32,
    cancelled_quantity: u32,
    expired_quantity: u32,
}

impl From<UnitsByStatus> for UnitsBody {
    fn from(u: UnitsByStatus) -> Self {
        Self {
            pending_quantity: u.pending,
            paid_quantity: u.paid,
            cancelled_quantity: u.cancelled,
            expired_quantity: u.expired,
        }
    }
}

/// What a drop's (or one size's) stats count: outcomes and units.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FiguresBody {
    #[serde(flatten)]
    counts: OutcomeCountsBody,
    sold_quantity: u32,
    remaining: u32,
    #[serde(flatten)]
    units: UnitsBody,
}

impl FiguresBody {
    fn new(
        counts: OutcomeCounts,
        sold_quantity: u32,
        remaining: u32,
        units: UnitsByStatus,
    ) -> Self {
        Self {
            counts: counts.into(),
            sold_quantity,
            remaining,
            units: units.into(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsBody {
    drop_id: i64,
    #[serde(flatten)]
    figures: FiguresBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    entry_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    winner_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    promoted_count: Option<u32>,
    /// A drop in sizes: each size's figures (absent without sizes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    variants: Vec<SizeStatsBody>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SizeStatsBody {
    sku: String,
    #[serde(flatten)]
    figures: FiguresBody,
}

impl From<DropStats> for StatsBody {
    fn from(s: DropStats) -> Self {
        Self {
            drop_id: s.drop_id.get(),
            figures: FiguresBody::new(s.counts, s.sold_quantity, s.remaining, s.units.all),
            entry_count: s.draw.map(|d| d.entries),
            winner_count: s.draw.map(|d| d.winners),
            promoted_count: s.draw.map(|d| d.promoted),
            variants: s
                .sizes
                .into_iter()
                .map(|size| SizeStatsBody {
                    sku: size.sku.as_str().to_owned(),
                    figures: FiguresBody::new(
                        size.counts,
                        size.sold_quantity,
                        size.remaining,
                        size.units,
                    ),
                })
                .collect(),
        }
    }
}

/// The comparison of a drop's (or one size's) sold units with the gate's count.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ComparisonBody {
    limited_quantity: u32,
    sold_quantity: u32,
    #[serde(flatten)]
    units: UnitsBody,
    gate_remaining: Option<u32>,
    drift: Option<i64>,
    oversold: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationBody {
    drop_id: i64,
    #[serde(flatten)]
    comparison: ComparisonBody,
    checked_at: Option<String>,
    /// A drop in sizes: each size's comparison (absent without sizes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    variants: Vec<SizeReconciliationBody>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SizeReconciliationBody {
    sku: String,
    #[serde(flatten)]
    comparison: ComparisonBody,
}

impl From<Reconciliation> for ReconciliationBody {
    fn from(r: Reconciliation) -> Self {
        Self {
            drop_id: r.drop_id.get(),
            comparison: ComparisonBody {
                limited_quantity: r.limited_quantity,
                sold_quantity: r.sold_quantity,
                units: r.units.all.into(),
                gate_remaining: r.gate_remaining,
                drift: r.drift,
                oversold: r.oversold,
            },
            checked_at: rfc3339(r.checked_at),
            variants: r
                .sizes
                .iter()
                .filter_map(|size| {
                    let sku = size.sku.as_ref()?;
                    Some(SizeReconciliationBody {
                        sku: sku.as_str().to_owned(),
                        comparison: ComparisonBody {
                            limited_quantity: size.limited,
                            sold_quantity: size.sold,
                            units: r.units.of(sku).into(),
                            gate_remaining: size.gate_remaining,
                            drift: size.drift(),
                            oversold: size.oversold(),
                        },
                    })
                })
                .collect(),
        }
    }
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `POST /webhook-endpoints`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateEndpoint {
    pub url: String,
    /// `None`: every type of a drop's events.
    #[serde(default, deserialize_with = "present")]
    pub types: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    pub description: Option<String>,
}

impl From<CreateEndpoint> for goods_app::EndpointInput {
    fn from(body: CreateEndpoint) -> Self {
        Self {
            url: body.url,
            types: body.types,
            description: body.description,
        }
    }
}

/// `PATCH /webhook-endpoints/{endpointId}`: each field given, and only those; a `null`
/// description removes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchEndpoint {
    #[serde(default, deserialize_with = "present")]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub types: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub enabled: Option<bool>,
}

impl From<PatchEndpoint> for goods_app::EndpointPatch {
    fn from(body: PatchEndpoint) -> Self {
        Self {
            url: body.url,
            types: body.types,
            description: body.description,
            enabled: body.enabled,
        }
    }
}

/// A webhook endpoint as its seller reads it: never its secret, but once at its creation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointBody {
    endpoint_id: i64,
    url: String,
    types: Vec<&'static str>,
    description: Option<String>,
    enabled: bool,
    created_at: Option<String>,
    /// Only in the answer to its creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl From<Endpoint> for EndpointBody {
    fn from(e: Endpoint) -> Self {
        Self {
            endpoint_id: e.id.get(),
            url: e.url,
            types: e.types.iter().collect(),
            description: e.description,
            enabled: e.enabled,
            created_at: rfc3339(e.created_at),
            secret: None,
        }
    }
}

impl EndpointBody {
    /// The answer to its creation: with the secret, this once.
    pub fn created(endpoint: Endpoint, secret: &WebhookSecret) -> Self {
        Self {
            secret: Some(secret.reveal()),
            ..Self::from(endpoint)
        }
    }
}

/// `GET /webhook-endpoints`.
#[derive(Debug, Serialize)]
pub struct EndpointListBody {
    items: Vec<EndpointBody>,
}

impl From<Vec<Endpoint>> for EndpointListBody {
    fn from(endpoints: Vec<Endpoint>) -> Self {
        Self {
            items: endpoints.into_iter().map(EndpointBody::from).collect(),
        }
    }
}

/// One delivery of an endpoint's, as its seller reads it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DeliveryBody {
    event_id: String,
    #[serde(rename = "type")]
    kind: String,
    status: &'static str,
    attempts: u32,
    last_status_code: Option<u16>,
    last_error: Option<String>,
    next_attempt_at: Option<String>,
    delivered_at: Option<String>,
}

/// `GET /webhook-endpoints/{endpointId}/deliveries`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPageBody {
    items: Vec<DeliveryBody>,
    next_cursor: Option<String>,
}

impl From<goods_app::DeliveryPage> for DeliveryPageBody {
    fn from(page: goods_app::DeliveryPage) -> Self {
        Self {
            items: page
                .items
                .into_iter()
                .map(|d| DeliveryBody {
                    event_id: d.event_id,
                    kind: d.event_type,
                    status: d.status.as_str(),
                    attempts: d.attempts,
                    last_status_code: d.last_status_code,
                    last_error: d.last_error,
                    next_attempt_at: d.next_attempt_at.and_then(rfc3339),
                    delivered_at: d.delivered_at.and_then(rfc3339),
                })
                .collect(),
            next_cursor: page.next.map(|n| n.to_string()),
        }
    }
}

/// The answer to a rotation: the new secret, this once.
#[derive(Debug, Serialize)]
pub struct SecretBody {
    secret: String,
}

impl From<&WebhookSecret> for SecretBody {
    fn from(secret: &WebhookSecret) -> Self {
        Self {
            secret: secret.reveal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integer_may_be_written_with_a_zero_fraction_and_nothing_else() {
        let quantity =
            |body: &str| crate::body::read::<Purchase>(body.as_bytes()).map(|p| p.quantity);
        assert_eq!(quantity(r#"{"quantity": 2}"#).ok(), Some(2));
        assert_eq!(quantity(r#"{"quantity": 2097153.0}"#).ok(), Some(2_097_153));
        assert_eq!(quantity(r#"{"quantity": -3.0}"#).ok(), Some(-3));
        for bad in [
            r#"{"quantity": 2.5}"#,
            r#"{"quantity": 1e300}"#,
            r#"{"quantity": "2"}"#,
        ] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
        let drop =
            |body: &str| crate::body::read::<CreateDrop>(body.as_bytes()).map(|d| d.per_user_limit);
        let base = r#""productId": 1, "openAt": "2026-12-01T09:00:00Z", "closeAt": "2026-12-01T10:00:00Z", "limitedQuantity": 5.0"#;
        assert_eq!(drop(&format!("{{{base}}}")).ok(), Some(None));
        assert_eq!(
            drop(&format!("{{{base}, \"perUserLimit\": 2.0}}")).ok(),
            Some(Some(2))
        );
    }
}

/// `PUT /admin/flags/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetFlag {
    pub enabled: bool,
}

/// A runtime flag: `{name, enabled, updatedAt, updatedBy}` (the last two `null` while the flag
/// has its default).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlagBody {
    name: &'static str,
    enabled: bool,
    updated_at: Option<String>,
    updated_by: Option<i64>,
}

impl From<goods_domain::ports::Flag> for FlagBody {
    fn from(f: goods_domain::ports::Flag) -> Self {
        Self {
            name: f.name.as_str(),
            enabled: f.enabled,
            updated_at: f.updated_at.and_then(rfc3339),
            updated_by: f.updated_by.map(UserId::get),
        }
    }
}
