//! What the service tells other systems: one event per decision, written in the decision's own
//! transaction (docs/events.md). The types are the contract's; which decision yields which
//! events is decided here, and the store only writes what these functions return.

use crate::{
    DrawSeed, DropId, EntriesRoot, GoodsOrder, LimitedDrop, OrderId, OrderStatus, PaymentEvent,
    PaymentOutcome, RankKey, Sku, UserId,
};

/// A size's units against its limit: before a purchase batch, for [`purchase_facts`]; an
/// oversold size, in [`Fact::DropOversold`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeSold {
    pub sku: Sku,
    /// Units in its live orders (before the batch, for [`purchase_facts`]).
    pub sold: u32,
    /// Its `limitedQuantity`.
    pub limited: u32,
}

/// An event's `type`, as the contract names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    DropCreated,
    DropSoldOut,
    VariantSoldOut,
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
    pub const ALL: [Self; 17] = [
        Self::DropCreated,
        Self::DropSoldOut,
        Self::VariantSoldOut,
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
            Self::VariantSoldOut => "goods.variant.sold_out",
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
    /// A purchase took the last unit of a size of a drop in sizes: `limited` units of it are
    /// in live orders.
    VariantSoldOut {
        drop: DropId,
        sku: Sku,
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
        /// The drop's cutoff (a drop without sizes).
        cutoff: Option<RankKey>,
        /// Each size's cutoff, in a drop sold in sizes (`None`: nobody won it).
        size_cutoffs: Vec<(Sku, Option<RankKey>)>,
        root: Option<EntriesRoot>,
        entries: u32,
        winners: u32,
    },
    /// A draw's entry won a unit (its order is placed too): by the draw, or `promoted` from the
    /// waitlist when a winner's order ended unpaid.
    EntryWon {
        drop: DropId,
        user: UserId,
        /// The entry's size (`None` in a drop without sizes).
        sku: Option<Sku>,
        order: OrderId,
        promoted: bool,
    },
    /// A draw's award to this entry was refused; its unit went to the next by rank.
    EntryVoided {
        drop: DropId,
        user: UserId,
        /// The entry's size (`None` in a drop without sizes).
        sku: Option<Sku>,
        reason: String,
    },
    /// More units sold than the drop has (the design document's LimitedDropOversoldEvent).
    DropOversold {
        drop: DropId,
        limited: u32,
        sold: u32,
        /// A drop in sizes: each oversold size (one may be while the drop's total is not).
        sizes: Vec<SizeSold>,
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
            Self::VariantSoldOut { .. } => EventType::VariantSoldOut,
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
            | Self::VariantSoldOut { drop, .. }
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
            Self::VariantSoldOut { drop, sku, .. } => format!("drops/{drop}/variants/{sku}"),
            Self::OrderPlaced(o)
            | Self::OrderPaid(o)
            | Self::OrderCancelled(o)
            | Self::OrderExpired(o)
            | Self::RefundRequired { order: o, .. }
            | Self::AmountMismatch { order: o, .. } => format!("orders/{}", o.id),
        }
    }
}

/// The facts of a committed purchase batch of one drop: each order placed, then each size
/// that the batch took the last unit of (`sizes`: each size the batch took units of, in sku
/// order, with the units sold before it and its limit), then the drop's sell-out when the
/// batch took its last unit (`sold` units were in live orders before it). The drop sells out
/// with its last size.
pub fn purchase_facts(
    placed: Vec<GoodsOrder>,
    sold: u32,
    limited: u32,
    sizes: &[SizeSold],
) -> Vec<Fact> {
    let taken: u32 = placed.iter().map(|o| o.quantity.get()).sum();
    let drop = placed.first().map(|o| o.drop_id);
    let taken_of = |sku: &Sku| -> u32 {
        placed
            .iter()
            .filter(|o| o.sku.as_ref() == Some(sku))
            .map(|o| o.quantity.get())
            .sum()
    };
    let variants: Vec<Fact> = drop
        .into_iter()
        .flat_map(|drop| {
            sizes
                .iter()
                .filter(|s| {
                    let taken = taken_of(&s.sku);
                    taken > 0 && s.sold.saturating_add(taken) >= s.limited
                })
                .map(move |s| Fact::VariantSoldOut {
                    drop,
                    sku: s.sku.clone(),
                    limited: s.limited,
                })
        })
        .collect();
    let mut facts: Vec<Fact> = placed.into_iter().map(Fact::OrderPlaced).collect();
    facts.extend(variants);
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
        let facts = purchase_facts(placed, sold, limited, &[]);
        let types: Vec<EventType> = facts.iter().map(Fact::event_type).collect();
        let mut expected = vec![EventType::OrderPlaced; quantities.len()];
        if sold_out {
            expected.push(EventType::DropSoldOut);
        }
        assert_eq!(types, expected);
        assert!(facts.iter().all(|f| f.drop_id().get() == 7));
    }

    #[test]
    fn a_batch_sells_out_each_size_it_takes_the_last_unit_of_then_the_drop_with_the_last() {
        let sku = |raw: &str| Sku::parse("sku", raw).unwrap();
        let of = |id: i64, size: &str, q: u32| GoodsOrder {
            sku: Some(sku(size)),
            ..order(id, q, OrderStatus::Pending)
        };
        let size = |raw: &str, sold: u32, limited: u32| SizeSold {
            sku: sku(raw),
            sold,
            limited,
        };
        // S: 3 of 4 sold, the batch takes 1 (sold out); M: 1 of 5, takes 2 (not); L: full
        // before, takes none (no event). The drop: 9 of 12 sold before, 3 taken: sold out.
        let placed = vec![of(1, "S", 1), of(2, "M", 2)];
        let sizes = [size("L", 3, 3), size("M", 1, 5), size("S", 3, 4)];
        let facts = purchase_facts(placed, 9, 12, &sizes);
        let subjects: Vec<(EventType, String)> = facts
            .iter()
            .map(|f| (f.event_type(), f.subject()))
            .collect();
        assert_eq!(
            subjects,
            [
                (EventType::OrderPlaced, "orders/1".to_owned()),
                (EventType::OrderPlaced, "orders/2".to_owned()),
                (EventType::VariantSoldOut, "drops/7/variants/S".to_owned()),
                (EventType::DropSoldOut, "drops/7".to_owned()),
            ]
        );
        let not_yet = purchase_facts(vec![of(1, "M", 1)], 3, 12, &sizes);
        assert_eq!(
            not_yet.iter().map(Fact::event_type).collect::<Vec<_>>(),
            [EventType::OrderPlaced],
            "M keeps 3 units: no size and not the drop sold out"
        );
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
