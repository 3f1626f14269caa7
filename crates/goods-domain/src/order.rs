//! Orders created by a successful purchase.

use crate::{
    DropId, IdempotencyKey, Money, OrderId, PaymentEventId, ProductId, Quantity, Sku, UserId,
    ValidationError,
};
use time::OffsetDateTime;

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    /// Created by a purchase: the unit is the buyer's, payment is a separate flow.
    Pending,
    /// Paid within its payment window: the units are the buyer's for good.
    Paid,
    /// Cancelled by its owner: the unit went back to the stock, the drop and the buyer.
    Cancelled,
    /// Not paid within its payment window: the units went back, as for a cancel.
    Expired,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Paid => "PAID",
            Self::Cancelled => "CANCELLED",
            Self::Expired => "EXPIRED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "PENDING" => Some(Self::Pending),
            "PAID" => Some(Self::Paid),
            "CANCELLED" => Some(Self::Cancelled),
            "EXPIRED" => Some(Self::Expired),
            _ => None,
        }
    }

    /// Whether the order's units count against the drop, the stock and the buyer's limit.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Pending | Self::Paid)
    }
}

/// An order for units of a drop's product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoodsOrder {
    pub id: OrderId,
    /// The drop it was bought in.
    pub drop_id: DropId,
    pub product_id: ProductId,
    pub user_id: UserId,
    /// The size it bought (`None`: its drop has no sizes).
    pub sku: Option<Sku>,
    pub quantity: Quantity,
    /// What the buyer owes: the quantity at the drop's unit price when it was bought.
    pub amount: Money,
    pub status: OrderStatus,
    /// The buyer's idempotency key; unique per buyer.
    pub idempotency_key: IdempotencyKey,
    /// When the purchase committed.
    pub created_at: OffsetDateTime,
    /// When its payment window ends, fixed when it was made from its drop's window; `None` for
    /// an order made before deadlines were stored (its window is the service's default).
    pub deadline: Option<OffsetDateTime>,
    /// The payment that paid it, once PAID.
    pub payment: Option<Payment>,
}

/// A payment provider's reference for a payment: 1 to 128 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PaymentReference(String);

impl PaymentReference {
    /// Longest accepted reference, in bytes.
    pub const MAX_LEN: usize = 128;

    /// Parses a reference: 1 to 128 bytes of printable ASCII.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let field = "paymentReference";
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(ValidationError::new(field, "must be 1 to 128 characters"));
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ValidationError::new(field, "must be printable ASCII"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// The payment provider's event that paid it.
    pub event_id: PaymentEventId,
    pub reference: PaymentReference,
    pub at: OffsetDateTime,
}

/// How long a PENDING order holds its units before it expires (`PAYMENT_WINDOW_S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentWindow(time::Duration);

impl PaymentWindow {
    /// A window of `seconds` (at least one).
    pub const fn seconds(seconds: u32) -> Self {
        let seconds = if seconds == 0 { 1 } else { seconds };
        Self(time::Duration::seconds(seconds as i64))
    }

    pub fn length(self) -> time::Duration {
        self.0
    }

    /// Orders created at or before this instant are past their window at `now`.
    pub fn cutoff(self, now: OffsetDateTime) -> OffsetDateTime {
        now.saturating_sub(self.0)
    }

    /// A window of `seconds` as a drop's `paymentWindowSeconds`: 60 to 604800 (7 days).
    pub fn for_drop(seconds: i64) -> Result<Self, ValidationError> {
        match u32::try_from(seconds) {
            Ok(s) if (Self::MIN_DROP_SECONDS..=Self::MAX_SECONDS).contains(&s) => {
                Ok(Self::seconds(s))
            }
            _ => Err(ValidationError::new(
                "paymentWindowSeconds",
                "must be 60 to 604800 (7 days)",
            )),
        }
    }

    /// The shortest window a drop may give its orders, in seconds.
    pub const MIN_DROP_SECONDS: u32 = 60;
    /// The longest window, in seconds (7 days).
    pub const MAX_SECONDS: u32 = 7 * 24 * 3600;

    pub fn as_seconds(self) -> i64 {
        self.0.whole_seconds()
    }
}

/// When the expiry rules are asked: `now`, and the service's default window for orders made
/// before deadlines were stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub now: OffsetDateTime,
    pub default: PaymentWindow,
}

impl Expiry {
    /// The rules asked at `now` with `default` as the window of orders without a deadline.
    pub fn at(now: OffsetDateTime, default: PaymentWindow) -> Self {
        Self { now, default }
    }

    /// Orders without a stored deadline created at or before this instant are overdue.
    pub fn legacy_cutoff(self) -> OffsetDateTime {
        self.default.cutoff(self.now)
    }
}

impl Default for PaymentWindow {
    /// The contract's default: ten minutes.
    fn default() -> Self {
        Self::seconds(600)
    }
}

/// What a cancel does to an order, as decided by [`GoodsOrder::cancel_by`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelTransition {
    /// PENDING within its window: CANCELLED, and its units go back.
    Cancel,
    /// PENDING past its window: EXPIRED instead (its units go back, as for a cancel), and the
    /// cancel is refused.
    Expire,
    /// Cancelled before: nothing changes.
    AlreadyCancelled,
}

/// Why an order was not cancelled. Nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum CancelOrderError {
    #[error("order not found")]
    NotFound,
    /// The caller is not the order's buyer.
    #[error("only the buyer may cancel an order")]
    NotOwner,
    /// PAID or EXPIRED: too late to cancel.
    #[error("an order in state {} cannot be cancelled", .0.as_str())]
    NotCancellable(OrderStatus),
    /// The store failed; nothing changed.
    #[error(transparent)]
    Infra(#[from] crate::InfraError),
}

impl GoodsOrder {
    /// The order as it was placed: PENDING and unpaid, whatever became of it since (what its
    /// `goods.order.placed` event reports; the rest of an order never changes).
    #[must_use]
    pub fn as_placed(mut self) -> Self {
        self.status = OrderStatus::Pending;
        self.payment = None;
        self
    }

    /// What `by`'s cancel does to this order (locked, as last committed) at `expiry`.
    ///
    /// # Errors
    /// [`CancelOrderError::NotOwner`] for anyone but its buyer;
    /// [`CancelOrderError::NotCancellable`] once it is PAID or EXPIRED.
    pub fn cancel_by(
        &self,
        by: UserId,
        expiry: Expiry,
    ) -> Result<CancelTransition, CancelOrderError> {
        if self.user_id != by {
            return Err(CancelOrderError::NotOwner);
        }
        match self.status {
            OrderStatus::Cancelled => Ok(CancelTransition::AlreadyCancelled),
            OrderStatus::Paid | OrderStatus::Expired => {
                Err(CancelOrderError::NotCancellable(self.status))
            }
            OrderStatus::Pending if self.is_overdue(expiry) => Ok(CancelTransition::Expire),
            OrderStatus::Pending => Ok(CancelTransition::Cancel),
        }
    }

    /// Carries out what [`cancel_by`](Self::cancel_by) decided: CANCELLED or EXPIRED, or
    /// nothing for a repeated cancel. Whether the order changed (its units then go back).
    pub fn apply_cancel(&mut self, transition: CancelTransition) -> bool {
        match transition {
            CancelTransition::Cancel => self.status = OrderStatus::Cancelled,
            CancelTransition::Expire => self.status = OrderStatus::Expired,
            CancelTransition::AlreadyCancelled => return false,
        }
        true
    }

    /// The expiry pass on this order (locked, as last committed): EXPIRED when it is PENDING
    /// and past its deadline; whether it expired. Exactly one of the transactions that lock
    /// it does.
    pub fn expire_by(&mut self, expiry: Expiry) -> bool {
        let overdue = self.is_overdue(expiry);
        if overdue {
            self.status = OrderStatus::Expired;
        }
        overdue
    }

    /// Whether a request with this drop, size and quantity is the same request that created
    /// this order (an idempotent replay) rather than a reuse of the key for something else
    /// (another size included).
    pub fn matches_request(&self, drop_id: DropId, sku: Option<&Sku>, quantity: Quantity) -> bool {
        self.drop_id == drop_id && self.sku.as_ref() == sku && self.quantity == quantity
    }

    /// Whether this order is the answer to `user`'s request with `key` for `quantity` of size
    /// `sku` of `drop`: the only order a replay of that request may show. Anything that only
    /// points at an order (a gate's marker) is a hint until this holds.
    pub fn answers(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        drop_id: DropId,
        sku: Option<&Sku>,
        quantity: Quantity,
    ) -> bool {
        self.user_id == user
            && self.idempotency_key == *key
            && self.matches_request(drop_id, sku, quantity)
    }

    /// When its payment window ends: its deadline, or `default` after its creation for an
    /// order made before deadlines were stored. A PENDING order expires then.
    pub fn expires_at(&self, default: PaymentWindow) -> OffsetDateTime {
        self.deadline
            .unwrap_or_else(|| self.created_at.saturating_add(default.length()))
    }

    /// Whether it is PENDING and its payment window has ended at `expiry.now`.
    pub fn is_overdue(&self, expiry: Expiry) -> bool {
        self.status == OrderStatus::Pending && self.expires_at(expiry.default) <= expiry.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(OrderStatus::Pending)]
    #[case(OrderStatus::Paid)]
    #[case(OrderStatus::Cancelled)]
    #[case(OrderStatus::Expired)]
    fn order_status_round_trips_through_its_name(#[case] status: OrderStatus) {
        assert_eq!(OrderStatus::parse(status.as_str()), Some(status));
    }

    #[rstest]
    #[case(OrderStatus::Pending, true)]
    #[case(OrderStatus::Paid, true)]
    #[case(OrderStatus::Cancelled, false)]
    #[case(OrderStatus::Expired, false)]
    fn only_pending_and_paid_orders_count(#[case] status: OrderStatus, #[case] live: bool) {
        assert_eq!(status.is_live(), live);
    }

    fn order(status: OrderStatus) -> GoodsOrder {
        GoodsOrder {
            id: OrderId::parse(1).unwrap(),
            drop_id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            user_id: UserId::parse(1).unwrap(),
            sku: None,
            quantity: Quantity::parse("quantity", 1).unwrap(),
            amount: crate::Money::parse("amountMinor", 0, crate::Currency::NONE).unwrap(),
            status,
            idempotency_key: IdempotencyKey::parse("k").unwrap(),
            created_at: time::macros::datetime!(2026-12-01 09:00 UTC),
            deadline: None,
            payment: None,
        }
    }

    use CancelTransition::{AlreadyCancelled, Cancel, Expire};

    const CUTOFF: OffsetDateTime = time::macros::datetime!(2026-12-01 09:00 UTC);
    const WINDOW: PaymentWindow = PaymentWindow::seconds(600);

    /// The rules asked when orders created at or before `cutoff` are past the default window.
    fn by_cutoff(cutoff: OffsetDateTime) -> Expiry {
        Expiry::at(cutoff + WINDOW.length(), WINDOW)
    }

    #[rstest]
    #[case::pending_within_its_window(OrderStatus::Pending, CUTOFF - time::Duration::milliseconds(1), 1, Ok(Cancel))]
    #[case::pending_past_its_window(OrderStatus::Pending, CUTOFF, 1, Ok(Expire))]
    #[case::cancelled_before(OrderStatus::Cancelled, CUTOFF - time::Duration::hours(1), 1, Ok(AlreadyCancelled))]
    #[case::paid(OrderStatus::Paid, CUTOFF - time::Duration::hours(1), 1, Err("NotCancellable(Paid)"))]
    #[case::expired(OrderStatus::Expired, CUTOFF - time::Duration::hours(1), 1, Err("NotCancellable(Expired)"))]
    #[case::someone_else(OrderStatus::Pending, CUTOFF - time::Duration::hours(1), 2, Err("NotOwner"))]
    fn a_cancel_cancels_expires_or_is_refused_by_the_orders_state(
        #[case] status: OrderStatus,
        #[case] cutoff: OffsetDateTime,
        #[case] by: i64,
        #[case] expected: Result<CancelTransition, &str>,
    ) {
        // `order(..)` was created at 09:00; the window's cutoff decides whether it is overdue.
        let decided = order(status)
            .cancel_by(UserId::parse(by).unwrap(), by_cutoff(cutoff))
            .map_err(|e| format!("{e:?}"));
        assert_eq!(decided, expected.map_err(str::to_owned));
        // Carried out, the decision is the order's new state; a repeated cancel changes nothing.
        if let Ok(transition) = decided {
            let mut order = order(status);
            let changed = order.apply_cancel(transition);
            let after = match transition {
                Cancel => OrderStatus::Cancelled,
                Expire => OrderStatus::Expired,
                AlreadyCancelled => status,
            };
            assert_eq!(
                (changed, order.status),
                (transition != AlreadyCancelled, after)
            );
        }
    }

    #[rstest]
    #[case(OrderStatus::Pending, CUTOFF, true)]
    #[case(OrderStatus::Pending, CUTOFF - time::Duration::milliseconds(1), false)]
    #[case(OrderStatus::Paid, CUTOFF, false)]
    #[case(OrderStatus::Cancelled, CUTOFF, false)]
    #[case(OrderStatus::Expired, CUTOFF, false)]
    fn only_a_pending_order_past_its_window_expires(
        #[case] status: OrderStatus,
        #[case] cutoff: OffsetDateTime,
        #[case] expires: bool,
    ) {
        let mut order = order(status);
        assert_eq!(order.expire_by(by_cutoff(cutoff)), expires);
        let after = if expires {
            OrderStatus::Expired
        } else {
            status
        };
        assert_eq!(order.status, after);
    }

    /// An order with a stored deadline (its drop's own window) expires at that deadline,
    /// whatever the service's default.
    #[test]
    fn an_order_with_its_own_deadline_expires_then_and_not_by_the_default() {
        let deadline = time::macros::datetime!(2026-12-02 09:00 UTC);
        let pending = GoodsOrder {
            deadline: Some(deadline),
            ..order(OrderStatus::Pending)
        };
        assert_eq!(pending.expires_at(WINDOW), deadline);
        let before = Expiry::at(deadline - time::Duration::milliseconds(1), WINDOW);
        assert!(
            !pending.is_overdue(before),
            "the default window passed long ago"
        );
        assert_eq!(pending.cancel_by(pending.user_id, before).unwrap(), Cancel);
        let at = Expiry::at(deadline, WINDOW);
        assert!(pending.is_overdue(at));
        assert_eq!(pending.cancel_by(pending.user_id, at).unwrap(), Expire);
    }

    #[rstest]
    #[case(59, false)]
    #[case(60, true)]
    #[case(86_400, true)]
    #[case(604_800, true)]
    #[case(604_801, false)]
    #[case(-1, false)]
    fn a_drops_payment_window_is_a_minute_to_a_week(#[case] seconds: i64, #[case] ok: bool) {
        assert_eq!(PaymentWindow::for_drop(seconds).is_ok(), ok, "{seconds}");
    }

    #[test]
    fn a_pending_order_is_overdue_from_the_end_of_its_window_and_no_other_order_ever_is() {
        let window = PaymentWindow::seconds(600);
        let pending = order(OrderStatus::Pending);
        let end = time::macros::datetime!(2026-12-01 09:10 UTC);
        assert_eq!(pending.expires_at(window), end);
        assert!(!pending.is_overdue(Expiry::at(end - time::Duration::milliseconds(1), window)));
        assert!(pending.is_overdue(Expiry::at(end, window)));
        assert_eq!(window.cutoff(end), pending.created_at);
        for status in [
            OrderStatus::Paid,
            OrderStatus::Cancelled,
            OrderStatus::Expired,
        ] {
            assert!(
                !order(status).is_overdue(Expiry::at(end, window)),
                "{status:?}"
            );
        }
    }

    #[rstest]
    #[case("", false)]
    #[case("pi_3Nx", true)]
    #[case("with space", true)]
    #[case("tab\there", false)]
    #[case("é", false)]
    fn a_payment_reference_is_1_to_128_printable_ascii(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(PaymentReference::parse(raw).is_ok(), ok, "{raw:?}");
        assert!(PaymentReference::parse(&"r".repeat(128)).is_ok());
        assert!(PaymentReference::parse(&"r".repeat(129)).is_err());
    }
}
