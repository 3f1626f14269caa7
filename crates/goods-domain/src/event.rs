//! What the service tells other systems: one event per decision, written in the decision's own
//! transaction (docs/events.md). The types are the contract's; which decision yields which
//! events is decided here, and the store only writes what these functions return.

use crate::{
    DrawSeed, DropId, EntriesRoot, GoodsOrder, LimitedDrop, OrderId, OrderStatus, PaymentEvent,
    PaymentOutcome, RankKey, UserId,
};

/// An event's `type`, as the contract names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    DropCreated,
    DropSoldOut,
    DropClosed,
    OrderPlaced,
    OrderPaid,
    OrderCancelled,
    OrderExpired,
    PaymentRefundRequired,
    PaymentAmountMismatch,
    DrawCompleted,
    EntryWon,
    EntryPromoted,
    EntryVoided,
    DropOversold,
    GateDegraded,
    GateRecovered,
}

impl EventType {
    /// Every type, in the contract's order.
    pub const ALL: [Self; 16] = [
        Self::DropCreated,
        Self::DropSoldOut,
        Self::DropClosed,
        Self::OrderPlaced,
        Self::OrderPaid,
        Self::OrderCancelled,
        Self::OrderExpired,
        Self::PaymentRefundRequired,
        Self::PaymentAmountMismatch,
        Self::DrawCompleted,
        Self::EntryWon,
        Self::EntryPromoted,
        Self::EntryVoided,
        Self::DropOversold,
        Self::GateDegraded,
        Self::GateRecovered,
    ];

    /// The CloudEvents `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DropCreated => "goods.drop.created",
            Self::DropSoldOut => "goods.drop.sold_out",
            Self::DropClosed => "goods.drop.closed",
            Self::OrderPlaced => "goods.order.placed",
            Self::OrderPaid => "goods.order.paid",
            Self::OrderCancelled => "goods.order.cancelled",
            Self::OrderExpired => "goods.order.expired",
            Self::PaymentRefundRequired => "goods.payment.refund_required",
            Self::PaymentAmountMismatch => "goods.payment.amount_mismatch",
            Self::DrawCompleted => "goods.draw.completed",
            Self::EntryWon => "goods.entry.won",
            Self::EntryPromoted => "goods.entry.promoted",
            Self::EntryVoided => "goods.entry.voided",
            Self::DropOversold => "goods.drop.oversold",
            Self::GateDegraded => "goods.gate.degraded",
            Self::GateRecovered => "goods.gate.recovered",
        }
    }

    /// The type named `name` by [`Self::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// A decision another system hears about, with what its event carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    DropCreated(LimitedDrop),
    /// A purchase took the drop's last unit: `sold` = `limited` units are in live orders.
    DropSoldOut {
        drop: DropId,
        limited: u32,
    },
    /// A seller or an admin ended the sale now.
    DropClosed(LimitedDrop),
    /// A purchase committed: the order, PENDING.
    OrderPlaced(GoodsOrder),
    /// A payment made the order PAID.
    OrderPaid(GoodsOrder),
    /// The buyer cancelled the order; its units went back.
    OrderCancelled(GoodsOrder),
    /// The order's payment window ended unpaid; its units went back.
    OrderExpired(GoodsOrder),
    /// Money came for an order that cannot take it: it must go back to the buyer.
    RefundRequired {
        order: GoodsOrder,
        payment: PaymentEvent,
    },
    /// A payment's amount or currency is not the order's: the order is unchanged.
    AmountMismatch {
        order: GoodsOrder,
        payment: PaymentEvent,
    },
    /// A draw was made: its seed revealed, the entry set's root and the counts.
    DrawCompleted {
        drop: DropId,
        seed: DrawSeed,
        cutoff: Option<RankKey>,
        root: Option<EntriesRoot>,
        entries: u32,
        winners: u32,
    },
    /// A draw's entry won a unit (its order is placed too): by the draw, or `promoted` from the
    /// waitlist when a winner's order ended unpaid.
    EntryWon {
        drop: DropId,
        user: UserId,
        order: OrderId,
        promoted: bool,
    },
    /// A draw's award to this entry was refused; its unit went to the next by rank.
    EntryVoided {
        drop: DropId,
        user: UserId,
        reason: String,
    },
    /// More units sold than the drop has (the design document's LimitedDropOversoldEvent).
    DropOversold {
        drop: DropId,
        limited: u32,
        sold: u32,
    },
    /// Purchases of the drop fall back to the database: the gate does not answer (the design
    /// document's redis-degraded, `severity=warning`).
    GateDegraded {
        drop: DropId,
    },
    /// The gate answers again and was resynced from the database for the drop.
    GateRecovered {
        drop: DropId,
    },
}

impl Fact {
    pub fn event_type(&self) -> EventType {
        match self {
            Self::DropCreated(_) => EventType::DropCreated,
            Self::DropSoldOut { .. } => EventType::DropSoldOut,
            Self::DropClosed(_) => EventType::DropClosed,
            Self::OrderPlaced(_) => EventType::OrderPlaced,
            Self::OrderPaid(_) => EventType::OrderPaid,
            Self::OrderCancelled(_) => EventType::OrderCancelled,
            Self::OrderExpired(_) => EventType::OrderExpired,
            Self::RefundRequired { .. } => EventType::PaymentRefundRequired,
            Self::AmountMismatch { .. } => EventType::PaymentAmountMismatch,
            Self::DrawCompleted { .. } => EventType::DrawCompleted,
            Self::EntryWon {
                promoted: false, ..
            } => EventType::EntryWon,
            Self::EntryWon { promoted: true, .. } => EventType::EntryPromoted,
            Self::EntryVoided { .. } => EventType::EntryVoided,
            Self::DropOversold { .. } => EventType::DropOversold,
            Self::GateDegraded { .. } => EventType::GateDegraded,
            Self::GateRecovered { .. } => EventType::GateRecovered,
        }
    }

    /// The drop whose sequence numbers it.
    pub fn drop_id(&self) -> DropId {
        match self {
            Self::DropCreated(d) | Self::DropClosed(d) => d.id,
            Self::DropSoldOut { drop, .. }
            | Self::DrawCompleted { drop, .. }
            | Self::EntryWon { drop, .. }
            | Self::EntryVoided { drop, .. }
            | Self::DropOversold { drop, .. }
            | Self::GateDegraded { drop }
            | Self::GateRecovered { drop } => *drop,
            Self::OrderPlaced(o)
            | Self::OrderPaid(o)
            | Self::OrderCancelled(o)
            | Self::OrderExpired(o)
            | Self::RefundRequired { order: o, .. }
            | Self::AmountMismatch { order: o, .. } => o.drop_id,
        }
    }

    /// The CloudEvents `subject`: `orders/{orderId}`, `drops/{dropId}` or
    /// `entries/{dropId}/{userId}`.
    pub fn subject(&self) -> String {
        match self {
            Self::DropCreated(_)
            | Self::DropSoldOut { .. }
            | Self::DropClosed(_)
            | Self::DrawCompleted { .. }
            | Self::DropOversold { .. }
            | Self::GateDegraded { .. }
            | Self::GateRecovered { .. } => format!("drops/{}", self.drop_id()),
            Self::EntryWon { drop, user, .. } | Self::EntryVoided { drop, user, .. } => {
                format!("entries/{drop}/{user}")
            }
            Self::OrderPlaced(o)
            | Self::OrderPaid(o)
            | Self::OrderCancelled(o)
            | Self::OrderExpired(o)
            | Self::RefundRequired { order: o, .. }
            | Self::AmountMismatch { order: o, .. } => format!("orders/{}", o.id),
        }
    }
}

/// The facts of a committed purchase batch of one drop: each order placed, then the sell-out
/// when the batch took the drop's last unit (`sold` units were in live orders before it).
pub fn purchase_facts(placed: Vec<GoodsOrder>, sold: u32, limited: u32) -> Vec<Fact> {
    let taken: u32 = placed.iter().map(|o| o.quantity.get()).sum();
    let drop = placed.first().map(|o| o.drop_id);
    let mut facts: Vec<Fact> = placed.into_iter().map(Fact::OrderPlaced).collect();
    if let Some(drop) = drop
        && taken > 0
        && sold.saturating_add(taken) >= limited
    {
        facts.push(Fact::DropSoldOut { drop, limited });
    }
    facts
}

/// Whether a gate fact is news: a drop's gate events alternate, degraded first, so each
/// instance of a fleet that finds the gate failing (or answering again) does not repeat what
/// another already said. `last` is the type of the drop's latest gate event, if any.
pub fn gate_fact_is_news(fact: &Fact, last: Option<EventType>) -> bool {
    match fact {
        Fact::GateDegraded { .. } => last != Some(EventType::GateDegraded),
        Fact::GateRecovered { .. } => last == Some(EventType::GateDegraded),
        _ => true,
    }
}

/// The fact of an order that ended and gave its units back (cancelled or expired); `None`
/// for any other status.
pub fn ended_fact(order: GoodsOrder) -> Option<Fact> {
    match order.status {
        OrderStatus::Cancelled => Some(Fact::OrderCancelled(order)),
        OrderStatus::Expired => Some(Fact::OrderExpired(order)),
        OrderStatus::Pending | OrderStatus::Paid => None,
    }
}

/// The facts of an applied payment: what its outcome did to `order` as it is after the
/// transaction (PAID, unchanged, or `expired_now`: a PENDING order past its window that this
/// payment's arrival expired, which is a fact of its own).
pub fn payment_facts(
    outcome: PaymentOutcome,
    order: &GoodsOrder,
    payment: &PaymentEvent,
    expired_now: bool,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    if expired_now {
        facts.extend(ended_fact(order.clone()));
    }
    match outcome {
        PaymentOutcome::Paid => facts.push(Fact::OrderPaid(order.clone())),
        PaymentOutcome::RefundRequired => {
            facts.push(Fact::RefundRequired {
                order: order.clone(),
                payment: payment.clone(),
            });
        }
        PaymentOutcome::AmountMismatch => facts.push(Fact::AmountMismatch {
            order: order.clone(),
            payment: payment.clone(),
        }),
        PaymentOutcome::AlreadyPaid
        | PaymentOutcome::FailedRecorded
        | PaymentOutcome::OrderNotFound => {}
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Currency, IdempotencyKey, Money, OrderId, PaymentEventId, PaymentEventKind, ProductId,
        Quantity, UserId,
    };
    use rstest::rstest;
    use time::OffsetDateTime;

    fn order(id: i64, quantity: u32, status: OrderStatus) -> GoodsOrder {
        GoodsOrder {
            id: OrderId::parse(id).unwrap(),
            drop_id: DropId::parse(7).unwrap(),
            product_id: ProductId::parse(3).unwrap(),
            user_id: UserId::parse(id + 100).unwrap(),
            sku: None,
            quantity: Quantity::parse("quantity", i64::from(quantity)).unwrap(),
            amount: Money::parse("amountMinor", 0, Currency::NONE).unwrap(),
            status,
            idempotency_key: IdempotencyKey::parse("k").unwrap(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            deadline: None,
            payment: None,
        }
    }

    fn payment() -> PaymentEvent {
        PaymentEvent {
            id: PaymentEventId::parse("evt").unwrap(),
            kind: PaymentEventKind::Succeeded,
            order_id: OrderId::parse(1).unwrap(),
            amount: Money::parse("amountMinor", 0, Currency::NONE).unwrap(),
            reference: crate::PaymentReference::parse("pi").unwrap(),
        }
    }

    #[test]
    fn every_type_reads_back_from_its_name() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
            assert!(t.as_str().starts_with("goods."));
        }
        assert_eq!(EventType::parse("goods.order"), None);
    }

    #[rstest]
    #[case::not_the_last(&[1, 1], 5, 10, false)]
    #[case::exactly_the_last(&[1, 2], 7, 10, true)]
    #[case::the_last_alone(&[1], 9, 10, true)]
    #[case::nothing_placed(&[], 10, 10, false)]
    fn a_batch_sells_out_when_it_takes_the_last_unit(
        #[case] quantities: &[u32],
        #[case] sold: u32,
        #[case] limited: u32,
        #[case] sold_out: bool,
    ) {
        let placed: Vec<GoodsOrder> = quantities
            .iter()
            .enumerate()
            .map(|(i, &q)| order(i as i64 + 1, q, OrderStatus::Pending))
            .collect();
        let facts = purchase_facts(placed, sold, limited);
        let types: Vec<EventType> = facts.iter().map(Fact::event_type).collect();
        let mut expected = vec![EventType::OrderPlaced; quantities.len()];
        if sold_out {
            expected.push(EventType::DropSoldOut);
        }
        assert_eq!(types, expected);
        assert!(facts.iter().all(|f| f.drop_id().get() == 7));
    }

    #[rstest]
    #[case(PaymentOutcome::Paid, OrderStatus::Paid, false, &[EventType::OrderPaid])]
    #[case(PaymentOutcome::RefundRequired, OrderStatus::Cancelled, false, &[EventType::PaymentRefundRequired])]
    #[case::expired_long_ago(PaymentOutcome::RefundRequired, OrderStatus::Expired, false, &[EventType::PaymentRefundRequired])]
    #[case::expired_by_this_payment(PaymentOutcome::RefundRequired, OrderStatus::Expired, true, &[EventType::OrderExpired, EventType::PaymentRefundRequired])]
    #[case(PaymentOutcome::AmountMismatch, OrderStatus::Pending, false, &[EventType::PaymentAmountMismatch])]
    #[case(PaymentOutcome::AlreadyPaid, OrderStatus::Paid, false, &[])]
    #[case(PaymentOutcome::FailedRecorded, OrderStatus::Pending, false, &[])]
    fn a_payment_yields_the_events_of_what_it_did(
        #[case] outcome: PaymentOutcome,
        #[case] status: OrderStatus,
        #[case] expired_now: bool,
        #[case] expected: &[EventType],
    ) {
        let facts = payment_facts(outcome, &order(1, 1, status), &payment(), expired_now);
        let types: Vec<EventType> = facts.iter().map(Fact::event_type).collect();
        assert_eq!(types, expected);
        assert!(facts.iter().all(|f| f.subject() == "orders/1"));
    }

    #[rstest]
    #[case::first_outage(true, None, true)]
    #[case::after_a_recovery(true, Some(EventType::GateRecovered), true)]
    #[case::already_degraded(true, Some(EventType::GateDegraded), false)]
    #[case::recovered_from_an_outage(false, Some(EventType::GateDegraded), true)]
    #[case::already_recovered(false, Some(EventType::GateRecovered), false)]
    #[case::never_degraded(false, None, false)]
    fn a_drops_gate_events_alternate_degraded_first(
        #[case] degraded: bool,
        #[case] last: Option<EventType>,
        #[case] news: bool,
    ) {
        let drop = DropId::parse(7).unwrap();
        let fact = if degraded {
            Fact::GateDegraded { drop }
        } else {
            Fact::GateRecovered { drop }
        };
        assert_eq!(gate_fact_is_news(&fact, last), news);
        assert_eq!(fact.subject(), "drops/7");
    }

    #[test]
    fn only_an_ended_order_has_an_end_fact() {
        assert_eq!(
            ended_fact(order(1, 1, OrderStatus::Cancelled)).map(|f| f.event_type()),
            Some(EventType::OrderCancelled)
        );
        assert_eq!(
            ended_fact(order(1, 1, OrderStatus::Expired)).map(|f| f.event_type()),
            Some(EventType::OrderExpired)
        );
        assert_eq!(ended_fact(order(1, 1, OrderStatus::Pending)), None);
        assert_eq!(ended_fact(order(1, 1, OrderStatus::Paid)), None);
    }
}
