//! Draw drops' entries and draws, and the vault of their seeds.

use crate::{Draw, DropId, Entry};
use crate::{DrawCommitment, DrawSeed, EntriesRoot, InfraError, OrderId, RankKey, UserId};
use crate::{SealError, SealedSeed, Sku};
use crate::{SizeCutoff, draw::Entrant, draw::Ranked};
use async_trait::async_trait;
use time::OffsetDateTime;

/// One buyer's entry, as asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    pub user_id: UserId,
    /// The size it is for, one of the drop's (`None` in a drop without sizes).
    pub sku: Option<Sku>,
    pub at: OffsetDateTime,
}

/// The answer to one entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entered {
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
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Draw drops' entries (rows of their own, no hot row, many per statement) and draws, whose
/// counts are kept as entries are written, so no read counts them.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait DrawRepository: Send + Sync + 'static {
    /// Records a batch of one drop's entries, one per buyer, answering each as stored and
    /// growing the count; refused once entries are closed, so none commits after the set was read.
    ///
    /// # Errors
    /// Then none of the batch may be assumed written.
    async fn enter(&self, drop: DropId, entries: &[NewEntry]) -> Result<Vec<Entered>, EnterError>;

    /// `user`'s entry in `drop`, with whether its order was given back.
    async fn entry(&self, drop: DropId, user: UserId) -> Result<Option<Entry>, InfraError>;

    /// The draw of `drop` with its counts (a draw drop has one from creation).
    async fn draw(&self, drop: DropId) -> Result<Option<Draw>, InfraError>;

    /// Closes the entries of `drop` at `at`, waiting for the batches being written; a second
    /// call changes nothing.
    async fn close_entries(&self, drop: DropId, at: OffsetDateTime) -> Result<(), InfraError>;

    /// Every entrant of `drop` with the size it entered for, by user id ascending (the entry
    /// set, once entries are closed).
    async fn entrants(&self, drop: DropId) -> Result<Vec<Entrant>, InfraError>;

    /// Publishes the root of the closed entry set of `drop`, once: a root already published
    /// stays.
    async fn publish_root(&self, drop: DropId, root: &EntriesRoot) -> Result<(), InfraError>;

    /// Stores each entry's rank and rank key (the same on every run: the ranking is a function
    /// of the seed and the entry set).
    async fn rank_entries(&self, drop: DropId, ranked: &[Ranked]) -> Result<(), InfraError>;

    /// Up to `limit` ranked entries of `drop` for size `sku` still waiting (no order, not
    /// voided), lowest rank first.
    async fn waiting(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        limit: u32,
    ) -> Result<Vec<UserId>, InfraError>;

    /// Records the orders given to entries of `drop` for size `sku` at `at` (a promotion's
    /// when `promoted`) and counts them, for the drop and the size; an entry keeps the first
    /// order it got.
    async fn award(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        awards: &[(UserId, OrderId)],
        promoted: bool,
        at: OffsetDateTime,
    ) -> Result<(), InfraError>;

    /// Voids `user`'s waiting entry in `drop` for size `sku` with the refusal's `reason` at
    /// `at` and counts it, for the drop and the size: `false` when it was not waiting any more.
    async fn void(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        user: UserId,
        reason: &str,
        at: OffsetDateTime,
    ) -> Result<bool, InfraError>;

    /// The rank key of the highest-ranked entry for size `sku` with an order: before any
    /// promotion, the size's last winner.
    async fn last_awarded(
        &self,
        drop: DropId,
        sku: Option<Sku>,
    ) -> Result<Option<RankKey>, InfraError>;

    /// Marks the draw of `drop` done at `at` with each size's cutoff (one, `sku` `None`, for a
    /// drop without sizes), writing its `seed` in the clear (the reveal): `false` when it was
    /// done already.
    async fn finish_draw(
        &self,
        drop: DropId,
        at: OffsetDateTime,
        seed: &DrawSeed,
        cutoffs: &[SizeCutoff],
    ) -> Result<bool, InfraError>;
}

/// Draw seeds: drawn from the operating system's CSPRNG, sealed for the database under the
/// service's seal key, opened only to draw.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait SeedVault: Send + Sync + 'static {
    /// A fresh secret seed; an error rather than a weak one.
    fn seed(&self) -> Result<DrawSeed, InfraError>;

    /// `seed` sealed with the current key, bound to `drop` and its `commitment`.
    fn seal(
        &self,
        drop: DropId,
        seed: &DrawSeed,
        commitment: &DrawCommitment,
    ) -> Result<SealedSeed, SealError>;

    /// The seed in `sealed`, checked against `drop` and `commitment`: a seed sealed for another
    /// drop does not open.
    ///
    /// # Errors
    /// [`InfraError`] when the key that sealed it is not held, or the seed does not open.
    fn open(
        &self,
        drop: DropId,
        sealed: &SealedSeed,
        commitment: &DrawCommitment,
    ) -> Result<DrawSeed, InfraError>;
}
