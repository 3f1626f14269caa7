//! The contract of the admission gate: what every `AdmissionGate` must do, including under
//! races, so the use case can rely on the same semantics from the in-process and the Redis gate.
//! [`gate_contract_tests!`](crate::gate_contract_tests) turns the list into one test per case.

use futures::future::join_all;
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{
    AdmissionGate, GateSeed, HeldOrder, Reservation, ReserveOutcome, from_unix_ms, units_in_all,
    unix_ms, whole_units,
};
use goods_domain::{DropId, IdempotencyKey, OrderId, Quantity, Sku, UserId};
use std::sync::Arc;
use time::OffsetDateTime;

/// A gate behind the port.
pub type Gate = Arc<dyn AdmissionGate>;

/// Generates one test per contract case, each on a fresh gate built by `$make` (an expression
/// evaluating to a future of a [`Gate`]).
#[macro_export]
macro_rules! gate_contract_tests {
    ($make:expr) => {
        $crate::gate_contract_tests!(@cases $make;
            racing_reserves_admit_exactly_the_seeded_units,
            the_per_user_limit_holds_under_races,
            sold_out_is_answered_before_the_buyer_limit_and_nothing_changes,
            markers_go_from_in_progress_to_done_and_a_different_body_is_a_reuse,
            confirming_a_batch_marks_each_reservation_done_with_its_own_order,
            cancelling_twice_gives_units_and_the_buyer_count_back_once,
            releasing_a_cancelled_order_gives_its_units_back_and_keeps_its_replay,
            seeding_again_changes_nothing_and_a_seed_restores_counts_and_markers,
            a_reservation_is_stale_only_after_its_lease_and_cancel_spares_a_newer_attempt,
            resync_rebuilds_from_the_truth_and_keeps_what_is_in_flight,
            resync_seeds_a_gate_that_holds_nothing,
            a_closed_drop_is_kept_for_the_grace_then_released,
            random_sequences_behave_like_the_reference_model,
            sizes_are_counted_apart_and_the_buyer_limit_across_them,
            racing_reserves_of_sizes_admit_exactly_each_size_and_the_limit_across_them,
            a_size_is_given_back_to_itself_and_a_resync_rebuilds_each_size,
            random_sequences_in_sizes_behave_like_the_reference_model
        );
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::gate_contract::$case($make.await).await;
            }
        )*
    };
}

const DROP: i64 = 42;

fn drop_id() -> DropId {
    DropId::parse(DROP).unwrap()
}

fn seed(remaining: u32) -> GateSeed {
    GateSeed {
        unexplained: Vec::new(),
        drop_id: drop_id(),
        remaining: whole_units(remaining),
        expires_at: OffsetDateTime::now_utc() + time::Duration::hours(2),
        orders: Vec::new(),
    }
}

/// A lease end in the future, to the millisecond (what gates store).
pub fn lease_end() -> OffsetDateTime {
    from_unix_ms(unix_ms(
        OffsetDateTime::now_utc() + time::Duration::minutes(10),
    ))
    .unwrap()
}

fn res(user: i64, key: &str, quantity: i64, limit: i64) -> Reservation {
    Reservation {
        drop_id: drop_id(),
        user_id: UserId::parse(user).unwrap(),
        sku: None,
        quantity: Quantity::parse("quantity", quantity).unwrap(),
        per_user_limit: Quantity::parse("perUserLimit", limit).unwrap(),
        key: IdempotencyKey::parse(key).unwrap(),
        deadline: lease_end(),
        bucket: None,
    }
}

fn held(order: i64, user: i64, key: &str, live: bool) -> HeldOrder {
    HeldOrder {
        order_id: OrderId::parse(order).unwrap(),
        user_id: UserId::parse(user).unwrap(),
        key: IdempotencyKey::parse(key).unwrap(),
        sku: None,
        quantity: Quantity::parse("quantity", 1).unwrap(),
        live,
    }
}

/// Units left in the drop without sizes (its one entry, `None`).
async fn remaining(gate: &Gate) -> Option<u32> {
    let units = gate.remaining(drop_id()).await.unwrap()?;
    assert_eq!(
        units.keys().collect::<Vec<_>>(),
        [&None],
        "one count: {units:?}"
    );
    Some(units_in_all(&units))
}

fn sku(raw: &str) -> Option<Sku> {
    Some(Sku::parse("sku", raw).unwrap())
}

/// A seed of a drop in sizes, `units` left in each.
fn sized_seed(units: &[(&str, u32)]) -> GateSeed {
    GateSeed {
        remaining: sizes(units),
        ..seed(0)
    }
}

fn sizes(units: &[(&str, u32)]) -> FreeUnits {
    units.iter().map(|(s, n)| (sku(s), *n)).collect()
}

/// A reservation of `size`.
fn sized(user: i64, key: &str, size: &str, quantity: i64, limit: i64) -> Reservation {
    Reservation {
        sku: sku(size),
        ..res(user, key, quantity, limit)
    }
}

pub async fn sizes_are_counted_apart_and_the_buyer_limit_across_them(gate: Gate) {
    gate.seed_if_absent(&sized_seed(&[("US-9", 1), ("US-10", 3)]))
        .await
        .unwrap();
    let nine = sized(1, "a", "US-9", 1, 2);
    assert_eq!(gate.reserve(&nine).await.unwrap(), ReserveOutcome::Admitted);
    assert_eq!(
        gate.reserve(&sized(2, "a", "US-9", 1, 2)).await.unwrap(),
        ReserveOutcome::SoldOut { remaining: 0 },
        "US-9 is sold out"
    );
    assert_eq!(
        gate.reserve(&sized(2, "a", "US-10", 1, 2)).await.unwrap(),
        ReserveOutcome::Admitted,
        "US-10 still sells"
    );
    assert_eq!(
        gate.reserve(&sized(1, "b", "US-10", 2, 2)).await.unwrap(),
        ReserveOutcome::PerUserLimitExceeded { limit: 2 },
        "buyer 1 holds one of US-9: two of US-10 would make three"
    );
    assert_eq!(
        gate.reserve(&sized(3, "a", "US-11", 1, 2)).await.unwrap(),
        ReserveOutcome::SoldOut { remaining: 0 },
        "a size the drop does not sell has nothing"
    );
    assert_eq!(
        gate.reserve(&sized(1, "a", "US-10", 1, 2)).await.unwrap(),
        ReserveOutcome::KeyReused,
        "the same key for another size"
    );
    assert_eq!(
        gate.reserve(&res(1, "a", 1, 2)).await.unwrap(),
        ReserveOutcome::KeyReused,
        "the same key without a size"
    );
    assert_eq!(
        gate.reserve(&nine).await.unwrap(),
        ReserveOutcome::InProgress {
            deadline: nine.deadline
        }
    );
    gate.confirm(&nine, OrderId::parse(9).unwrap())
        .await
        .unwrap();
    assert_eq!(
        gate.reserve(&nine).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(9).unwrap())
    );
    assert_eq!(
        gate.reserve(&sized(1, "a", "US-10", 1, 2)).await.unwrap(),
        ReserveOutcome::KeyReused,
        "a done marker knows its size"
    );
    assert_eq!(
        gate.remaining(drop_id()).await.unwrap(),
        Some(sizes(&[("US-9", 0), ("US-10", 2)]))
    );
}

pub async fn racing_reserves_of_sizes_admit_exactly_each_size_and_the_limit_across_them(
    gate: Gate,
) {
    gate.seed_if_absent(&sized_seed(&[("S", 10), ("M", 25), ("L", 40)]))
        .await
        .unwrap();
    // 300 buyers, each racing one attempt at every size with a limit of 2 in all.
    let mut attempts = Vec::new();
    for user in 1..=300 {
        for size in ["S", "M", "L"] {
            attempts.push(sized(user, size, size, 1, 2));
        }
    }
    let all = attempts.clone();
    let outcomes = race(&gate, attempts).await;
    let admitted_in = |size: &str| {
        all.iter()
            .zip(&outcomes)
            .filter(|(r, o)| r.sku == sku(size) && **o == ReserveOutcome::Admitted)
            .count()
    };
    assert_eq!(
        (admitted_in("S"), admitted_in("M"), admitted_in("L")),
        (10, 25, 40)
    );
    for user in 1..=300 {
        let held = all
            .iter()
            .zip(&outcomes)
            .filter(|(r, o)| r.user_id.get() == user && **o == ReserveOutcome::Admitted)
            .count();
        assert!(held <= 2, "buyer {user} holds {held}");
    }
    assert_eq!(
        gate.remaining(drop_id()).await.unwrap(),
        Some(sizes(&[("S", 0), ("M", 0), ("L", 0)]))
    );
}

pub async fn a_size_is_given_back_to_itself_and_a_resync_rebuilds_each_size(gate: Gate) {
    gate.seed_if_absent(&sized_seed(&[("S", 2), ("M", 2)]))
        .await
        .unwrap();
    let (small, medium) = (sized(1, "a", "S", 1, 4), sized(1, "b", "M", 2, 4));
    for r in [&small, &medium] {
        assert_eq!(gate.reserve(r).await.unwrap(), ReserveOutcome::Admitted);
    }
    gate.cancel(&medium).await.unwrap();
    assert_eq!(
        gate.remaining(drop_id()).await.unwrap(),
        Some(sizes(&[("S", 1), ("M", 2)])),
        "a cancel gives back to its own size"
    );
    gate.confirm(&small, OrderId::parse(1).unwrap())
        .await
        .unwrap();
    gate.release(drop_id(), small.user_id, small.sku.clone(), small.quantity)
        .await
        .unwrap();
    assert_eq!(
        gate.remaining(drop_id()).await.unwrap(),
        Some(sizes(&[("S", 2), ("M", 2)])),
        "a released order gives back to its own size"
    );
    assert_eq!(
        gate.reserve(&small).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(1).unwrap())
    );
    // In flight during the resync: one unit of M. The truth: an order of S (order 7, live).
    let in_flight = sized(2, "c", "M", 1, 4);
    assert_eq!(
        gate.reserve(&in_flight).await.unwrap(),
        ReserveOutcome::Admitted
    );
    let mut truth = sized_seed(&[("S", 1), ("M", 2)]);
    truth.orders = vec![
        HeldOrder {
            sku: sku("S"),
            ..held(1, 1, "a", false)
        },
        HeldOrder {
            sku: sku("S"),
            ..held(7, 3, "d", true)
        },
    ];
    gate.resync(&truth).await.unwrap();
    assert_eq!(
        gate.remaining(drop_id()).await.unwrap(),
        Some(sizes(&[("S", 1), ("M", 1)])),
        "the seed's sizes, less what is in flight in its own size"
    );
    assert_eq!(
        gate.reserve(&sized(3, "d", "S", 1, 4)).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(7).unwrap()),
        "the seed's done marker replays in its size"
    );
    assert_eq!(
        gate.reserve(&sized(3, "d", "M", 1, 4)).await.unwrap(),
        ReserveOutcome::KeyReused,
        "and is another size's reuse"
    );
    let stale = gate
        .stale(drop_id(), in_flight.deadline + time::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(
        stale.iter().map(|s| s.sku.clone()).collect::<Vec<_>>(),
        [sku("M")],
        "a stale reservation knows its size"
    );
}

pub async fn random_sequences_in_sizes_behave_like_the_reference_model(gate: Gate) {
    random_sequences(gate, &[sku("S"), sku("M")]).await;
}

/// How many of `outcomes` are `wanted`.
pub fn tally(outcomes: &[ReserveOutcome], wanted: &ReserveOutcome) -> usize {
    outcomes.iter().filter(|o| *o == wanted).count()
}

async fn race(gate: &Gate, reservations: Vec<Reservation>) -> Vec<ReserveOutcome> {
    let tries = reservations.into_iter().map(|r| {
        let gate = Arc::clone(gate);
        tokio::spawn(async move { gate.reserve(&r).await.unwrap() })
    });
    join_all(tries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

pub async fn racing_reserves_admit_exactly_the_seeded_units(gate: Gate) {
    gate.seed_if_absent(&seed(100)).await.unwrap();
    let outcomes = race(&gate, (1..=500).map(|user| res(user, "k", 1, 1)).collect()).await;
    let admitted = outcomes
        .iter()
        .filter(|o| **o == ReserveOutcome::Admitted)
        .count();
    let sold_out = outcomes
        .iter()
        .filter(|o| matches!(o, ReserveOutcome::SoldOut { .. }))
        .count();
    assert_eq!((admitted, sold_out), (100, 400));
    assert_eq!(remaining(&gate).await, Some(0));
}

pub async fn the_per_user_limit_holds_under_races(gate: Gate) {
    gate.seed_if_absent(&seed(100)).await.unwrap();
    let outcomes = race(
        &gate,
        (0..40).map(|i| res(7, &format!("k{i}"), 1, 3)).collect(),
    )
    .await;
    let admitted = tally(&outcomes, &ReserveOutcome::Admitted);
    let limited = tally(
        &outcomes,
        &ReserveOutcome::PerUserLimitExceeded { limit: 3 },
    );
    assert_eq!((admitted, limited), (3, 37));
    assert_eq!(remaining(&gate).await, Some(97));
}

pub async fn sold_out_is_answered_before_the_buyer_limit_and_nothing_changes(gate: Gate) {
    gate.seed_if_absent(&seed(3)).await.unwrap();
    assert_eq!(
        gate.reserve(&res(1, "a", 2, 2)).await.unwrap(),
        ReserveOutcome::Admitted
    );
    assert_eq!(
        gate.reserve(&res(1, "b", 1, 2)).await.unwrap(),
        ReserveOutcome::PerUserLimitExceeded { limit: 2 }
    );
    assert_eq!(
        gate.reserve(&res(1, "c", 2, 2)).await.unwrap(),
        ReserveOutcome::SoldOut { remaining: 1 }
    );
    assert_eq!(remaining(&gate).await, Some(1), "refusals take nothing");
}

pub async fn markers_go_from_in_progress_to_done_and_a_different_body_is_a_reuse(gate: Gate) {
    gate.seed_if_absent(&seed(5)).await.unwrap();
    let first = res(1, "k|with|bars", 1, 2);
    assert_eq!(
        gate.reserve(&first).await.unwrap(),
        ReserveOutcome::Admitted
    );
    assert_eq!(
        gate.reserve(&first).await.unwrap(),
        ReserveOutcome::InProgress {
            deadline: first.deadline
        }
    );
    assert_eq!(
        gate.reserve(&res(1, "k|with|bars", 2, 2)).await.unwrap(),
        ReserveOutcome::KeyReused
    );
    let order = OrderId::parse(9_007_199_254).unwrap();
    gate.confirm(&first, order).await.unwrap();
    assert_eq!(
        gate.reserve(&first).await.unwrap(),
        ReserveOutcome::Replay(order)
    );
    assert_eq!(remaining(&gate).await, Some(4), "a replay takes nothing");
}

pub async fn confirming_a_batch_marks_each_reservation_done_with_its_own_order(gate: Gate) {
    gate.seed_if_absent(&seed(10)).await.unwrap();
    let batch: Vec<Reservation> = (1..=5).map(|user| res(user, "k|1", 1, 2)).collect();
    let in_flight = res(6, "k|1", 1, 2);
    for r in batch.iter().chain([&in_flight]) {
        assert_eq!(gate.reserve(r).await.unwrap(), ReserveOutcome::Admitted);
    }
    gate.confirm_all(&[]).await.unwrap();
    let confirmed: Vec<(Reservation, OrderId)> = batch
        .iter()
        .map(|r| (r.clone(), OrderId::parse(100 + r.user_id.get()).unwrap()))
        .collect();
    gate.confirm_all(&confirmed).await.unwrap();
    for (r, order) in &confirmed {
        assert_eq!(
            gate.reserve(r).await.unwrap(),
            ReserveOutcome::Replay(*order),
            "buyer {}",
            r.user_id
        );
    }
    assert_eq!(
        gate.reserve(&in_flight).await.unwrap(),
        ReserveOutcome::InProgress {
            deadline: in_flight.deadline
        },
        "a reservation outside the batch is still in progress"
    );
    assert_eq!(remaining(&gate).await, Some(4), "confirming takes nothing");
}

pub async fn cancelling_twice_gives_units_and_the_buyer_count_back_once(gate: Gate) {
    gate.seed_if_absent(&seed(5)).await.unwrap();
    let r = res(1, "k", 2, 2);
    assert_eq!(gate.reserve(&r).await.unwrap(), ReserveOutcome::Admitted);
    gate.cancel(&r).await.unwrap();
    gate.cancel(&r).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(5));
    let other = res(1, "other", 2, 2);
    assert_eq!(
        gate.reserve(&other).await.unwrap(),
        ReserveOutcome::Admitted
    );
    // A confirmed reservation is an order: cancel gives nothing back.
    gate.confirm(&other, OrderId::parse(3).unwrap())
        .await
        .unwrap();
    gate.cancel(&other).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(3));
}

pub async fn releasing_a_cancelled_order_gives_its_units_back_and_keeps_its_replay(gate: Gate) {
    gate.seed_if_absent(&seed(1)).await.unwrap();
    let r = res(1, "k", 1, 1);
    gate.reserve(&r).await.unwrap();
    gate.confirm(&r, OrderId::parse(5).unwrap()).await.unwrap();
    gate.release(r.drop_id, r.user_id, None, r.quantity)
        .await
        .unwrap();
    assert_eq!(remaining(&gate).await, Some(1));
    assert_eq!(
        gate.reserve(&r).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(5).unwrap())
    );
    assert_eq!(
        gate.reserve(&res(1, "k2", 1, 1)).await.unwrap(),
        ReserveOutcome::Admitted
    );
}

pub async fn seeding_again_changes_nothing_and_a_seed_restores_counts_and_markers(gate: Gate) {
    assert_eq!(remaining(&gate).await, None);
    assert_eq!(
        gate.reserve(&res(1, "k", 1, 1)).await.unwrap(),
        ReserveOutcome::NotSeeded
    );
    let mut s = seed(4);
    s.orders = vec![held(3, 1, "k", true), held(4, 2, "gone", false)];
    gate.seed_if_absent(&s).await.unwrap();
    gate.seed_if_absent(&seed(100)).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(4));
    assert_eq!(
        gate.reserve(&res(1, "k", 1, 1)).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(3).unwrap())
    );
    assert_eq!(
        gate.reserve(&res(1, "new", 1, 1)).await.unwrap(),
        ReserveOutcome::PerUserLimitExceeded { limit: 1 }
    );
    assert_eq!(
        gate.reserve(&res(2, "new", 1, 1)).await.unwrap(),
        ReserveOutcome::Admitted,
        "a cancelled order holds nothing"
    );
}

pub async fn a_reservation_is_stale_only_after_its_lease_and_cancel_spares_a_newer_attempt(
    gate: Gate,
) {
    gate.seed_if_absent(&seed(5)).await.unwrap();
    let first = res(1, "k", 2, 2);
    assert_eq!(
        gate.reserve(&first).await.unwrap(),
        ReserveOutcome::Admitted
    );
    let at = first.deadline;
    assert!(gate.stale(drop_id(), at).await.unwrap().is_empty());
    let stale = gate
        .stale(drop_id(), at + time::Duration::milliseconds(1))
        .await
        .unwrap();
    assert_eq!(stale.len(), 1);
    assert_eq!(
        (
            stale[0].user_id,
            stale[0].key.as_str(),
            stale[0].quantity.get(),
            stale[0].deadline
        ),
        (first.user_id, "k", 2, at)
    );
    // A settle of some other attempt with the same key (another lease) leaves this one alone.
    let mut older = first.clone();
    older.deadline = at - time::Duration::seconds(30);
    gate.cancel(&older).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(3));
    gate.cancel(&first).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(5));
    assert!(
        gate.stale(drop_id(), at + time::Duration::hours(1))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn resync_rebuilds_from_the_truth_and_keeps_what_is_in_flight(gate: Gate) {
    gate.seed_if_absent(&seed(10)).await.unwrap();
    // In flight: buyer 1 holds 2 units, not settled.
    let in_flight = res(1, "a", 2, 2);
    assert_eq!(
        gate.reserve(&in_flight).await.unwrap(),
        ReserveOutcome::Admitted
    );
    // Committed and confirmed before the seed is read: order 5.
    let before = res(2, "b", 1, 1);
    gate.reserve(&before).await.unwrap();
    gate.confirm(&before, OrderId::parse(5).unwrap())
        .await
        .unwrap();
    // Committed and confirmed after the seed is read: order 7, which the seed does not list.
    let after = res(4, "d", 1, 1);
    gate.reserve(&after).await.unwrap();
    gate.confirm(&after, OrderId::parse(7).unwrap())
        .await
        .unwrap();
    // The database also sold order 6 while the gate was bypassed, so the gate never saw it.
    let mut truth = seed(10 - 2);
    truth.orders = vec![held(5, 2, "b", true), held(6, 3, "c", true)];
    gate.resync(&truth).await.unwrap();
    // 8 per the database, less 2 in flight and 1 committed after the seed was read.
    assert_eq!(remaining(&gate).await, Some(5));
    assert_eq!(
        gate.reserve(&res(3, "c", 1, 1)).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(6).unwrap())
    );
    assert_eq!(
        gate.reserve(&res(3, "other", 1, 1)).await.unwrap(),
        ReserveOutcome::PerUserLimitExceeded { limit: 1 },
        "the order the gate never saw counts for its buyer"
    );
    assert_eq!(
        gate.reserve(&after).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(7).unwrap())
    );
    assert_eq!(
        gate.reserve(&in_flight).await.unwrap(),
        ReserveOutcome::InProgress {
            deadline: in_flight.deadline
        }
    );
    // The reservation in flight still settles: its cancel gives its 2 units back.
    gate.cancel(&in_flight).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(7));
    // Running it again with the same truth changes nothing more than the order 7 it lacks.
    gate.resync(&truth).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(7));
}

pub async fn resync_seeds_a_gate_that_holds_nothing(gate: Gate) {
    assert_eq!(remaining(&gate).await, None);
    let mut truth = seed(3);
    truth.orders = vec![held(1, 1, "k", true)];
    gate.resync(&truth).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(3));
    assert_eq!(
        gate.reserve(&res(1, "k", 1, 1)).await.unwrap(),
        ReserveOutcome::Replay(OrderId::parse(1).unwrap())
    );
}

/// Closing keeps the drop's state for purchases in flight, then releases it one grace period
/// (an hour) after the close.
pub async fn a_closed_drop_is_kept_for_the_grace_then_released(gate: Gate) {
    gate.seed_if_absent(&seed(3)).await.unwrap();
    let now = OffsetDateTime::now_utc();
    gate.closed(drop_id(), now).await.unwrap();
    assert_eq!(remaining(&gate).await, Some(3), "kept during the grace");
    gate.closed(drop_id(), now - time::Duration::hours(2))
        .await
        .unwrap();
    assert_eq!(remaining(&gate).await, None, "released after the grace");
}

/// One operation of a random sequence.
#[derive(Debug, Clone)]
enum Op {
    Reserve {
        user: i64,
        key: u8,
        /// The size's index among the drop's (taken modulo their number).
        size: u8,
        quantity: i64,
    },
    /// Settle the `nth` admitted reservation as an order.
    Confirm { nth: usize },
    /// Give the `nth` admitted reservation back.
    Cancel { nth: usize },
    /// Cancel the `nth` confirmed order (its units go back through `release`).
    Release { nth: usize },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        5 => (1..=4_i64, 0..3_u8, 0..2_u8, 1..=3_i64).prop_map(|(user, key, size, quantity)| Op::Reserve { user, key, size, quantity }),
        2 => (0..12_usize).prop_map(|nth| Op::Confirm { nth }),
        2 => (0..12_usize).prop_map(|nth| Op::Cancel { nth }),
        1 => (0..12_usize).prop_map(|nth| Op::Release { nth }),
    ]
}

/// What a correct gate holds, kept by hand.
#[derive(Default)]
struct Model {
    remaining: FreeUnits,
    held: std::collections::HashMap<i64, u32>,
    /// (user, key) -> (units, size index, order once confirmed)
    markers: std::collections::HashMap<(i64, u8), (i64, u8, Option<i64>)>,
    /// Admitted reservations, in order, with whether they are still in progress.
    admitted: Vec<((i64, u8), bool)>,
    /// Confirmed orders, with whether they were released.
    orders: Vec<((i64, u8), bool)>,
}

const MODEL_LIMIT: i64 = 3;

impl Model {
    fn expect_reserve(
        &self,
        (user, key): (i64, u8),
        (size, sku): (u8, &Option<Sku>),
        quantity: i64,
        deadline: OffsetDateTime,
    ) -> ReserveOutcome {
        let left = self.remaining[sku];
        match self.markers.get(&(user, key)) {
            Some((q, s, _)) if *q != quantity || *s != size => ReserveOutcome::KeyReused,
            Some((_, _, Some(order))) => ReserveOutcome::Replay(OrderId::parse(*order).unwrap()),
            Some((_, _, None)) => ReserveOutcome::InProgress { deadline },
            None if left < quantity as u32 => ReserveOutcome::SoldOut { remaining: left },
            None if self.held.get(&user).copied().unwrap_or(0) + quantity as u32
                > MODEL_LIMIT as u32 =>
            {
                ReserveOutcome::PerUserLimitExceeded {
                    limit: MODEL_LIMIT as u32,
                }
            }
            None => ReserveOutcome::Admitted,
        }
    }
}

/// Random sequences of reserves (new, repeated, reused keys), confirms, cancels and releases:
/// after every step the gate's answer and its units left are what the model says, so it never
/// admits more than was seeded, never lets a buyer past the limit, and keeps one outcome per
/// (buyer, key).
pub async fn random_sequences_behave_like_the_reference_model(gate: Gate) {
    random_sequences(gate, &[None]).await;
}

/// The model's runs on a drop of `skus` (3 units each).
async fn random_sequences(gate: Gate, skus: &[Option<Sku>]) {
    use proptest::test_runner::{Config, TestRunner};
    let next_drop = std::sync::atomic::AtomicI64::new(1_000);
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..30), |ops| {
        tokio::task::block_in_place(|| {
            handle.block_on(async {
                let drop =
                    DropId::parse(next_drop.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                        .unwrap();
                run_against_model(&gate, drop, skus, &ops).await;
            });
        });
        Ok(())
    });
    result.unwrap();
}

async fn run_against_model(gate: &Gate, drop: DropId, skus: &[Option<Sku>], ops: &[Op]) {
    let deadline = lease_end();
    let size_of = |size: u8| skus[usize::from(size) % skus.len()].clone();
    let res = |user: i64, key: u8, size: u8, quantity: i64| Reservation {
        drop_id: drop,
        user_id: UserId::parse(user).unwrap(),
        sku: size_of(size),
        quantity: Quantity::parse("quantity", quantity).unwrap(),
        per_user_limit: Quantity::parse("perUserLimit", MODEL_LIMIT).unwrap(),
        key: IdempotencyKey::parse(&format!("k{key}")).unwrap(),
        deadline,
        bucket: None,
    };
    let units: FreeUnits = skus
        .iter()
        .map(|s| (s.clone(), 6 / skus.len() as u32))
        .collect();
    let seed = GateSeed {
        drop_id: drop,
        remaining: units.clone(),
        ..seed(0)
    };
    gate.seed_if_absent(&seed).await.unwrap();
    let mut model = Model {
        remaining: units,
        ..Model::default()
    };
    let mut next_order = 1;
    for op in ops {
        match *op {
            Op::Reserve {
                user,
                key,
                size,
                quantity,
            } => {
                let size = size % skus.len() as u8;
                let expected =
                    model.expect_reserve((user, key), (size, &size_of(size)), quantity, deadline);
                let got = gate.reserve(&res(user, key, size, quantity)).await.unwrap();
                // A sold-out size may answer a key used for another size as sold out (see
                // AdmissionGate::reserve): neither answer changes anything.
                let other_size =
                    matches!(model.markers.get(&(user, key)), Some((_, s, _)) if *s != size);
                let sold_out_size = model.remaining[&size_of(size)] == 0;
                if !(other_size
                    && sold_out_size
                    && got == (ReserveOutcome::SoldOut { remaining: 0 }))
                {
                    assert_eq!(got, expected, "{op:?} in {ops:?}");
                }
                if got == ReserveOutcome::Admitted {
                    *model.remaining.get_mut(&size_of(size)).unwrap() -= quantity as u32;
                    *model.held.entry(user).or_default() += quantity as u32;
                    model.markers.insert((user, key), (quantity, size, None));
                    model.admitted.push(((user, key), true));
                }
            }
            Op::Confirm { nth } | Op::Cancel { nth } => {
                let Some(&((user, key), true)) = model.admitted.get(nth) else {
                    continue;
                };
                let (quantity, size, _) = model.markers[&(user, key)];
                model.admitted[nth].1 = false;
                if let Op::Confirm { .. } = op {
                    let order = next_order;
                    next_order += 1;
                    gate.confirm(
                        &res(user, key, size, quantity),
                        OrderId::parse(order).unwrap(),
                    )
                    .await
                    .unwrap();
                    model
                        .markers
                        .insert((user, key), (quantity, size, Some(order)));
                    model.orders.push(((user, key), false));
                } else {
                    gate.cancel(&res(user, key, size, quantity)).await.unwrap();
                    model.markers.remove(&(user, key));
                    *model.remaining.get_mut(&size_of(size)).unwrap() += quantity as u32;
                    *model.held.get_mut(&user).unwrap() -= quantity as u32;
                }
            }
            Op::Release { nth } => {
                let Some(&((user, key), false)) = model.orders.get(nth) else {
                    continue;
                };
                let (quantity, size, _) = model.markers[&(user, key)];
                model.orders[nth].1 = true;
                gate.release(
                    drop,
                    UserId::parse(user).unwrap(),
                    size_of(size),
                    Quantity::parse("quantity", quantity).unwrap(),
                )
                .await
                .unwrap();
                *model.remaining.get_mut(&size_of(size)).unwrap() += quantity as u32;
                *model.held.get_mut(&user).unwrap() -= quantity as u32;
            }
        }
        assert_eq!(
            gate.remaining(drop).await.unwrap(),
            Some(model.remaining.clone()),
            "after {op:?} in {ops:?}"
        );
        assert!(model.held.values().all(|h| *h <= MODEL_LIMIT as u32));
    }
}
