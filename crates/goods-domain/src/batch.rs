//! The rule that answers a batch of one drop's purchases in one transaction (group commit).
//!
//! The store reads the facts, asks [`plan_batch`], writes the plan (hot rows by
//! [`BatchPlan::taken`]) and answers with [`BatchPlan::answers`]. Every write stays conditional
//! on its invariant, so a plan from an overtaken read fails its write and is retried.

use crate::ports::{PlaceOrder, PlaceOrderError, Placed, Placement, max_orders_per_buyer, unix_ms};
use crate::{GoodsOrder, IdempotencyKey, Sku, UserId};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A buyer's units and orders in one drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holding {
    /// Units in the buyer's live orders.
    pub units: u32,
    /// Orders the buyer placed in the drop, cancelled ones included.
    pub orders: u32,
}

/// Units a batch may take per size of its drop ([`crate::Sizes`]; a drop without sizes has
/// one, `None`): each size's unsold units, no more than its stock ([`free_units`]).
pub type FreeUnits = BTreeMap<Option<Sku>, u32>;

/// What the batch's transaction read, as of its first statement.
#[derive(Debug, Clone, Default)]
pub struct BatchFacts {
    /// Units the batch may take, per size.
    pub free: FreeUnits,
    /// The drop was closed early (replays are still answered).
    pub closed: bool,
    /// The database's clock, in unix milliseconds: the clock admission leases are judged by.
    pub db_now_ms: i64,
    /// The orders that exist for the batch's (buyer, key) pairs.
    pub existing: HashMap<(UserId, IdempotencyKey), GoodsOrder>,
    /// The holdings of the buyers [`buyers_to_lock`] named (a buyer with none holds nothing).
    pub holdings: HashMap<UserId, Holding>,
}

/// Units a batch may take from a drop's size: what its `limited` leaves after `sold`, no more
/// than its `stock` (the product's, or the variant's), nothing once the drop is `closed`.
pub fn free_units(limited: u32, sold: u32, stock: u32, closed: bool) -> u32 {
    if closed {
        0
    } else {
        limited.saturating_sub(sold).min(stock)
    }
}

/// Whether the database's clock is past the order's admission lease.
pub fn lease_ended(order: &PlaceOrder, db_now_ms: i64) -> bool {
    order.deadline.is_some_and(|d| db_now_ms > unix_ms(d))
}

/// The units free in `order`'s size (none in a size the drop does not sell).
fn free_for(free: &FreeUnits, order: &PlaceOrder) -> u32 {
    free.get(&order.sku).copied().unwrap_or(0)
}

/// The buyers whose holdings the transaction must create and lock before it reads them: those
/// of the orders that the free units of their size and the leases do not refuse already. A
/// sold-out size's refusals lock nothing. In buyer order, so two batches lock shared buyers in
/// the same order.
pub fn buyers_to_lock(batch: &[PlaceOrder], free: &FreeUnits, db_now_ms: i64) -> BTreeSet<UserId> {
    batch
        .iter()
        .filter(|o| !lease_ended(o, db_now_ms) && o.quantity.get() <= free_for(free, o))
        .map(|o| o.user_id)
        .collect()
}

/// How the transaction answers one order of the batch.
#[derive(Debug)]
pub enum Decision {
    /// Answered without a write: a replay or a refusal.
    Answered(Placement),
    /// Committed with the batch.
    Accepted,
    /// The same (buyer, key) as the accepted order at this index: answered from it.
    SameKeyAs(usize),
}

/// What the batch writes, and how it answers.
#[derive(Debug)]
pub struct BatchPlan {
    /// One decision per order, in the batch's order.
    pub decisions: Vec<Decision>,
    /// What each buyer with an accepted order adds to their holding (across sizes).
    pub added: BTreeMap<UserId, Holding>,
    /// Units the accepted orders take from each size (and its stock); a size nothing was taken
    /// from is absent.
    pub taken: FreeUnits,
}

impl BatchPlan {
    /// Units the accepted orders take from the drop in all.
    pub fn taken_in_all(&self) -> u32 {
        self.taken.values().sum()
    }

    /// The orders to insert, in the batch's order.
    pub fn accepted<'a>(&'a self, batch: &'a [PlaceOrder]) -> impl Iterator<Item = &'a PlaceOrder> {
        batch
            .iter()
            .zip(&self.decisions)
            .filter(|(_, d)| matches!(d, Decision::Accepted))
            .map(|(o, _)| o)
    }

    /// Each order's answer once the accepted ones are committed; `created` finds an accepted
    /// order as inserted (`None`: it was not read back, a fault).
    pub fn answers(
        self,
        batch: &[PlaceOrder],
        created: impl Fn(&PlaceOrder) -> Option<GoodsOrder>,
    ) -> Vec<Placement> {
        let mut answers: Vec<Placement> = Vec::with_capacity(batch.len());
        for (order, decision) in batch.iter().zip(self.decisions) {
            answers.push(match decision {
                Decision::Answered(answer) => answer,
                Decision::Accepted => created(order).map(Placed::Created).ok_or_else(|| {
                    PlaceOrderError::Infra(crate::InfraError::msg(
                        "an inserted order was not read back",
                    ))
                }),
                Decision::SameKeyAs(earlier) => match &answers[earlier] {
                    Ok(Placed::Created(found))
                        if found.matches_request(
                            order.drop_id,
                            order.sku.as_ref(),
                            order.quantity,
                        ) =>
                    {
                        Ok(Placed::Replayed(found.clone()))
                    }
                    _ => Err(PlaceOrderError::KeyReused),
                },
            });
        }
        answers
    }
}

/// Decides every order of `batch` (one drop, one set of terms) in order against `facts`, so the
/// earliest order that fits gets the last unit of its size and a refusal fails that order
/// alone. First match wins: an existing order for (buyer, key) (replay, or `KeyReused`); one
/// accepted earlier in the batch (answered from it); `Closed`; `LeaseExpired` by the database's
/// clock; `SoldOut` (of the order's size, with that size's units left); `OrderLimitReached`
/// ([`max_orders_per_buyer`]); `PerUserLimitExceeded` (the buyer's units across every size);
/// else accepted.
pub fn plan_batch(batch: &[PlaceOrder], facts: &BatchFacts) -> BatchPlan {
    let mut left = facts.free.clone();
    let mut added: BTreeMap<UserId, Holding> = BTreeMap::new();
    let mut accepted_keys: HashMap<(UserId, &IdempotencyKey), usize> = HashMap::new();
    let mut decisions = Vec::with_capacity(batch.len());
    for (index, order) in batch.iter().enumerate() {
        let q = order.quantity.get();
        let decision = if let Some(found) = facts.existing.get(&(order.user_id, order.key.clone()))
        {
            Decision::Answered(
                if found.matches_request(order.drop_id, order.sku.as_ref(), order.quantity) {
                    Ok(Placed::Replayed(found.clone()))
                } else {
                    Err(PlaceOrderError::KeyReused)
                },
            )
        } else if let Some(&earlier) = accepted_keys.get(&(order.user_id, &order.key)) {
            Decision::SameKeyAs(earlier)
        } else if facts.closed {
            Decision::Answered(Err(PlaceOrderError::Closed))
        } else if lease_ended(order, facts.db_now_ms) {
            Decision::Answered(Err(PlaceOrderError::LeaseExpired))
        } else if q > free_for(&left, order) {
            Decision::Answered(Err(PlaceOrderError::SoldOut {
                remaining: free_for(&left, order),
            }))
        } else {
            let held = facts
                .holdings
                .get(&order.user_id)
                .copied()
                .unwrap_or_default();
            let adding = added.entry(order.user_id).or_default();
            let cap = max_orders_per_buyer(order.per_user_limit);
            if held.orders.saturating_add(adding.orders) >= cap {
                Decision::Answered(Err(PlaceOrderError::OrderLimitReached { limit: cap }))
            } else if held.units.saturating_add(adding.units).saturating_add(q)
                > order.per_user_limit.get()
            {
                Decision::Answered(Err(PlaceOrderError::PerUserLimitExceeded {
                    limit: order.per_user_limit.get(),
                }))
            } else {
                adding.units += q;
                adding.orders += 1;
                if let Some(units) = left.get_mut(&order.sku) {
                    *units -= q;
                }
                accepted_keys.insert((order.user_id, &order.key), index);
                Decision::Accepted
            }
        };
        decisions.push(decision);
    }
    added.retain(|_, h| h.orders > 0);
    let taken = facts
        .free
        .iter()
        .map(|(size, free)| (size.clone(), free - left.get(size).copied().unwrap_or(0)))
        .filter(|(_, taken)| *taken > 0)
        .collect();
    BatchPlan {
        decisions,
        added,
        taken,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::from_unix_ms;
    use crate::{Currency, DropId, Money, OrderId, OrderStatus, Price, ProductId, Quantity};
    use rstest::rstest;

    const NOW_MS: i64 = 1_764_579_600_000;

    fn order(buyer: i64, key: &str, quantity: i64) -> PlaceOrder {
        PlaceOrder {
            drop_id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            limited_quantity: Quantity::parse("q", 100).unwrap(),
            per_user_limit: Quantity::parse("q", 2).unwrap(),
            price: Price::default(),
            user_id: UserId::parse(buyer).unwrap(),
            sku: None,
            quantity: Quantity::parse("q", quantity).unwrap(),
            key: IdempotencyKey::parse(key).unwrap(),
            now: from_unix_ms(NOW_MS).unwrap(),
            deadline: None,
            window: crate::PaymentWindow::default(),
        }
    }

    fn stored(o: &PlaceOrder, id: i64) -> GoodsOrder {
        o.created(OrderId::parse(id).unwrap()).unwrap()
    }

    #[test]
    fn the_created_order_is_the_placed_one_pending_unpaid_and_priced() {
        let mut o = order(7, "a", 2);
        o.price = Price::parse(1_250, Currency::parse("c", "EUR").unwrap()).unwrap();
        o.sku = Some(Sku::parse("sku", "M").unwrap());
        o.window = crate::PaymentWindow::seconds(600);
        let made = o.created(OrderId::parse(41).unwrap()).unwrap();
        assert_eq!(
            made,
            GoodsOrder {
                id: OrderId::parse(41).unwrap(),
                drop_id: o.drop_id,
                product_id: o.product_id,
                user_id: o.user_id,
                sku: Some(Sku::parse("sku", "M").unwrap()),
                quantity: Quantity::parse("q", 2).unwrap(),
                amount: Money::parse("amountMinor", 2_500, Currency::parse("c", "EUR").unwrap())
                    .unwrap(),
                status: OrderStatus::Pending,
                idempotency_key: IdempotencyKey::parse("a").unwrap(),
                created_at: from_unix_ms(NOW_MS).unwrap(),
                deadline: Some(from_unix_ms(NOW_MS + 600_000).unwrap()),
                payment: None,
            }
        );
        // An amount past 2^53 - 1 is never an order's.
        o.price = Price::parse(1_000_000_000_000, Currency::parse("c", "EUR").unwrap()).unwrap();
        o.quantity = Quantity::parse("q", 10_000).unwrap();
        assert_eq!(o.created(OrderId::parse(41).unwrap()), None);
    }

    fn facts(free: u32) -> BatchFacts {
        BatchFacts {
            free: FreeUnits::from([(None, free)]),
            db_now_ms: NOW_MS,
            ..BatchFacts::default()
        }
    }

    /// Each decision as a short word, for tables.
    fn words(plan: &BatchPlan) -> Vec<String> {
        plan.decisions
            .iter()
            .map(|d| match d {
                Decision::Accepted => "accept".to_owned(),
                Decision::SameKeyAs(i) => format!("same-as-{i}"),
                Decision::Answered(Ok(Placed::Replayed(_))) => "replay".to_owned(),
                Decision::Answered(Ok(Placed::Created(_))) => "created?".to_owned(),
                Decision::Answered(Err(e)) => match e {
                    PlaceOrderError::SoldOut { remaining } => format!("sold-out-{remaining}"),
                    PlaceOrderError::PerUserLimitExceeded { .. } => "per-user".to_owned(),
                    PlaceOrderError::KeyReused => "key-reused".to_owned(),
                    PlaceOrderError::OrderLimitReached { .. } => "order-cap".to_owned(),
                    PlaceOrderError::LeaseExpired => "lease".to_owned(),
                    PlaceOrderError::Closed => "closed".to_owned(),
                    other => format!("{other:?}"),
                },
            })
            .collect()
    }

    #[rstest]
    #[case::the_earliest_that_fits_gets_the_last_unit(1, vec![(7, "a", 1), (8, "a", 1)], vec!["accept", "sold-out-0"], 1)]
    #[case::a_large_order_refused_a_smaller_one_after_it_fits(1, vec![(7, "a", 2), (8, "a", 1)], vec!["sold-out-1", "accept"], 1)]
    #[case::nothing_free(0, vec![(7, "a", 1)], vec!["sold-out-0"], 0)]
    #[case::a_buyer_within_the_limit_in_two_orders(5, vec![(7, "a", 1), (7, "b", 1)], vec!["accept", "accept"], 2)]
    #[case::a_buyer_past_the_limit_in_the_batch(5, vec![(7, "a", 2), (7, "b", 1)], vec!["accept", "per-user"], 2)]
    #[case::the_same_key_twice_is_one_order(5, vec![(7, "a", 1), (7, "a", 1)], vec!["accept", "same-as-0"], 1)]
    #[case::the_same_key_for_another_quantity(5, vec![(7, "a", 1), (7, "a", 2)], vec!["accept", "same-as-0"], 1)]
    #[case::another_buyers_same_key_is_theirs(5, vec![(7, "a", 1), (8, "a", 1)], vec!["accept", "accept"], 2)]
    fn a_batch_is_answered_order_by_order_in_its_order(
        #[case] free: u32,
        #[case] batch: Vec<(i64, &str, i64)>,
        #[case] expected: Vec<&str>,
        #[case] taken: u32,
    ) {
        let batch: Vec<PlaceOrder> = batch.iter().map(|(b, k, q)| order(*b, k, *q)).collect();
        let plan = plan_batch(&batch, &facts(free));
        assert_eq!(words(&plan), expected);
        assert_eq!(plan.taken_in_all(), taken);
    }

    #[test]
    fn an_existing_order_is_replayed_for_the_same_request_and_refused_for_another() {
        let first = order(7, "a", 1);
        let mut f = facts(5);
        f.existing
            .insert((first.user_id, first.key.clone()), stored(&first, 9));
        let other = order(7, "a", 2);
        let plan = plan_batch(&[first.clone(), other], &f);
        assert_eq!(words(&plan), ["replay", "key-reused"]);
        assert_eq!(
            (plan.taken.len(), plan.added.len()),
            (0, 0),
            "nothing written"
        );
    }

    #[test]
    fn closed_drops_and_ended_leases_refuse_but_replays_still_answer() {
        let replayed = order(7, "a", 1);
        let mut late = order(8, "a", 1);
        late.deadline = from_unix_ms(NOW_MS - 1);
        let mut on_time = order(9, "a", 1);
        on_time.deadline = from_unix_ms(NOW_MS);
        let mut f = facts(5);
        f.existing.insert(
            (replayed.user_id, replayed.key.clone()),
            stored(&replayed, 9),
        );
        let batch = [replayed, late, on_time];
        assert_eq!(
            words(&plan_batch(&batch, &f)),
            ["replay", "lease", "accept"]
        );
        f.closed = true;
        assert_eq!(
            words(&plan_batch(&batch, &f)),
            ["replay", "closed", "closed"]
        );
        // A lease ends strictly after its deadline, by the database's millisecond clock.
        assert_eq!(
            buyers_to_lock(&batch, &f.free, NOW_MS)
                .into_iter()
                .map(UserId::get)
                .collect::<Vec<_>>(),
            [7, 9]
        );
    }

    #[test]
    fn holdings_found_count_against_the_limit_and_the_order_cap() {
        let mut f = facts(50);
        let buyer = UserId::parse(7).unwrap();
        f.holdings.insert(
            buyer,
            Holding {
                units: 1,
                orders: 3,
            },
        );
        let plan = plan_batch(&[order(7, "a", 1), order(7, "b", 1)], &f);
        assert_eq!(words(&plan), ["accept", "per-user"]);
        assert_eq!(
            plan.added[&buyer],
            Holding {
                units: 1,
                orders: 1
            }
        );
        // perUserLimit 2 allows 12 orders in all, cancelled ones included.
        f.holdings.insert(
            buyer,
            Holding {
                units: 0,
                orders: 12,
            },
        );
        assert_eq!(words(&plan_batch(&[order(7, "c", 1)], &f)), ["order-cap"]);
    }

    #[test]
    fn answers_follow_the_plan_and_a_repeated_key_replays_its_order() {
        let batch = [
            order(7, "a", 1),
            order(7, "a", 1),
            order(7, "a", 2),
            order(8, "x", 5),
        ];
        let plan = plan_batch(&batch, &facts(3));
        let answers = plan.answers(&batch, |o| Some(stored(o, 41)));
        assert!(matches!(&answers[0], Ok(Placed::Created(o)) if o.id.get() == 41));
        assert!(matches!(&answers[1], Ok(Placed::Replayed(o)) if o.id.get() == 41));
        assert!(matches!(&answers[2], Err(PlaceOrderError::KeyReused)));
        assert!(matches!(
            &answers[3],
            Err(PlaceOrderError::SoldOut { remaining: 2 })
        ));
        let lost = plan_batch(&batch, &facts(3)).answers(&batch, |_| None);
        assert!(matches!(&lost[0], Err(PlaceOrderError::Infra(_))));
    }

    fn sku(raw: &str) -> Option<Sku> {
        Some(Sku::parse("sku", raw).unwrap())
    }

    /// An order of size `size` (perUserLimit 2).
    fn sized(buyer: i64, key: &str, size: &str, quantity: i64) -> PlaceOrder {
        PlaceOrder {
            sku: sku(size),
            ..order(buyer, key, quantity)
        }
    }

    fn sizes_free(free: &[(&str, u32)]) -> BatchFacts {
        BatchFacts {
            free: free.iter().map(|(s, n)| (sku(s), *n)).collect(),
            db_now_ms: NOW_MS,
            ..BatchFacts::default()
        }
    }

    #[rstest]
    #[case::a_sold_out_size_refuses_with_its_own_remaining_while_another_sells(
        vec![("S", 1), ("M", 3)],
        vec![(7, "a", "S", 1), (8, "a", "S", 1), (9, "a", "M", 2)],
        vec!["accept", "sold-out-0", "accept"],
        vec![("M", 2), ("S", 1)]
    )]
    #[case::a_large_order_refused_by_its_size_not_by_the_drops_total(
        vec![("S", 1), ("M", 3)],
        vec![(7, "a", "S", 2)],
        vec!["sold-out-1"],
        vec![]
    )]
    #[case::the_per_user_limit_counts_across_sizes(
        vec![("S", 5), ("M", 5), ("L", 5)],
        vec![(7, "a", "S", 1), (7, "b", "M", 1), (7, "c", "L", 1), (8, "a", "L", 2)],
        vec!["accept", "accept", "per-user", "accept"],
        vec![("L", 2), ("M", 1), ("S", 1)]
    )]
    #[case::a_size_the_drop_does_not_sell_has_nothing_free(
        vec![("S", 5)],
        vec![(7, "a", "XL", 1)],
        vec!["sold-out-0"],
        vec![]
    )]
    #[case::the_same_key_for_another_size_is_the_first_request(
        vec![("S", 5), ("M", 5)],
        vec![(7, "a", "S", 1), (7, "a", "M", 1)],
        vec!["accept", "same-as-0"],
        vec![("S", 1)]
    )]
    fn a_batch_over_sizes_takes_each_sizes_units_and_counts_each_buyer_across_them(
        #[case] free: Vec<(&str, u32)>,
        #[case] batch: Vec<(i64, &str, &str, i64)>,
        #[case] expected: Vec<&str>,
        #[case] taken: Vec<(&str, u32)>,
    ) {
        let batch: Vec<PlaceOrder> = batch
            .iter()
            .map(|(b, k, s, q)| sized(*b, k, s, *q))
            .collect();
        let plan = plan_batch(&batch, &sizes_free(&free));
        assert_eq!(words(&plan), expected);
        let taken: FreeUnits = taken.iter().map(|(s, n)| (sku(s), *n)).collect();
        assert_eq!(plan.taken, taken);
    }

    #[test]
    fn only_buyers_whose_size_has_their_units_are_locked() {
        let batch = [
            sized(7, "a", "S", 1),
            sized(8, "a", "M", 1),
            sized(9, "a", "M", 3),
        ];
        let locked: Vec<_> =
            buyers_to_lock(&batch, &sizes_free(&[("S", 0), ("M", 2)]).free, NOW_MS)
                .into_iter()
                .map(UserId::get)
                .collect();
        assert_eq!(locked, [8]);
    }

    #[rstest]
    #[case(10, 3, 100, false, 7)]
    #[case(10, 3, 4, false, 4)]
    #[case(10, 10, 100, false, 0)]
    #[case(10, 12, 100, false, 0)]
    #[case(10, 3, 100, true, 0)]
    fn free_units_are_the_unsold_ones_within_the_stock(
        #[case] limited: u32,
        #[case] sold: u32,
        #[case] stock: u32,
        #[case] closed: bool,
        #[case] free: u32,
    ) {
        assert_eq!(free_units(limited, sold, stock, closed), free);
    }
}
