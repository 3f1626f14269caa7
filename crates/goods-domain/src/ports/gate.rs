//! The admission gate (the design's DropReservationStore): an atomic counter in front of the
//! database, never the truth, rebuilt from it at any time ([`GateSeed`]).

use crate::{DropId, IdempotencyKey, InfraError, OrderId, Quantity, UserId};
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
    /// Fewer units left than asked for.
    SoldOut { remaining: u32 },
    /// The buyer would hold more than the per-buyer limit.
    PerUserLimitExceeded { limit: u32 },
    /// The gate holds nothing for this drop (new process, flushed Redis): seed it from the
    /// database and ask again.
    NotSeeded,
}

/// An order that counts for a gate: its buyer, key and units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldOrder {
    pub order_id: OrderId,
    pub user_id: UserId,
    pub key: IdempotencyKey,
    pub quantity: Quantity,
    /// Whether it still counts (not cancelled).
    pub live: bool,
}

/// The database's truth about one drop, to (re)build a gate from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSeed {
    pub drop_id: DropId,
    /// `limitedQuantity - units sold`.
    pub remaining: u32,
    /// When the gate may forget the drop (its `closeAt`).
    pub expires_at: OffsetDateTime,
    /// Every order of the drop, for per-buyer counts and idempotency markers.
    pub orders: Vec<HeldOrder>,
    /// Done markers held before this seed was read that none of its orders explains (a done
    /// marker follows its commit, so its order would be here): a resync drops them.
    pub unexplained: Vec<(UserId, IdempotencyKey)>,
}

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait AdmissionGate: Send + Sync + 'static {
    /// Seeds the gate for a drop unless it already holds it; running it twice changes nothing.
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError>;

    /// Atomically: idempotency marker, units left, per-buyer limit, then take the units.
    ///
    /// # Errors
    /// [`InfraError`] when the gate cannot be reached or its answer is unknown (a timeout
    /// is not a no: the units may have been taken).
    async fn reserve(&self, reservation: &Reservation) -> Result<ReserveOutcome, InfraError>;

    /// Whether a reservation of `drop` is answered here without a round trip to the gate's
    /// store right now (the drop is known sold out): what such an answer costs is this
    /// instance's alone.
    fn answers_locally(&self, drop: DropId) -> bool {
        let _ = drop;
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

    /// Gives back the units of a cancelled order (the order's marker stays, for replays).
    /// The caller calls it once per cancelled order.
    async fn release(
        &self,
        drop_id: DropId,
        user_id: UserId,
        quantity: Quantity,
    ) -> Result<(), InfraError>;

    /// The drop was closed at `at`: its state is released a grace period later (as after
    /// `closeAt`), for purchases in flight to settle.
    async fn closed(&self, drop_id: DropId, at: OffsetDateTime) -> Result<(), InfraError>;

    /// Units the gate will still admit, or `None` when it holds nothing for the drop.
    async fn remaining(&self, drop_id: DropId) -> Result<Option<u32>, InfraError>;

    /// The (buyer, key) pairs whose done markers the gate holds for the drop now (read before
    /// a seed, to tell which of them the seed cannot explain).
    async fn done_markers(
        &self,
        drop_id: DropId,
    ) -> Result<Vec<(UserId, IdempotencyKey)>, InfraError>;
}
