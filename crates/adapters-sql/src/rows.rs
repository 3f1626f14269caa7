//! Rows as stored, and their conversion into domain types. A row that does not convert is
//! corrupt data and surfaces as an [`InfraError`], never as a panic.

use crate::schema::{limited_drops, orders, payment_events};
use diesel::prelude::*;
use goods_domain::{
    Currency, DropId, DropMode, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop, Money,
    OrderId, OrderStatus, Payment, PaymentEvent, PaymentEventId, PaymentEventKind, PaymentOutcome,
    PaymentRecord, PaymentReference, Price, ProductId, Quantity, SaleWindow, UserId,
    ValidationError,
};
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

/// A UTC instant as stored: no offset, microsecond precision (MySQL's `DATETIME(6)`). Instants
/// reaching the store are bounded at the edge (drop dates within a few years of now); one whose
/// UTC date is out of range saturates instead of panicking.
pub fn to_db(at: OffsetDateTime) -> PrimitiveDateTime {
    let Some(utc) = at.checked_to_offset(UtcOffset::UTC) else {
        return if at.year() > 0 {
            PrimitiveDateTime::MAX
        } else {
            PrimitiveDateTime::MIN
        };
    };
    let micros = utc.microsecond();
    let time = utc.time().replace_microsecond(micros).unwrap_or(utc.time());
    PrimitiveDateTime::new(utc.date(), time)
}

/// A stored instant back in UTC.
pub fn from_db(at: PrimitiveDateTime) -> OffsetDateTime {
    at.assume_utc()
}

/// `order` as the database keeps it: its times to the microsecond ([`to_db`]), as a read of
/// its row gives them.
pub fn kept(order: GoodsOrder) -> GoodsOrder {
    GoodsOrder {
        created_at: from_db(to_db(order.created_at)),
        deadline: order.deadline.map(|d| from_db(to_db(d))),
        ..order
    }
}

fn corrupt(what: &str) -> impl FnOnce(ValidationError) -> InfraError + '_ {
    move |e| InfraError::new(format!("corrupt {what} row"), e)
}

/// Converts a stored count to the domain's unsigned units.
///
/// # Errors
/// [`InfraError`] when the stored value is negative.
pub fn units(raw: i32, what: &str) -> Result<u32, InfraError> {
    u32::try_from(raw).map_err(|_| InfraError::msg(format!("corrupt {what}: {raw}")))
}

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = limited_drops)]
pub struct DropRow {
    pub id: i64,
    pub product_id: i64,
    pub open_at: PrimitiveDateTime,
    pub close_at: PrimitiveDateTime,
    pub limited_quantity: i32,
    pub per_user_limit: i32,
    pub paused: bool,
    /// Closed early at.
    pub closed_at: Option<PrimitiveDateTime>,
    pub price_minor: i64,
    pub currency: String,
    pub mode: String,
    pub entry_close_at: Option<PrimitiveDateTime>,
    pub payment_window_s: Option<i32>,
}

/// One size of a drop sold in sizes (`drop_variants`), read in its seller's order.
#[derive(Debug, QueryableByName)]
pub struct DropSizeRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub sku: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub limited_quantity: i32,
    /// Its variant's label.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub label: String,
}

impl DropSizeRow {
    pub fn into_domain(self) -> Result<goods_domain::Size, InfraError> {
        Ok(goods_domain::Size {
            sku: Some(goods_domain::Sku::parse("sku", &self.sku).map_err(corrupt("drop size"))?),
            limited: Quantity::parse("limitedQuantity", self.limited_quantity.into())
                .map_err(corrupt("drop size"))?,
            label: Some(
                goods_domain::VariantLabel::parse("label", &self.label)
                    .map_err(corrupt("drop size"))?,
            ),
        })
    }
}

/// Units of a drop's live orders in one size (`sku` NULL: a drop without sizes).
#[derive(Debug, QueryableByName)]
pub struct SizeUnitsRow {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub sku: Option<String>,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub n: i64,
}

impl DropRow {
    /// The drop, with its `sizes` (`drop_variants`; none: a drop without sizes, one size of
    /// all its units).
    pub fn into_domain(self, sizes: Vec<goods_domain::Size>) -> Result<LimitedDrop, InfraError> {
        let limited_quantity = Quantity::parse("limitedQuantity", self.limited_quantity.into())
            .map_err(corrupt("drop"))?;
        let sizes = if sizes.is_empty() {
            goods_domain::Sizes::whole(limited_quantity)
        } else {
            goods_domain::Sizes::from_stored(sizes)?
        };
        if sizes.total() != limited_quantity.get() {
            return Err(InfraError::msg(format!(
                "corrupt drop row {}: its sizes sum to {}, not its {limited_quantity:?}",
                self.id,
                sizes.total()
            )));
        }
        Ok(LimitedDrop {
            id: DropId::parse(self.id).map_err(corrupt("drop"))?,
            product_id: ProductId::parse(self.product_id).map_err(corrupt("drop"))?,
            window: SaleWindow::parse(from_db(self.open_at), from_db(self.close_at))
                .map_err(corrupt("drop"))?,
            limited_quantity,
            sizes,
            per_user_limit: Quantity::parse("perUserLimit", self.per_user_limit.into())
                .map_err(corrupt("drop"))?,
            price: Price::parse(
                self.price_minor,
                Currency::parse("currency", &self.currency).map_err(corrupt("drop"))?,
            )
            .map_err(corrupt("drop"))?,
            paused: self.paused,
            closed_at: self.closed_at.map(from_db),
            mode: match (self.mode.as_str(), self.entry_close_at) {
                ("FIRST_COME", _) => DropMode::FirstCome,
                ("DRAW", Some(at)) => DropMode::Draw {
                    entry_close_at: from_db(at),
                },
                (mode, _) => {
                    return Err(InfraError::msg(format!(
                        "corrupt drop row: mode {mode:?} without its entry close"
                    )));
                }
            },
            payment_window: self
                .payment_window_s
                .map(|s| goods_domain::PaymentWindow::for_drop(s.into()))
                .transpose()
                .map_err(corrupt("drop"))?,
        })
    }
}

#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = limited_drops)]
pub struct NewDropRow {
    pub product_id: i64,
    pub open_at: PrimitiveDateTime,
    pub close_at: PrimitiveDateTime,
    pub limited_quantity: i32,
    pub per_user_limit: i32,
    /// Always 0.
    pub sold_quantity: i32,
    pub price_minor: i64,
    pub currency: String,
}

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = orders)]
pub struct OrderRow {
    pub id: i64,
    pub drop_id: i64,
    pub product_id: i64,
    pub user_id: i64,
    pub quantity: i32,
    pub status: String,
    pub idempotency_key: String,
    pub created_at: PrimitiveDateTime,
    pub paid_at: Option<PrimitiveDateTime>,
    /// The payment's idempotency key.
    pub payment_key: Option<String>,
    pub payment_reference: Option<String>,
    pub amount_minor: i64,
    pub currency: String,
    pub expires_at: Option<PrimitiveDateTime>,
    pub sku: Option<String>,
}

impl OrderRow {
    pub fn into_domain(self) -> Result<GoodsOrder, InfraError> {
        Ok(GoodsOrder {
            id: OrderId::parse(self.id).map_err(corrupt("order"))?,
            drop_id: DropId::parse(self.drop_id).map_err(corrupt("order"))?,
            product_id: ProductId::parse(self.product_id).map_err(corrupt("order"))?,
            user_id: UserId::parse(self.user_id).map_err(corrupt("order"))?,
            sku: self
                .sku
                .map(|sku| goods_domain::Sku::parse("sku", &sku))
                .transpose()
                .map_err(corrupt("order"))?,
            quantity: Quantity::parse("quantity", self.quantity.into())
                .map_err(corrupt("order"))?,
            status: OrderStatus::parse(&self.status)
                .ok_or_else(|| InfraError::msg(format!("corrupt order status {}", self.status)))?,
            idempotency_key: IdempotencyKey::stored(&self.idempotency_key)
                .map_err(corrupt("order"))?,
            amount: money(self.amount_minor, &self.currency, "order")?,
            created_at: from_db(self.created_at),
            deadline: self.expires_at.map(from_db),
            payment: match (self.paid_at, self.payment_key, self.payment_reference) {
                (Some(at), Some(event), Some(reference)) => Some(Payment {
                    event_id: PaymentEventId::parse(&event).map_err(corrupt("order payment"))?,
                    reference: PaymentReference::parse(&reference)
                        .map_err(corrupt("order payment"))?,
                    at: from_db(at),
                }),
                _ => None,
            },
        })
    }
}

fn money(minor: i64, currency: &str, what: &str) -> Result<Money, InfraError> {
    let currency = Currency::parse("currency", currency).map_err(corrupt(what))?;
    Money::parse("amountMinor", minor, currency).map_err(corrupt(what))
}

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = payment_events)]
pub struct PaymentRow {
    pub id: i64,
    pub event_id: String,
    pub kind: String,
    pub order_id: i64,
    pub amount_minor: i64,
    pub currency: String,
    pub payment_reference: String,
    pub outcome: String,
    pub received_at: PrimitiveDateTime,
}

impl PaymentRow {
    pub fn into_domain(self) -> Result<PaymentRecord, InfraError> {
        let bad = |what: &str| InfraError::msg(format!("corrupt payment event row: {what}"));
        Ok(PaymentRecord {
            seq: self.id,
            event: PaymentEvent {
                id: PaymentEventId::parse(&self.event_id).map_err(corrupt("payment event"))?,
                kind: PaymentEventKind::parse(&self.kind).ok_or_else(|| bad(&self.kind))?,
                order_id: OrderId::parse(self.order_id).map_err(corrupt("payment event"))?,
                amount: money(self.amount_minor, &self.currency, "payment event")?,
                reference: PaymentReference::parse(&self.payment_reference)
                    .map_err(corrupt("payment event"))?,
            },
            outcome: PaymentOutcome::parse(&self.outcome).ok_or_else(|| bad(&self.outcome))?,
            received_at: from_db(self.received_at),
        })
    }
}

/// A buyer's holding in a drop, as read by a raw query.
#[derive(Debug, QueryableByName)]
pub struct HoldingRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub user_id: i64,
    /// Units in the buyer's live orders.
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub quantity: i32,
    /// Orders the buyer placed in the drop, cancelled ones included.
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub orders_placed: i32,
}

#[derive(Debug, QueryableByName)]
pub struct ProductRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub name: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub quantity: i32,
    /// Bumped by every change of the stock.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub version: i64,
    /// The seller who created it; 0 for none.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub owner_id: i64,
}

/// One variant of a product (`product_variants`).
#[derive(Debug, QueryableByName)]
pub struct VariantRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub sku: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub label: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stock: i32,
}

impl VariantRow {
    /// The variant, as it was parsed when its product was created.
    pub fn into_domain(self) -> Result<goods_domain::ProductVariant, goods_domain::InfraError> {
        let corrupt = |e| goods_domain::InfraError::new("corrupt product variant row", e);
        Ok(goods_domain::ProductVariant {
            sku: goods_domain::Sku::parse("sku", &self.sku).map_err(corrupt)?,
            label: goods_domain::VariantLabel::parse("label", &self.label).map_err(corrupt)?,
            stock: units(self.stock, "variant stock")?,
        })
    }
}

#[derive(Debug, QueryableByName)]
pub struct FlagRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub name: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub enabled: bool,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub updated_at: PrimitiveDateTime,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub updated_by: i64,
}

/// An outbox entry not relayed yet.
#[derive(Debug, QueryableByName)]
pub struct OutboxRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub payload: String,
}

/// One number, as `n` (a count, a sum, a clock reading).
#[derive(Debug, QueryableByName)]
pub struct NumberRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub n: i64,
}

/// Units of a drop's orders in one state.
#[derive(Debug, QueryableByName)]
pub struct StatusUnitsRow {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub sku: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub status: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub units: i64,
}

/// What a batch transaction reads first: the drop's and the stock's hot rows, and the
/// database's clock.
#[derive(Debug, QueryableByName)]
pub struct BatchHeadRow {
    /// Units in the drop's live orders.
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub sold_quantity: i32,
    /// Units of the product on hand.
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stock: i32,
    /// The database's clock in unix milliseconds.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub now_ms: i64,
    /// When the drop was closed early.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    pub closed_at: Option<PrimitiveDateTime>,
}

/// An order's id and its (buyer, key), as a batch reads back the orders it inserted.
#[derive(Debug, QueryableByName)]
pub struct OrderKeyRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub user_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub idempotency_key: String,
}

/// A row id, as read by a raw locking query.
#[derive(Debug, QueryableByName)]
pub struct IdRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
}

/// Converts domain units to an INT column value (quantities are bounded by `i32::MAX`).
pub fn column(units: u32) -> i32 {
    i32::try_from(units).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn instants_round_trip_at_microsecond_precision_in_utc() {
        let at = datetime!(2026-12-01 18:00:00.123456789 +09:00);
        let back = from_db(to_db(at));
        assert_eq!(back, datetime!(2026-12-01 09:00:00.123456 UTC));
    }
}

/// A `draw_entries` row, with whether its order was given back.
#[derive(Debug, Clone, QueryableByName)]
pub struct EntryRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub user_id: i64,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub entered_at: PrimitiveDateTime,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub entry_token: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub sku: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Integer>)]
    pub draw_rank: Option<i32>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub rank_key: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub order_id: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    pub promoted_at: Option<PrimitiveDateTime>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub void_reason: Option<String>,
    /// The status of its order, when it has one.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub order_status: Option<String>,
}

impl EntryRow {
    pub fn into_domain(self) -> Result<goods_domain::Entry, InfraError> {
        let ranked = match (self.draw_rank, self.rank_key) {
            (Some(rank), Some(key)) => Some((
                units(rank, "entry rank")?,
                goods_domain::RankKey::from_hex(&key)
                    .map_err(|e| InfraError::new("corrupt entry rank key", e))?,
            )),
            (None, None) => None,
            _ => return Err(InfraError::msg("corrupt entry: a rank without its key")),
        };
        let order_given_back = match self.order_status.as_deref() {
            None => false,
            Some(status) => !OrderStatus::parse(status)
                .ok_or_else(|| InfraError::msg(format!("corrupt entry order status {status}")))?
                .is_live(),
        };
        Ok(goods_domain::Entry {
            drop_id: DropId::parse(self.drop_id).map_err(corrupt("entry"))?,
            user_id: UserId::parse(self.user_id).map_err(corrupt("entry"))?,
            sku: opt_sku(self.sku)?,
            entered_at: from_db(self.entered_at),
            ranked,
            order_id: self
                .order_id
                .map(OrderId::parse)
                .transpose()
                .map_err(corrupt("entry"))?,
            promoted_at: self.promoted_at.map(from_db),
            order_given_back,
            void_reason: self.void_reason,
        })
    }
}

/// A `drop_draws` row.
#[derive(Debug, Clone, QueryableByName)]
pub struct DrawRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub seed: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub sealed_seed: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub seal_key_id: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub commitment: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub entries_root: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    pub drawn_at: Option<PrimitiveDateTime>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub cutoff: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub entry_count: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub winner_count: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub promoted_count: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub voided_count: i32,
}

/// A stored sku, `None` for `NULL` (a drop without sizes).
pub fn opt_sku(raw: Option<String>) -> Result<Option<goods_domain::Sku>, InfraError> {
    raw.map(|sku| goods_domain::Sku::parse("sku", &sku))
        .transpose()
        .map_err(corrupt("sku"))
}

/// One size's draw: a `drop_variants` row's draw columns.
#[derive(Debug, Clone, QueryableByName)]
pub struct SizeDrawRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub sku: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub draw_winners: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub draw_voided: i32,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub draw_cutoff: Option<String>,
}

impl SizeDrawRow {
    pub fn into_domain(self) -> Result<goods_domain::SizeDraw, InfraError> {
        Ok(goods_domain::SizeDraw {
            sku: goods_domain::Sku::parse("sku", &self.sku).map_err(corrupt("size draw"))?,
            winners: units(self.draw_winners, "size winner count")?,
            voided: units(self.draw_voided, "size voided count")?,
            cutoff: self
                .draw_cutoff
                .map(|c| goods_domain::RankKey::from_hex(&c))
                .transpose()
                .map_err(|e| InfraError::new("corrupt size cutoff", e))?,
        })
    }
}

impl DrawRow {
    /// The draw, with its sizes' draws (none for a drop without sizes).
    pub fn into_domain(
        self,
        sizes: Vec<goods_domain::SizeDraw>,
    ) -> Result<goods_domain::Draw, InfraError> {
        let hex = |e| InfraError::new("corrupt draw row", e);
        // The clear seed once revealed (or from before sealing), else the sealed one.
        let secret = match (self.seed, self.sealed_seed, self.seal_key_id) {
            (Some(seed), _, _) => goods_domain::DrawSecret::Clear(
                goods_domain::DrawSeed::from_hex(&seed).map_err(hex)?,
            ),
            (None, Some(sealed), Some(key_id)) => {
                goods_domain::DrawSecret::Sealed(goods_domain::SealedSeed {
                    key_id,
                    sealed: ::hex::decode(sealed)
                        .map_err(|e| InfraError::new("corrupt sealed seed", e))?,
                })
            }
            _ => return Err(InfraError::msg("corrupt draw row: no seed")),
        };
        Ok(goods_domain::Draw {
            drop_id: DropId::parse(self.drop_id).map_err(corrupt("draw"))?,
            secret,
            commitment: goods_domain::DrawCommitment::from_hex(&self.commitment).map_err(hex)?,
            entries_root: self
                .entries_root
                .map(|r| goods_domain::EntriesRoot::from_hex(&r))
                .transpose()
                .map_err(hex)?,
            drawn_at: self.drawn_at.map(from_db),
            cutoff: self
                .cutoff
                .map(|c| goods_domain::RankKey::from_hex(&c))
                .transpose()
                .map_err(hex)?,
            counts: goods_domain::DrawCounts {
                entries: units(self.entry_count, "entry count")?,
                winners: units(self.winner_count, "winner count")?,
                promoted: units(self.promoted_count, "promotion count")?,
                voided: units(self.voided_count, "voided count")?,
            },
            sizes,
        })
    }
}

/// One user id.
#[derive(Debug, QueryableByName)]
pub struct UserRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub user_id: i64,
}

/// The database's identity (`store_identity`).
#[derive(Debug, QueryableByName)]
pub struct IdentityRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub identity: String,
}

/// A row of `webhook_endpoints` (every column).
#[derive(Debug, QueryableByName)]
pub struct EndpointRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub seller_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub url: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub types: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub description: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub enabled: bool,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub secret_sealed: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub secret_key_id: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub previous_sealed: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub previous_key_id: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    pub previous_until: Option<PrimitiveDateTime>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    pub failing_since: Option<PrimitiveDateTime>,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub created_at: PrimitiveDateTime,
}
