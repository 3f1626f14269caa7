//! The admission gate (the design's DropReservationStore): an atomic counter in front of the
//! database, never the truth, rebuilt from it at any time ([`GateSeed`]).

use crate::batch::FreeUnits;
use crate::{
    DropId, IdempotencyKey, InfraError, LimitedDrop, OrderId, Quantity, RateDecision, RateLimit,
    Sku, UserId,
};
use async_trait::async_trait;
use time::OffsetDateTime;

/// One purchase attempt, as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub drop_id: DropId,
    pub user_id: UserId,
    /// The size asked for (`None`: the drop has no sizes).
    pub sku: Option<crate::Sku>,
    pub quantity: Quantity,
    pub per_user_limit: Quantity,
    pub key: IdempotencyKey,
    /// The end of this attempt's lease (to the millisecond): past it the reservation is
    /// resolved by the database, which refuses to commit it after, so "no order" is final.
    pub deadline: OffsetDateTime,
    /// The buyer's fleet-wide token bucket ([`RateKey::Buyer`](crate::RateKey::Buyer)) at this
    /// limit, charged by the gate before anything else in the same atomic step, so an admitted
    /// purchase makes one round trip to the gate's store rather than two. Only given to a gate
    /// that [`keeps_buckets`](AdmissionGate::keeps_buckets), and only on a purchase's first
    /// reservation (a retry after seeding or a stale lease is the same request).
    pub bucket: Option<RateLimit>,
}

impl Reservation {
    /// [`deadline`](Self::deadline) in unix milliseconds, as gates store it.
    pub fn deadline_ms(&self) -> i64 {
        unix_ms(self.deadline)
    }
}

/// `at` in whole unix milliseconds (floored), the precision of every lease comparison.
pub fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).unwrap_or(i64::MAX)
}

/// The instant `ms` unix milliseconds; `None` outside the representable range.
pub fn from_unix_ms(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

/// An in-progress reservation whose lease has passed: its purchase either committed (an order
/// exists for the buyer and key) or never will (the ledger refuses after the deadline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleReservation {
    pub user_id: UserId,
    pub key: IdempotencyKey,
    /// The size it took its units from (`None`: the drop has no sizes).
    pub sku: Option<Sku>,
    pub quantity: Quantity,
    pub deadline: OffsetDateTime,
}

/// The gate's answer to [`AdmissionGate::reserve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReserveOutcome {
    /// Units taken from the counter and the buyer's count; an in-progress marker is set. The
    /// caller must later [`confirm`](AdmissionGate::confirm) or [`cancel`](AdmissionGate::cancel).
    Admitted,
    /// The same buyer and key already completed with this order: replay it.
    Replay(OrderId),
    /// The same buyer and key are being processed right now, under a lease that ends at
    /// `deadline` (after which the caller resolves it against the database).
    InProgress { deadline: OffsetDateTime },
    /// The same buyer and key were used for a different request.
    KeyReused,
    /// Fewer units left than asked for in the size asked for (the drop's, without sizes).
    SoldOut { remaining: u32 },
    /// The buyer would hold more than the per-buyer limit.
    PerUserLimitExceeded { limit: u32 },
    /// The gate holds nothing for this drop (new process, flushed Redis): seed it from the
    /// database and ask again.
    NotSeeded,
    /// The buyer's bucket ([`Reservation::bucket`]) refused the request: nothing else was
    /// checked or taken.
    RateLimited(RateDecision),
}

/// An order that counts for a gate: its buyer, key and units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldOrder {
    pub order_id: OrderId,
    pub user_id: UserId,
    pub key: IdempotencyKey,
    /// Its size (`None`: the drop has no sizes).
    pub sku: Option<Sku>,
    pub quantity: Quantity,
    /// Whether it still counts (not cancelled).
    pub live: bool,
}

/// The database's truth about one drop, to (re)build a gate from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSeed {
    pub drop_id: DropId,
    /// Units left per size, `limited - units sold` of each ([`GateSeed::remaining_of`]); a
    /// drop without sizes has one entry, `None`.
    pub remaining: FreeUnits,
    /// When the gate may forget the drop (its `closeAt`).
    pub expires_at: OffsetDateTime,
    /// Every order of the drop, for per-buyer counts and idempotency markers.
    pub orders: Vec<HeldOrder>,
    /// Done markers held before this seed was read that none of its orders explains (a done
    /// marker follows its commit, so its order would be here): a resync drops them.
    pub unexplained: Vec<(UserId, IdempotencyKey)>,
}

impl GateSeed {
    /// The units left in each of `drop`'s sizes after its live `orders` (an order of a size the
    /// drop does not sell takes nothing; a size sold past its limit has none left).
    pub fn remaining_of(drop: &LimitedDrop, orders: &[HeldOrder]) -> FreeUnits {
        let mut remaining: FreeUnits = drop
            .sizes
            .iter()
            .map(|size| (size.sku.clone(), size.limited.get()))
            .collect();
        for order in orders.iter().filter(|o| o.live) {
            if let Some(left) = remaining.get_mut(&order.sku) {
                *left = left.saturating_sub(order.quantity.get());
            }
        }
        remaining
    }

    /// The units left in all sizes.
    pub fn remaining_in_all(&self) -> u32 {
        units_in_all(&self.remaining)
    }
}

/// The sum of `units` over sizes.
pub fn units_in_all(units: &FreeUnits) -> u32 {
    units.values().fold(0u32, |sum, n| sum.saturating_add(*n))
}

/// A drop without sizes's units as the gate counts them: one entry, `None`.
pub fn whole_units(units: u32) -> FreeUnits {
    FreeUnits::from([(None, units)])
}

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait AdmissionGate: Send + Sync + 'static {
    /// Seeds the gate for a drop unless it already holds it; running it twice changes nothing.
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError>;

    /// Atomically: idempotency marker, units left (in the size asked for), per-buyer limit
    /// (across sizes), then take the units.
    ///
    /// One leeway: a sold-out size may be answered from a snapshot of the markers taken when
    /// it sold out (the Redis gate's sold-out flag), so a key first used for another size
    /// after that is answered `SoldOut { remaining: 0 }` for this size rather than
    /// `KeyReused`. Neither answer changes anything, and a retry of the key's own request
    /// still replays.
    ///
    /// # Errors
    /// [`InfraError`] when the gate cannot be reached or its answer is unknown (a timeout
    /// is not a no: the units may have been taken).
    async fn reserve(&self, reservation: &Reservation) -> Result<ReserveOutcome, InfraError>;

    /// Whether this gate charges the buyers' fleet-wide token buckets itself, in the same
    /// atomic step as a reservation ([`Reservation::bucket`]): the buckets live in its store.
    /// A gate that does not is never given a bucket.
    fn keeps_buckets(&self) -> bool {
        false
    }

    /// Whether a reservation of `drop`'s size `sku` is answered here without a round trip to
    /// the gate's store right now (the size is known sold out): what such an answer costs is
    /// this instance's alone.
    fn answers_locally(&self, drop: DropId, sku: Option<Sku>) -> bool {
        let _ = (drop, sku);
        false
    }

    /// Marks an admitted reservation done with its order, so retries replay it.
    async fn confirm(&self, reservation: &Reservation, order: OrderId) -> Result<(), InfraError>;

    /// [`confirm`](Self::confirm)s each reservation with its order: a drop's committer confirms
    /// a whole batch at once, in one round trip where the gate's store allows it. The first
    /// failure is returned; what was confirmed before it stays confirmed.
    async fn confirm_all(&self, confirmed: &[(Reservation, OrderId)]) -> Result<(), InfraError> {
        for (reservation, order) in confirmed {
            self.confirm(reservation, *order).await?;
        }
        Ok(())
    }

    /// Gives an admitted reservation's units and buyer count back and clears its marker, once:
    /// cancelling twice restores once. Only the attempt that set the marker is cancelled (same
    /// units and deadline): a later attempt with the same key is left alone.
    async fn cancel(&self, reservation: &Reservation) -> Result<(), InfraError>;

    /// Atomically rebuilds counter, holdings and done markers from the truth, keeping what is in
    /// flight (in-progress markers, done markers of orders newer than the seed); seeds an empty
    /// gate. Safe concurrently: a stale seed can only hold units back.
    async fn resync(&self, seed: &GateSeed) -> Result<(), InfraError>;

    /// The drop's in-progress reservations whose lease ended before `now`.
    async fn stale(
        &self,
        drop_id: DropId,
        now: OffsetDateTime,
    ) -> Result<Vec<StaleReservation>, InfraError>;

    /// Gives back the units of a cancelled order to its size `sku` (the order's marker stays,
    /// for replays). The caller calls it once per cancelled order.
    async fn release(
        &self,
        drop_id: DropId,
        user_id: UserId,
        sku: Option<Sku>,
        quantity: Quantity,
    ) -> Result<(), InfraError>;

    /// The drop was closed at `at`: its state is released a grace period later (as after
    /// `closeAt`), for purchases in flight to settle.
    async fn closed(&self, drop_id: DropId, at: OffsetDateTime) -> Result<(), InfraError>;

    /// Units the gate will still admit per size (one entry, `None`, for a drop without
    /// sizes), or `None` when it holds nothing for the drop.
    async fn remaining(&self, drop_id: DropId) -> Result<Option<FreeUnits>, InfraError>;

    /// The (buyer, key) pairs whose done markers the gate holds for the drop now (read before
    /// a seed, to tell which of them the seed cannot explain).
    async fn done_markers(
        &self,
        drop_id: DropId,
    ) -> Result<Vec<(UserId, IdempotencyKey)>, InfraError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DropMode, Price, ProductId, SaleWindow, SizeInput, Sizes};

    fn drop_of(sizes: Sizes) -> LimitedDrop {
        let open = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        LimitedDrop {
            id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            window: SaleWindow::parse(open, open + time::Duration::hours(1)).unwrap(),
            limited_quantity: Quantity::parse("limitedQuantity", i64::from(sizes.total())).unwrap(),
            sizes,
            per_user_limit: Quantity::parse("perUserLimit", 2).unwrap(),
            price: Price::default(),
            paused: false,
            closed_at: None,
            mode: DropMode::FirstCome,
            payment_window: None,
        }
    }

    fn order(id: i64, sku: Option<&str>, quantity: i64, live: bool) -> HeldOrder {
        HeldOrder {
            order_id: OrderId::parse(id).unwrap(),
            user_id: UserId::parse(id).unwrap(),
            key: IdempotencyKey::parse("k").unwrap(),
            sku: sku.map(|s| Sku::parse("sku", s).unwrap()),
            quantity: Quantity::parse("quantity", quantity).unwrap(),
            live,
        }
    }

    fn sku(raw: &str) -> Option<Sku> {
        Some(Sku::parse("sku", raw).unwrap())
    }

    #[test]
    fn a_seed_leaves_each_size_its_limit_less_its_live_orders() {
        let inputs = [("S", 3), ("M", 5)].map(|(sku, limited)| SizeInput {
            sku: sku.to_owned(),
            limited_quantity: limited,
        });
        let drop = drop_of(Sizes::parse(None, Some(&inputs)).unwrap());
        let orders = [
            order(1, Some("S"), 2, true),
            order(2, Some("S"), 1, false),
            order(3, Some("M"), 1, true),
            order(4, Some("XL"), 1, true),
        ];
        let left = GateSeed::remaining_of(&drop, &orders);
        assert_eq!(left, FreeUnits::from([(sku("M"), 4), (sku("S"), 1)]));
        assert_eq!(units_in_all(&left), 5);
        let oversold = [order(5, Some("S"), 2, true), order(6, Some("S"), 2, true)];
        assert_eq!(
            GateSeed::remaining_of(&drop, &oversold),
            FreeUnits::from([(sku("M"), 5), (sku("S"), 0)]),
            "a size sold past its limit has none left, and takes none from another"
        );
    }

    #[test]
    fn a_drop_without_sizes_is_seeded_with_one_count() {
        let drop = drop_of(Sizes::whole(
            Quantity::parse("limitedQuantity", 10).unwrap(),
        ));
        let orders = [order(1, None, 2, true), order(2, None, 3, false)];
        assert_eq!(GateSeed::remaining_of(&drop, &orders), whole_units(8));
    }
}
