//! Draw drops' entries and draws, and the source of their seeds.

use crate::{Draw, DrawCounts, DropId, Entry};
use crate::{DrawSeed, InfraError, OrderId, RankKey, UserId};
use async_trait::async_trait;
use time::OffsetDateTime;

/// One buyer's entry, as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewEntry {
    pub user_id: UserId,
    pub at: OffsetDateTime,
}

/// The answer to one entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entered {
    /// The entry as stored.
    pub entry: Entry,
    /// This batch created it (`false`: the buyer had entered before, or earlier in the batch).
    pub created: bool,
}

/// Why a batch of entries was not recorded. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    /// The draw has begun: no entry commits any more.
    #[error("entries are closed")]
    EntriesClosed,
    /// The store failed.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Draw drops' entries and draws. Entries are rows of their own (no hot row): many buyers'
/// entries are written by one statement, so entries go at least as fast as orders.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait DrawRepository: Send + Sync + 'static {
    /// Records a batch of entries of one drop, one per buyer: each buyer's entry as stored,
    /// in the batch's order. Refused once the draw has begun ([`DrawRepository::rank_entries`]
    /// closes the entries first), so no entry commits after the ranking read them.
    ///
    /// # Errors
    /// [`EnterError::EntriesClosed`], or the store's failure; then none of the batch may be
    /// assumed written.
    async fn enter(&self, drop: DropId, entries: &[NewEntry]) -> Result<Vec<Entered>, EnterError>;

    /// `user`'s entry in `drop` and how many entries waiting for a unit (ranked past the
    /// winners, no order) rank before it.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn entry(&self, drop: DropId, user: UserId) -> Result<Option<(Entry, u32)>, InfraError>;

    /// The draw of `drop` (a draw drop has one from creation).
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn draw(&self, drop: DropId) -> Result<Option<Draw>, InfraError>;

    /// Entries, winners and promotions of `drop`.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn draw_counts(&self, drop: DropId) -> Result<DrawCounts, InfraError>;

    /// Closes the entries of `drop` at `at` (waiting for the batches being written), then ranks
    /// every entry by goods-domain's [`crate::draw::rank`] over `seed`, storing each entry's
    /// rank and rank key, and returns the cutoff for `limited` winners.
    /// The ranking is a function of the seed and the entrants, so running it again (a leader
    /// that died mid-draw) writes the same.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn rank_entries(
        &self,
        drop: DropId,
        seed: &DrawSeed,
        limited: u32,
        at: OffsetDateTime,
    ) -> Result<Option<RankKey>, InfraError>;

    /// Up to `limit` ranked entries of `drop` without an order, ranked after `after` and at
    /// most `up_to` (`None`: no bound), lowest rank first: the winners still to award
    /// (`after` 0, `up_to` the limit), or the waitlist (`after` the limit).
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn unawarded(
        &self,
        drop: DropId,
        after: u32,
        up_to: Option<u32>,
        limit: u32,
    ) -> Result<Vec<UserId>, InfraError>;

    /// Records the orders given to entries of `drop`; an entry keeps the first order it got.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn award(
        &self,
        drop: DropId,
        awards: &[(UserId, OrderId)],
        promoted: bool,
    ) -> Result<(), InfraError>;

    /// Marks the draw of `drop` done at `at` with `cutoff`, revealing its seed: `false` when
    /// it was done already.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn finish_draw(
        &self,
        drop: DropId,
        at: OffsetDateTime,
        cutoff: Option<RankKey>,
    ) -> Result<bool, InfraError>;
}

/// Where draw seeds come from: the operating system's CSPRNG in the service, fixed bytes in
/// tests.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait SeedSource: Send + Sync + 'static {
    /// A fresh secret seed.
    ///
    /// # Errors
    /// [`InfraError`] when no good randomness is to be had (no draw is made from a weak seed).
    fn seed(&self) -> Result<DrawSeed, InfraError>;
}
