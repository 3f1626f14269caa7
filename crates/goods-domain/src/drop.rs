//! The LimitedDrop aggregate: a product on sale from `openAt` until `closeAt`, at most
//! `limitedQuantity` units in all and `perUserLimit` units per buyer.

use crate::{
    Currency, DropId, Price, ProductId, ProductVariant, Quantity, SizeInput, Sizes, ValidationError,
};
use time::OffsetDateTime;

/// The time a drop is on sale: `open_at` (inclusive) to `close_at` (exclusive), `open_at <
/// close_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaleWindow {
    open_at: OffsetDateTime,
    close_at: OffsetDateTime,
}

impl SaleWindow {
    /// Parses a window: `open_at < close_at`.
    pub fn parse(
        open_at: OffsetDateTime,
        close_at: OffsetDateTime,
    ) -> Result<Self, ValidationError> {
        if open_at < close_at {
            Ok(Self { open_at, close_at })
        } else {
            Err(ValidationError::new("closeAt", "must be after openAt"))
        }
    }

    pub fn open_at(self) -> OffsetDateTime {
        self.open_at
    }

    pub fn close_at(self) -> OffsetDateTime {
        self.close_at
    }

    /// Whether `now` is before the sale starts.
    pub fn is_before_open(self, now: OffsetDateTime) -> bool {
        now < self.open_at
    }

    /// Whether the sale has ended at `now`.
    pub fn is_closed(self, now: OffsetDateTime) -> bool {
        now >= self.close_at
    }
}

/// A drop's state. It is derived from the clock and the units left, never stored, so it can
/// not disagree with them at a boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropStatus {
    /// Before `openAt`.
    Scheduled,
    /// On sale with units left.
    Open,
    /// On sale, no unit left (a cancellation may reopen it).
    SoldOut,
    /// From `closeAt` on, or once closed early. Terminal.
    Closed,
}

impl DropStatus {
    /// The status of one of the drop's sizes with `remaining` units left: `SoldOut` when it
    /// has none, else the drop's (this one).
    pub fn of_size(self, remaining: u32) -> Self {
        if remaining == 0 { Self::SoldOut } else { self }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "SCHEDULED",
            Self::Open => "OPEN",
            Self::SoldOut => "SOLD_OUT",
            Self::Closed => "CLOSED",
        }
    }
}

/// How a drop sells its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropMode {
    /// First come, first served: purchases.
    FirstCome,
    /// A draw among the buyers who entered in `[openAt, entry_close_at)` ([`crate::draw`]).
    Draw { entry_close_at: OffsetDateTime },
}

impl DropMode {
    pub fn entry_close_at(self) -> Option<OffsetDateTime> {
        match self {
            Self::FirstCome => None,
            Self::Draw { entry_close_at } => Some(entry_close_at),
        }
    }

    pub fn is_draw(self) -> bool {
        matches!(self, Self::Draw { .. })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstCome => "FIRST_COME",
            Self::Draw { .. } => "DRAW",
        }
    }
}

/// Why the drop's sale window refuses a purchase (before the gate or any store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PurchaseRejection {
    /// A draw drop sells by its draw, never by purchase (checked first: it never changes).
    #[error("the drop sells by draw")]
    DrawDrop,
    /// `now < openAt`.
    #[error("the drop opens at {open_at}")]
    TooEarly {
        /// When the sale starts.
        open_at: OffsetDateTime,
    },
    /// Paused by its seller or an admin (checked right after `TooEarly`).
    #[error("the drop is paused")]
    Paused,
    /// `now >= closeAt`, or the drop was closed early.
    #[error("the drop is closed")]
    Closed,
}

/// Why an operation on a drop is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropTransitionError {
    /// A closed drop cannot be paused or resumed; closing is terminal.
    #[error("the drop is closed")]
    Closed,
}

/// Why a drop was not created. Nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum CreateDropError {
    /// The input breaks creation rules; every failing field is listed.
    #[error("invalid drop")]
    Invalid(Vec<ValidationError>),
    /// No such product (or another seller's).
    #[error("product not found")]
    ProductNotFound,
    /// The limited-drop feature is off (`limited-drop.enabled`): drops do not exist.
    #[error("limited drops are switched off")]
    FeatureOff,
    /// The product already has a drop that is not closed.
    #[error("the product already has a drop that is not closed")]
    DropAlreadyActive,
    /// The product's seller has as many drops not yet closed as anyone may
    /// (`SELLER_MAX_ACTIVE_DROPS`).
    #[error("the seller has {limit} drops not yet closed, the most allowed")]
    QuotaExceeded { limit: u32 },
    /// A draw drop, but no seal key for its seed (`DRAW_SEAL_KEY`).
    #[error("draws are not configured")]
    DrawsNotConfigured,
    #[error(transparent)]
    Infra(#[from] crate::InfraError),
}

/// One drop at a time per product: refused while one of its drops has not ended at `now`
/// (neither closed early nor past `closeAt`); a store may pass only drops whose `closeAt` is ahead.
///
/// # Errors
/// `DropAlreadyActive` while one has not ended.
pub fn check_one_active_drop(
    product_drops: &[LimitedDrop],
    now: OffsetDateTime,
) -> Result<(), CreateDropError> {
    if product_drops.iter().any(|drop| !drop.is_closed(now)) {
        Err(CreateDropError::DropAlreadyActive)
    } else {
        Ok(())
    }
}

/// A seller may create one more drop while fewer than `max` of theirs have not ended at `now`
/// (`None`: no quota); a store may pass only drops whose `closeAt` is ahead.
///
/// # Errors
/// `QuotaExceeded` at or past the quota.
pub fn check_seller_quota(
    seller_drops: &[LimitedDrop],
    now: OffsetDateTime,
    max: Option<u32>,
) -> Result<(), CreateDropError> {
    let active = seller_drops
        .iter()
        .filter(|drop| !drop.is_closed(now))
        .count();
    match max {
        Some(limit) if active >= limit as usize => Err(CreateDropError::QuotaExceeded { limit }),
        _ => Ok(()),
    }
}

/// What closing a drop at some instant does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// It is still on sale (or scheduled): it ends at this instant.
    CloseAt(OffsetDateTime),
    /// It already ended (its `closeAt` passed, or it was closed): nothing changes.
    AlreadyClosed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedDrop {
    pub id: DropId,
    pub product_id: ProductId,
    pub window: SaleWindow,
    /// Units in all: the sum of its sizes'.
    pub limited_quantity: Quantity,
    /// What it sells: one size without a sku ([`Sizes::whole`]), or some of its product's
    /// variants, each with its own units.
    pub sizes: Sizes,
    pub per_user_limit: Quantity,
    /// What one unit costs; an order's amount is fixed from it at purchase.
    pub price: Price,
    /// Purchases are refused with `DROP_PAUSED` while set.
    pub paused: bool,
    /// When it was closed early, if it was; its sale ended then.
    pub closed_at: Option<OffsetDateTime>,
    pub mode: DropMode,
    /// How long its orders hold their units unpaid (`paymentWindowSeconds`); `None`: the
    /// service's `PAYMENT_WINDOW_S`.
    pub payment_window: Option<crate::PaymentWindow>,
}

impl LimitedDrop {
    /// How long its orders hold their units unpaid: its own window, or the service's `default`.
    pub fn payment_window_or(&self, default: crate::PaymentWindow) -> crate::PaymentWindow {
        self.payment_window.unwrap_or(default)
    }

    /// Whether the sale has ended at `now`: `closeAt` passed, or the drop was closed.
    pub fn is_closed(&self, now: OffsetDateTime) -> bool {
        self.window.is_closed(now) || self.closed_at.is_some()
    }

    /// When the sale ends (or ended): the earlier of `closeAt` and an early close.
    pub fn ends_at(&self) -> OffsetDateTime {
        self.closed_at
            .map_or(self.window.close_at(), |at| at.min(self.window.close_at()))
    }

    /// Closing at `now`: ends the sale now, unless it has already ended. Closing is terminal
    /// and idempotent.
    pub fn close(&self, now: OffsetDateTime) -> Closing {
        if self.is_closed(now) {
            Closing::AlreadyClosed
        } else {
            Closing::CloseAt(now)
        }
    }

    /// Pausing (`true`) or resuming (`false`) at `now`; refused once the sale has ended.
    pub fn set_paused(
        &self,
        now: OffsetDateTime,
        paused: bool,
    ) -> Result<Self, DropTransitionError> {
        if self.is_closed(now) {
            return Err(DropTransitionError::Closed);
        }
        Ok(Self {
            paused,
            ..self.clone()
        })
    }

    /// The state at `now` with `remaining` units left.
    pub fn status(&self, now: OffsetDateTime, remaining: u32) -> DropStatus {
        if self.window.is_before_open(now) && self.closed_at.is_none() {
            DropStatus::Scheduled
        } else if self.is_closed(now) {
            DropStatus::Closed
        } else if remaining == 0 {
            DropStatus::SoldOut
        } else {
            DropStatus::Open
        }
    }

    /// The sale window at `now`, touching no store (units and limits are decided later).
    ///
    /// # Errors
    /// In this order: `DrawDrop`, `TooEarly` (not closed early), `Paused`, `Closed`.
    pub fn check_on_sale(&self, now: OffsetDateTime) -> Result<(), PurchaseRejection> {
        if self.mode.is_draw() {
            Err(PurchaseRejection::DrawDrop)
        } else if self.window.is_before_open(now) && self.closed_at.is_none() {
            Err(PurchaseRejection::TooEarly {
                open_at: self.window.open_at(),
            })
        } else if self.paused {
            Err(PurchaseRejection::Paused)
        } else if self.is_closed(now) {
            Err(PurchaseRejection::Closed)
        } else {
            Ok(())
        }
    }
}

/// A drop to create, valid on its own; [`NewLimitedDrop::check_product`] checks it against its
/// product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLimitedDrop {
    pub product_id: ProductId,
    pub window: SaleWindow,
    /// Units in all: the sum of its sizes'.
    pub limited_quantity: Quantity,
    /// What it sells: one size without a sku, or some of its product's variants.
    pub sizes: Sizes,
    pub per_user_limit: Quantity,
    pub price: Price,
    pub mode: DropMode,
    /// Its orders' payment window; `None`: the service's default.
    pub payment_window: Option<crate::PaymentWindow>,
}

/// Raw creation input, as it comes from a client.
#[derive(Debug, Clone)]
pub struct DropInput {
    pub product_id: i64,
    pub open_at: OffsetDateTime,
    pub close_at: OffsetDateTime,
    /// Units of a drop without sizes (`limitedQuantity`).
    pub limited_quantity: Option<i64>,
    /// Units per size of a drop of a product with variants, instead of `limited_quantity`.
    pub variants: Option<Vec<SizeInput>>,
    /// Units per buyer, across sizes (the API defaults it to 1).
    pub per_user_limit: i64,
    /// Unit price in the currency's minor units (the API defaults it to 0).
    pub price_minor: i64,
    /// ISO 4217 code (the API defaults it to `XXX`).
    pub currency: String,
    /// `FIRST_COME` or `DRAW` (the API defaults it to `FIRST_COME`).
    pub mode: String,
    pub entry_close_at: Option<OffsetDateTime>,
    /// Seconds its orders hold their units unpaid (absent: the service's default).
    pub payment_window_seconds: Option<i64>,
}

/// How far in the past `openAt` may be when a drop is created.
pub const OPEN_AT_MAX_PAST: time::Duration = time::Duration::days(1);
/// How far ahead `openAt` may be when a drop is created.
pub const OPEN_AT_MAX_AHEAD: time::Duration = time::Duration::days(730);
/// The longest sale window (`closeAt - openAt`).
pub const MAX_WINDOW: time::Duration = time::Duration::days(366);

/// The mode's rules: `FIRST_COME` takes no `entryCloseAt`; `DRAW` needs one with `openAt <
/// entryCloseAt <= closeAt`, and a `perUserLimit` of 1 (a draw gives each winner one unit).
fn mode(input: &DropInput, per_user: Option<Quantity>) -> Result<DropMode, Vec<ValidationError>> {
    match (input.mode.as_str(), input.entry_close_at) {
        ("FIRST_COME", None) => Ok(DropMode::FirstCome),
        ("FIRST_COME", Some(_)) => Err(vec![ValidationError::new(
            "entryCloseAt",
            "is for a DRAW drop only",
        )]),
        ("DRAW", entry_close_at) => {
            let mut errors = Vec::new();
            match entry_close_at {
                None => errors.push(ValidationError::new(
                    "entryCloseAt",
                    "is required for a DRAW drop",
                )),
                Some(at) if at <= input.open_at || at > input.close_at => {
                    errors.push(ValidationError::new(
                        "entryCloseAt",
                        "must be after openAt and not after closeAt",
                    ))
                }
                Some(_) => {}
            }
            if per_user.is_some_and(|p| p.get() != 1) {
                errors.push(ValidationError::new(
                    "perUserLimit",
                    "must be 1 for a DRAW drop",
                ));
            }
            match (errors.is_empty(), entry_close_at) {
                (true, Some(entry_close_at)) => Ok(DropMode::Draw { entry_close_at }),
                _ => Err(errors),
            }
        }
        _ => Err(vec![ValidationError::new(
            "mode",
            "must be FIRST_COME or DRAW",
        )]),
    }
}

impl NewLimitedDrop {
    /// Parses creation input at `now`, collecting every failing field: `openAt < closeAt`,
    /// `closeAt` in the future, `openAt` within [`OPEN_AT_MAX_PAST`] before and
    /// [`OPEN_AT_MAX_AHEAD`] after `now`, a window of at most [`MAX_WINDOW`] (so every instant
    /// stays far inside what every store and clock can represent), `1 <= perUserLimit <=
    /// limitedQuantity` (the sum of its sizes', [`Sizes::parse`]), a price of 0 to 10^12 minor units in an ISO 4217 currency, and
    /// `priceMinor x perUserLimit` within 2^53 - 1 (every order's amount stays exact in JSON).
    pub fn parse(input: &DropInput, now: OffsetDateTime) -> Result<Self, Vec<ValidationError>> {
        let mut errors = Vec::new();
        let product_id = ProductId::parse(input.product_id)
            .map_err(|e| errors.push(e))
            .ok();
        let window = SaleWindow::parse(input.open_at, input.close_at)
            .map_err(|e| errors.push(e))
            .ok();
        if input.close_at <= now {
            errors.push(ValidationError::new("closeAt", "must be in the future"));
        }
        // Instants are compared, never shifted, so no arithmetic here can overflow whatever
        // year a client sends; the bounds keep every later computation in range.
        if input.open_at < now - OPEN_AT_MAX_PAST {
            errors.push(ValidationError::new(
                "openAt",
                "must not be more than 1 day in the past",
            ));
        } else if input.open_at > now + OPEN_AT_MAX_AHEAD {
            errors.push(ValidationError::new(
                "openAt",
                "must be at most 730 days ahead",
            ));
        } else if input.close_at > input.open_at + MAX_WINDOW {
            errors.push(ValidationError::new(
                "closeAt",
                "must be at most 366 days after openAt",
            ));
        }
        let sizes = Sizes::parse(input.limited_quantity, input.variants.as_deref())
            .map_err(|e| errors.extend(e))
            .ok();
        let limited = sizes
            .as_ref()
            .and_then(|sizes| Quantity::parse("limitedQuantity", i64::from(sizes.total())).ok());
        let per_user = Quantity::parse("perUserLimit", input.per_user_limit)
            .map_err(|e| errors.push(e))
            .ok();
        if let (Some(limited), Some(per_user)) = (limited, per_user)
            && per_user > limited
        {
            errors.push(ValidationError::new(
                "perUserLimit",
                "must not exceed limitedQuantity",
            ));
        }
        let currency = Currency::parse("currency", &input.currency)
            .map_err(|e| errors.push(e))
            .ok();
        let price = currency.and_then(|currency| {
            Price::parse(input.price_minor, currency)
                .map_err(|e| errors.push(e))
                .ok()
        });
        if let (Some(price), Some(per_user)) = (price, per_user)
            && price.amount_for(per_user).is_none()
        {
            errors.push(ValidationError::new(
                "priceMinor",
                "times perUserLimit must not exceed 2^53 - 1",
            ));
        }
        let mode = mode(input, per_user).map_err(|e| errors.extend(e)).ok();
        let payment_window = input
            .payment_window_seconds
            .map(crate::PaymentWindow::for_drop)
            .transpose()
            .map_err(|e| errors.push(e))
            .ok();
        match (
            product_id,
            window,
            limited.zip(sizes),
            per_user,
            price,
            mode,
            payment_window,
        ) {
            (
                Some(product_id),
                Some(window),
                Some((limited_quantity, sizes)),
                Some(per_user_limit),
                Some(price),
                Some(mode),
                Some(payment_window),
            ) if errors.is_empty() => Ok(Self {
                product_id,
                window,
                limited_quantity,
                sizes,
                per_user_limit,
                price,
                mode,
                payment_window,
            }),
            _ => Err(errors),
        }
    }

    /// The last creation rule, which needs the product: its sizes fit the product's `stock`
    /// and `variants` ([`Sizes::check_product`]).
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check_product(
        &self,
        stock: u32,
        variants: &[ProductVariant],
    ) -> Result<(), ValidationError> {
        self.sizes.check_product(stock, variants)
    }
}

#[cfg(test)]
mod one_active_tests {
    use super::*;
    use rstest::rstest;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-12-01 12:00 UTC);

    /// A drop of the product: on sale from `open` to `close` hours from [`NOW`], closed early
    /// `closed` hours from it when given.
    fn drop_of(open: i64, close: i64, closed: Option<i64>) -> LimitedDrop {
        let at = |h| NOW + time::Duration::hours(h);
        LimitedDrop {
            id: crate::DropId::parse(1).unwrap(),
            product_id: crate::ProductId::parse(1).unwrap(),
            window: SaleWindow::parse(at(open), at(close)).unwrap(),
            limited_quantity: crate::Quantity::parse("q", 10).unwrap(),
            sizes: crate::Sizes::whole(crate::Quantity::parse("q", 10).unwrap()),
            per_user_limit: crate::Quantity::parse("q", 1).unwrap(),
            price: crate::Price::default(),
            paused: false,
            closed_at: closed.map(at),
            mode: DropMode::FirstCome,
            payment_window: None,
        }
    }

    #[rstest]
    #[case::no_drop(vec![], true)]
    #[case::scheduled(vec![drop_of(1, 2, None)], false)]
    #[case::on_sale(vec![drop_of(-1, 1, None)], false)]
    #[case::paused(vec![LimitedDrop { paused: true, ..drop_of(-1, 1, None) }], false)]
    #[case::closed_early(vec![drop_of(-1, 1, Some(0))], true)]
    #[case::close_at_now(vec![drop_of(-1, 0, None)], true)]
    #[case::ended(vec![drop_of(-2, -1, None)], true)]
    #[case::one_ended_one_scheduled(vec![drop_of(-2, -1, None), drop_of(1, 2, None)], false)]
    fn a_product_has_one_drop_that_has_not_ended(
        #[case] drops: Vec<LimitedDrop>,
        #[case] may_create: bool,
    ) {
        let checked = check_one_active_drop(&drops, NOW);
        assert_eq!(checked.is_ok(), may_create, "{checked:?}");
        if !may_create {
            assert!(matches!(checked, Err(CreateDropError::DropAlreadyActive)));
        }
    }

    #[rstest]
    #[case::below(vec![drop_of(-1, 1, None)], Some(2), true)]
    #[case::at(vec![drop_of(-1, 1, None), drop_of(1, 2, None)], Some(2), false)]
    #[case::ended_ones_do_not_count(vec![drop_of(-1, 1, Some(0)), drop_of(-2, -1, None), drop_of(1, 2, None)], Some(2), true)]
    #[case::no_quota(vec![drop_of(-1, 1, None), drop_of(1, 2, None)], None, true)]
    #[case::zero(vec![], Some(0), false)]
    fn a_seller_may_create_while_below_the_quota(
        #[case] drops: Vec<LimitedDrop>,
        #[case] max: Option<u32>,
        #[case] may_create: bool,
    ) {
        let checked = check_seller_quota(&drops, NOW, max);
        assert_eq!(checked.is_ok(), may_create, "{checked:?}");
        if let (false, Some(limit)) = (may_create, max) {
            assert!(
                matches!(checked, Err(CreateDropError::QuotaExceeded { limit: l }) if l == limit)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use time::Duration;
    use time::macros::datetime;

    const OPEN: OffsetDateTime = datetime!(2026-12-01 09:00 UTC);
    const CLOSE: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);
    const MS: Duration = Duration::milliseconds(1);

    fn drop_of(limited: i64, per_user: i64) -> LimitedDrop {
        LimitedDrop {
            id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            window: SaleWindow::parse(OPEN, CLOSE).unwrap(),
            limited_quantity: Quantity::parse("limitedQuantity", limited).unwrap(),
            sizes: crate::Sizes::whole(Quantity::parse("limitedQuantity", limited).unwrap()),
            per_user_limit: Quantity::parse("perUserLimit", per_user).unwrap(),
            price: Price::default(),
            paused: false,
            closed_at: None,
            mode: DropMode::FirstCome,
            payment_window: None,
        }
    }

    #[rstest]
    #[case(OPEN - MS)]
    #[case(OPEN + MS)]
    fn closing_ends_the_sale_once_and_for_all(#[case] now: OffsetDateTime) {
        let drop = drop_of(5, 1);
        assert_eq!(drop.close(now), Closing::CloseAt(now));
        let closed = LimitedDrop {
            closed_at: Some(now),
            ..drop.clone()
        };
        assert_eq!(closed.status(now, 5), Closed);
        assert_eq!(closed.check_on_sale(now), Err(PurchaseRejection::Closed));
        assert_eq!(closed.ends_at(), now);
        assert_eq!(closed.close(now + MS), Closing::AlreadyClosed);
        assert_eq!(
            closed.set_paused(now, true),
            Err(DropTransitionError::Closed)
        );
        // A drop whose closeAt passed is closed without an early close.
        assert_eq!(drop.close(CLOSE), Closing::AlreadyClosed);
    }

    #[test]
    fn a_paused_drop_refuses_after_too_early_and_before_closed() {
        let paused = drop_of(5, 1).set_paused(OPEN, true).unwrap();
        assert_eq!(
            paused.check_on_sale(OPEN - MS),
            Err(PurchaseRejection::TooEarly { open_at: OPEN })
        );
        assert_eq!(paused.check_on_sale(OPEN), Err(PurchaseRejection::Paused));
        let resumed = paused.set_paused(OPEN, false).unwrap();
        assert_eq!(resumed.check_on_sale(OPEN), Ok(()));
    }

    use DropStatus::{Closed, Open, Scheduled, SoldOut};

    #[rstest]
    #[case(OPEN - MS, 5, Scheduled)]
    #[case(OPEN, 5, Open)]
    #[case(OPEN, 0, SoldOut)]
    #[case(CLOSE - MS, 5, Open)]
    #[case(CLOSE - MS, 0, SoldOut)]
    #[case(CLOSE, 5, Closed)]
    #[case(CLOSE, 0, Closed)]
    #[case(OPEN - MS, 0, Scheduled)]
    fn status_is_derived_from_the_clock_and_the_units_left(
        #[case] now: OffsetDateTime,
        #[case] remaining: u32,
        #[case] expected: DropStatus,
    ) {
        assert_eq!(drop_of(5, 1).status(now, remaining), expected);
    }

    #[rstest]
    #[case(OPEN - MS, Err(PurchaseRejection::TooEarly { open_at: OPEN }))]
    #[case(OPEN, Ok(()))]
    #[case(CLOSE - MS, Ok(()))]
    #[case(CLOSE, Err(PurchaseRejection::Closed))]
    fn time_gate_opens_exactly_at_open_at_and_shuts_exactly_at_close_at(
        #[case] now: OffsetDateTime,
        #[case] expected: Result<(), PurchaseRejection>,
    ) {
        assert_eq!(drop_of(5, 1).check_on_sale(now), expected);
    }

    fn input() -> DropInput {
        DropInput {
            product_id: 7,
            open_at: OPEN,
            close_at: CLOSE,
            limited_quantity: Some(100),
            variants: None,
            per_user_limit: 1,
            price_minor: 0,
            currency: "XXX".into(),
            mode: "FIRST_COME".into(),
            entry_close_at: None,
            payment_window_seconds: None,
        }
    }

    fn draw_input() -> DropInput {
        DropInput {
            mode: "DRAW".into(),
            entry_close_at: Some(OPEN + Duration::minutes(30)),
            ..input()
        }
    }

    fn failing_fields(input: DropInput, now: OffsetDateTime) -> Vec<&'static str> {
        match NewLimitedDrop::parse(&input, now) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.into_iter().map(|e| e.field).collect(),
        }
    }

    #[rstest]
    #[case::valid(input(), vec![])]
    #[case::bad_product(DropInput { product_id: 0, ..input() }, vec!["productId"])]
    #[case::open_equals_close(DropInput { close_at: OPEN, ..input() }, vec!["closeAt"])]
    #[case::open_after_close(DropInput { open_at: CLOSE + MS, ..input() }, vec!["closeAt"])]
    #[case::zero_quantity(DropInput { limited_quantity: Some(0), ..input() }, vec!["limitedQuantity"])]
    #[case::zero_per_user(DropInput { per_user_limit: 0, ..input() }, vec!["perUserLimit"])]
    #[case::per_user_over_limited(DropInput { per_user_limit: 101, ..input() }, vec!["perUserLimit"])]
    #[case::per_user_equals_limited(DropInput { per_user_limit: 100, ..input() }, vec![])]
    #[case::year_zero(DropInput { open_at: datetime!(0000-01-01 00:00 +01:00), ..input() }, vec!["openAt"])]
    #[case::open_a_day_ago(DropInput { open_at: OPEN - Duration::hours(25), ..input() }, vec![])]
    #[case::open_too_long_ago(DropInput { open_at: OPEN - Duration::hours(25) - MS, ..input() }, vec!["openAt"])]
    #[case::open_too_far_ahead(DropInput { open_at: OPEN + Duration::days(730), close_at: OPEN + Duration::days(731), ..input() }, vec!["openAt"])]
    #[case::year_9999(DropInput { close_at: datetime!(9999-12-31 22:00 -05:00), ..input() }, vec!["closeAt"])]
    #[case::longest_window(DropInput { close_at: OPEN + Duration::days(366), ..input() }, vec![])]
    #[case::window_too_long(DropInput { close_at: OPEN + Duration::days(366) + MS, ..input() }, vec!["closeAt"])]
    #[case::priced(DropInput { price_minor: 1_000_000_000_000, currency: "EUR".into(), ..input() }, vec![])]
    #[case::negative_price(DropInput { price_minor: -1, ..input() }, vec!["priceMinor"])]
    #[case::price_too_high(DropInput { price_minor: 1_000_000_000_001, ..input() }, vec!["priceMinor"])]
    #[case::lowercase_currency(DropInput { currency: "eur".into(), ..input() }, vec!["currency"])]
    #[case::amount_past_2_to_the_53(DropInput { price_minor: 1_000_000_000_000, per_user_limit: 9008, limited_quantity: Some(10_000), ..input() }, vec!["priceMinor"])]
    #[case::largest_exact_amount(DropInput { price_minor: 1_000_000_000_000, per_user_limit: 9007, limited_quantity: Some(10_000), ..input() }, vec![])]
    #[case::draw(draw_input(), vec![])]
    #[case::draw_entries_until_close(DropInput { entry_close_at: Some(CLOSE), ..draw_input() }, vec![])]
    #[case::draw_without_entry_close(DropInput { entry_close_at: None, ..draw_input() }, vec!["entryCloseAt"])]
    #[case::draw_entries_closing_at_open(DropInput { entry_close_at: Some(OPEN), ..draw_input() }, vec!["entryCloseAt"])]
    #[case::draw_entries_past_close(DropInput { entry_close_at: Some(CLOSE + MS), ..draw_input() }, vec!["entryCloseAt"])]
    #[case::draw_two_per_buyer(DropInput { per_user_limit: 2, ..draw_input() }, vec!["perUserLimit"])]
    #[case::first_come_with_entry_close(DropInput { entry_close_at: Some(CLOSE), ..input() }, vec!["entryCloseAt"])]
    #[case::unknown_mode(DropInput { mode: "RAFFLE".into(), ..input() }, vec!["mode"])]
    fn drop_creation_validates_every_rule(
        #[case] input: DropInput,
        #[case] expected: Vec<&'static str>,
    ) {
        assert_eq!(failing_fields(input, OPEN - Duration::hours(1)), expected);
    }

    #[rstest]
    #[case(CLOSE - MS, vec![])]
    #[case(CLOSE, vec!["closeAt"])]
    #[case(CLOSE + MS, vec!["closeAt"])]
    fn drop_creation_requires_close_at_in_the_future(
        #[case] now: OffsetDateTime,
        #[case] expected: Vec<&'static str>,
    ) {
        assert_eq!(failing_fields(input(), now), expected);
    }

    #[test]
    fn drop_creation_reports_all_failing_fields_at_once() {
        let bad = DropInput {
            product_id: -1,
            open_at: CLOSE,
            close_at: OPEN,
            limited_quantity: Some(0),
            variants: None,
            per_user_limit: 0,
            price_minor: -5,
            currency: "euro".into(),
            mode: "FIRST_COME".into(),
            entry_close_at: None,
            payment_window_seconds: None,
        };
        assert_eq!(
            failing_fields(bad, CLOSE),
            [
                "productId",
                "closeAt",
                "closeAt",
                "limitedQuantity",
                "perUserLimit",
                "currency"
            ]
        );
    }

    #[test]
    fn a_draw_drop_refuses_every_purchase_first() {
        let draw = LimitedDrop {
            mode: DropMode::Draw {
                entry_close_at: CLOSE,
            },
            ..drop_of(5, 1)
        };
        for now in [OPEN - MS, OPEN, CLOSE] {
            assert_eq!(draw.check_on_sale(now), Err(PurchaseRejection::DrawDrop));
        }
        let parsed = NewLimitedDrop::parse(&draw_input(), OPEN - Duration::hours(1)).unwrap();
        assert_eq!(
            parsed.mode,
            DropMode::Draw {
                entry_close_at: OPEN + Duration::minutes(30)
            }
        );
    }

    #[rstest]
    #[case(100, true)]
    #[case(99, false)]
    #[case(1000, true)]
    fn limited_quantity_must_fit_the_products_stock(#[case] stock: u32, #[case] ok: bool) {
        let drop = NewLimitedDrop::parse(&input(), OPEN).unwrap();
        assert_eq!(drop.check_product(stock, &[]).is_ok(), ok);
    }

    fn sizes(sizes: &[(&str, i64)]) -> Option<Vec<SizeInput>> {
        Some(
            sizes
                .iter()
                .map(|(sku, n)| SizeInput {
                    sku: (*sku).to_owned(),
                    limited_quantity: *n,
                })
                .collect(),
        )
    }

    #[test]
    fn a_drop_in_sizes_sells_their_sum_and_its_per_user_limit_counts_across_them() {
        let input = DropInput {
            limited_quantity: None,
            variants: sizes(&[("US-9", 2), ("US-10", 3)]),
            per_user_limit: 5,
            ..input()
        };
        let drop = NewLimitedDrop::parse(&input, OPEN).unwrap();
        assert_eq!(drop.limited_quantity.get(), 5);
        assert!(drop.sizes.is_sized());
        let too_many = DropInput {
            per_user_limit: 6,
            ..input
        };
        assert_eq!(failing_fields(too_many, OPEN), ["perUserLimit"]);
    }

    #[rstest]
    #[case::both(DropInput { variants: sizes(&[("A", 1)]), ..input() }, vec!["variants"])]
    #[case::neither(DropInput { limited_quantity: None, ..input() }, vec!["limitedQuantity"])]
    #[case::a_bad_size(DropInput { limited_quantity: None, variants: sizes(&[("A", 0)]), ..input() }, vec!["variants"])]
    fn a_drop_takes_limited_quantity_or_variants(
        #[case] input: DropInput,
        #[case] expected: Vec<&'static str>,
    ) {
        assert_eq!(failing_fields(input, OPEN), expected);
    }
}
