//! Payments as the provider reports them (its signed event is the only way to PAID); the rule
//! is [`GoodsOrder::apply_payment`], which the store calls on the locked order.

use crate::{
    GoodsOrder, Money, OrderId, OrderStatus, PaymentReference, PaymentWindow, ValidationError,
};
use time::OffsetDateTime;

/// The provider's id of an event: 1 to 128 printable ASCII characters. Each id is applied once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PaymentEventId(String);

impl PaymentEventId {
    /// Parses an event id: 1 to 128 bytes of printable ASCII.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw.is_empty() || raw.len() > 128 || !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ValidationError::new(
                "eventId",
                "must be 1 to 128 printable ASCII characters",
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the provider reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentEventKind {
    /// The buyer's money was taken.
    Succeeded,
    /// The attempt failed; the order waits for another one until it expires.
    Failed,
}

impl PaymentEventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "payment.succeeded",
            Self::Failed => "payment.failed",
        }
    }

    /// Parses a wire or stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "payment.succeeded" => Some(Self::Succeeded),
            "payment.failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// A verified event from the payment provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentEvent {
    /// The provider's id; applied once.
    pub id: PaymentEventId,
    pub kind: PaymentEventKind,
    pub order_id: OrderId,
    pub amount: Money,
    pub reference: PaymentReference,
}

/// What an event did: recorded with it, counted, and the answer to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentOutcome {
    /// The order was PENDING in its window and the amount matched: it is PAID now.
    Paid,
    /// The order is PAID by this reference already: nothing changed.
    AlreadyPaid,
    /// The money came for an order that is expired, cancelled or paid by another reference (or
    /// that expired as this event arrived): it must go back to the buyer.
    RefundRequired,
    /// The amount or currency is not the order's: the order is unchanged.
    AmountMismatch,
    /// A failed attempt: the order stays PENDING until it expires.
    FailedRecorded,
    OrderNotFound,
}

impl PaymentOutcome {
    /// Every outcome, for metrics and tests.
    pub const ALL: [Self; 6] = [
        Self::Paid,
        Self::AlreadyPaid,
        Self::RefundRequired,
        Self::AmountMismatch,
        Self::FailedRecorded,
        Self::OrderNotFound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paid => "PAID",
            Self::AlreadyPaid => "ALREADY_PAID",
            Self::RefundRequired => "REFUND_REQUIRED",
            Self::AmountMismatch => "AMOUNT_MISMATCH",
            Self::FailedRecorded => "FAILED_RECORDED",
            Self::OrderNotFound => "ORDER_NOT_FOUND",
        }
    }

    /// Parses a wire or stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == raw)
    }

    /// Whether someone must act on it (money to return, an amount to investigate).
    pub fn needs_attention(self) -> bool {
        matches!(self, Self::RefundRequired | Self::AmountMismatch)
    }
}

/// An event as recorded, with its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRecord {
    /// The store's sequence number: newer events have larger ones (the listing's cursor).
    pub seq: i64,
    pub event: PaymentEvent,
    pub outcome: PaymentOutcome,
    pub received_at: OffsetDateTime,
}

/// What to write to an order when an event applies: the order's new state, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentTransition {
    /// PENDING -> PAID with this payment.
    Pay(crate::Payment),
    /// PENDING -> EXPIRED: its window ended before the money came (the units go back).
    Expire,
}

/// An event's outcome on an order, and the change to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentDecision {
    /// What the event did.
    pub outcome: PaymentOutcome,
    /// The order's change; `None` leaves it as it is.
    pub transition: Option<PaymentTransition>,
}

impl GoodsOrder {
    /// Carries out what [`apply_payment`](Self::apply_payment) decided: PAID with its
    /// payment, or EXPIRED.
    pub fn apply_payment_transition(&mut self, transition: PaymentTransition) {
        match transition {
            PaymentTransition::Pay(payment) => {
                self.status = OrderStatus::Paid;
                self.payment = Some(payment);
            }
            PaymentTransition::Expire => self.status = OrderStatus::Expired,
        }
    }

    /// What `event` does to this order (locked, as last committed) at `now`:
    ///
    /// 1. a failed attempt is recorded and changes nothing;
    /// 2. PAID by the same reference: nothing changes;
    /// 3. PAID by another reference, CANCELLED or EXPIRED: the money must go back;
    /// 4. PENDING past its window: the order expires now, and the money must go back (of a
    ///    payment and an expiry of one order, exactly one wins: here the expiry);
    /// 5. amount or currency not the order's: nothing changes;
    /// 6. otherwise PAID.
    pub fn apply_payment(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> PaymentDecision {
        use PaymentOutcome as O;
        let answer = |outcome, transition| PaymentDecision {
            outcome,
            transition,
        };
        if event.kind == PaymentEventKind::Failed {
            return answer(O::FailedRecorded, None);
        }
        match (self.status, &self.payment) {
            (OrderStatus::Paid, Some(paid)) if paid.reference == event.reference => {
                answer(O::AlreadyPaid, None)
            }
            (OrderStatus::Paid | OrderStatus::Cancelled | OrderStatus::Expired, _) => {
                answer(O::RefundRequired, None)
            }
            (OrderStatus::Pending, _) if self.is_overdue(crate::order::Expiry::at(now, window)) => {
                answer(O::RefundRequired, Some(PaymentTransition::Expire))
            }
            (OrderStatus::Pending, _) if event.amount != self.amount => {
                answer(O::AmountMismatch, None)
            }
            (OrderStatus::Pending, _) => answer(
                O::Paid,
                Some(PaymentTransition::Pay(crate::Payment {
                    event_id: event.id.clone(),
                    reference: event.reference.clone(),
                    at: now,
                })),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Currency, DropId, IdempotencyKey, Payment, ProductId, Quantity, UserId};
    use rstest::rstest;
    use time::macros::datetime;

    const CREATED: OffsetDateTime = datetime!(2026-12-01 09:00 UTC);
    const WINDOW_END: OffsetDateTime = datetime!(2026-12-01 09:10 UTC);

    fn eur(minor: i64) -> Money {
        Money::parse(
            "amountMinor",
            minor,
            Currency::parse("currency", "EUR").unwrap(),
        )
        .unwrap()
    }

    fn order(status: OrderStatus, paid_by: Option<&str>) -> GoodsOrder {
        GoodsOrder {
            id: OrderId::parse(1).unwrap(),
            drop_id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            user_id: UserId::parse(1).unwrap(),
            sku: None,
            quantity: Quantity::parse("quantity", 1).unwrap(),
            amount: eur(1999),
            status,
            idempotency_key: IdempotencyKey::parse("k").unwrap(),
            created_at: CREATED,
            payment: paid_by.map(|reference| Payment {
                event_id: PaymentEventId::parse("evt_0").unwrap(),
                reference: PaymentReference::parse(reference).unwrap(),
                at: CREATED,
            }),
            deadline: None,
        }
    }

    fn event(kind: PaymentEventKind, amount: Money, reference: &str) -> PaymentEvent {
        PaymentEvent {
            id: PaymentEventId::parse("evt_1").unwrap(),
            kind,
            order_id: OrderId::parse(1).unwrap(),
            amount,
            reference: PaymentReference::parse(reference).unwrap(),
        }
    }

    use OrderStatus::{Cancelled, Expired, Paid, Pending};
    use PaymentEventKind::{Failed, Succeeded};
    use PaymentOutcome as O;

    #[rstest]
    #[case::pays_a_pending_order(Pending, None, Succeeded, 1999, "pi_1", WINDOW_END - time::Duration::milliseconds(1), O::Paid)]
    #[case::a_failure_changes_nothing(
        Pending,
        None,
        Failed,
        1999,
        "pi_1",
        CREATED,
        O::FailedRecorded
    )]
    #[case::a_failure_on_a_paid_order_changes_nothing(
        Paid,
        Some("pi_1"),
        Failed,
        1,
        "pi_2",
        CREATED,
        O::FailedRecorded
    )]
    #[case::the_same_reference_again(
        Paid,
        Some("pi_1"),
        Succeeded,
        1999,
        "pi_1",
        CREATED,
        O::AlreadyPaid
    )]
    #[case::another_reference_on_a_paid_order(
        Paid,
        Some("pi_1"),
        Succeeded,
        1999,
        "pi_2",
        CREATED,
        O::RefundRequired
    )]
    #[case::a_cancelled_order(Cancelled, None, Succeeded, 1999, "pi_1", CREATED, O::RefundRequired)]
    #[case::an_expired_order(Expired, None, Succeeded, 1999, "pi_1", CREATED, O::RefundRequired)]
    #[case::an_expired_order_and_a_wrong_amount(
        Expired,
        None,
        Succeeded,
        5,
        "pi_1",
        CREATED,
        O::RefundRequired
    )]
    #[case::too_little(Pending, None, Succeeded, 1998, "pi_1", CREATED, O::AmountMismatch)]
    #[case::too_much(Pending, None, Succeeded, 2000, "pi_1", CREATED, O::AmountMismatch)]
    #[case::at_the_end_of_the_window(
        Pending,
        None,
        Succeeded,
        1999,
        "pi_1",
        WINDOW_END,
        O::RefundRequired
    )]
    fn an_event_has_one_outcome_for_each_state_of_its_order(
        #[case] status: OrderStatus,
        #[case] paid_by: Option<&str>,
        #[case] kind: PaymentEventKind,
        #[case] minor: i64,
        #[case] reference: &str,
        #[case] now: OffsetDateTime,
        #[case] expected: PaymentOutcome,
    ) {
        let decision = order(status, paid_by).apply_payment(
            &event(kind, eur(minor), reference),
            now,
            PaymentWindow::seconds(600),
        );
        assert_eq!(decision.outcome, expected);
        // Only a payment that wins changes the order to PAID, and only a PENDING order past its
        // window is expired by a late payment.
        let mut after = order(status, paid_by);
        let transition = match decision.transition.clone() {
            None => "none",
            Some(PaymentTransition::Pay(p)) => {
                assert_eq!((p.reference.as_str(), p.at), (reference, now));
                after.apply_payment_transition(PaymentTransition::Pay(p.clone()));
                assert_eq!((after.status, after.payment), (OrderStatus::Paid, Some(p)));
                "pay"
            }
            Some(PaymentTransition::Expire) => {
                after.apply_payment_transition(PaymentTransition::Expire);
                assert_eq!((after.status, after.payment), (OrderStatus::Expired, None));
                "expire"
            }
        };
        let expected_transition = match (expected, status) {
            (O::Paid, _) => "pay",
            (O::RefundRequired, Pending) => "expire",
            _ => "none",
        };
        assert_eq!(transition, expected_transition);
    }

    #[test]
    fn a_currency_that_differs_is_a_mismatch_even_with_the_same_number() {
        let krw = Money::parse(
            "amountMinor",
            1999,
            Currency::parse("currency", "KRW").unwrap(),
        )
        .unwrap();
        let decision = order(Pending, None).apply_payment(
            &event(Succeeded, krw, "pi_1"),
            CREATED,
            PaymentWindow::seconds(600),
        );
        assert_eq!(
            (decision.outcome, decision.transition),
            (O::AmountMismatch, None)
        );
    }

    #[test]
    fn every_outcome_round_trips_through_its_name() {
        for outcome in PaymentOutcome::ALL {
            assert_eq!(PaymentOutcome::parse(outcome.as_str()), Some(outcome));
        }
        assert_eq!(
            PaymentEventKind::parse("payment.refunded"),
            None,
            "only the two kinds the contract names"
        );
    }
}
