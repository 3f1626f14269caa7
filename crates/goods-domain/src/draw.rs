//! Draw drops: units go to a fair, verifiable draw among the buyers who entered, instead of to
//! whoever reached the server first.
//!
//! Commit, draw, reveal: at creation a secret 32-byte seed is drawn and only its commitment
//! (`SHA-256(seed)`) is published. Once entries close, every entry's rank key is
//! `HMAC-SHA256(key = seed, message = the user id in decimal ASCII)`; entries sorted by rank key
//! (bytes, ascending) are ranked 1, 2, ...; the first `limitedQuantity` win, the rest wait in
//! rank order. A drop in sizes ranks each size's entries among themselves: each size's units
//! go to its best-ranked entries and it has its own waitlist and cutoff (a drop without sizes
//! is the case of one size). The seed is revealed with the largest winning rank key (the cutoff), so a buyer
//! checks their own result from the seed, their user id and the cutoff alone, and anyone checks
//! the seed against the commitment published before the first entry.

use crate::{DropId, LimitedDrop, OrderId, Sku, UserId};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::fmt;
use time::OffsetDateTime;

/// The draw's secret: 32 bytes from the operating system's CSPRNG, stored at creation, never
/// changed, shown only once the draw is done. Its `Debug` does not show it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DrawSeed([u8; 32]);

impl fmt::Debug for DrawSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DrawSeed(..)")
    }
}

/// A 32-byte digest shown as 64 lowercase hex digits: a commitment, a rank key.
macro_rules! digest {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; 32]);

        impl $name {
            pub fn bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// 64 lowercase hex digits.
            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }

            /// Parses 64 hex digits.
            pub fn from_hex(raw: &str) -> Result<Self, BadHex> {
                parse_hex(raw).map(Self)
            }
        }
    };
}

mod entries_tree;
pub use entries_tree::{EntriesRoot, EntriesTree, InclusionProof, leaf_hash, verify_inclusion};

digest!(
    /// `SHA-256(seed)`: published at creation, before the first entry.
    DrawCommitment
);
digest!(
    /// An entry's `HMAC-SHA256(seed, user id in decimal)`; entries are ranked by it, ascending
    /// as bytes (the order of its hex form too).
    RankKey
);

/// Not 64 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not 64 hex digits")]
pub struct BadHex;

fn parse_hex(raw: &str) -> Result<[u8; 32], BadHex> {
    let mut bytes = [0_u8; 32];
    hex::decode_to_slice(raw.trim(), &mut bytes).map_err(|_| BadHex)?;
    Ok(bytes)
}

impl DrawSeed {
    /// A seed of these bytes (from the CSPRNG, or as stored).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Parses 64 hex digits (a stored or revealed seed).
    pub fn from_hex(raw: &str) -> Result<Self, BadHex> {
        parse_hex(raw).map(Self)
    }

    /// The secret bytes, for the vault that seals them.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex digits: what is revealed after the draw.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// `SHA-256(seed)`.
    pub fn commitment(&self) -> DrawCommitment {
        DrawCommitment(Sha256::digest(self.0).into())
    }

    /// Whether this seed is the one `commitment` was made for.
    pub fn opens(&self, commitment: &DrawCommitment) -> bool {
        self.commitment() == *commitment
    }

    /// `user`'s rank key: HMAC-SHA256 keyed by the seed's 32 bytes over the user id in decimal
    /// ASCII (`"42"` for user 42).
    pub fn rank_key(&self, user: UserId) -> RankKey {
        // HMAC takes a key of any length; 32 bytes never fails.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        mac.update(user.get().to_string().as_bytes());
        RankKey(mac.finalize().into_bytes().into())
    }
}

/// A seed sealed with an AEAD under a seal key (`DRAW_SEAL_KEY`), bound to its drop and
/// commitment: a copy of the database alone gives neither the seed nor any rank.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSeed {
    /// Names the key that sealed it, so seeds sealed before a key rotation stay readable.
    pub key_id: String,
    /// Nonce and ciphertext with its tag, as the sealing key's algorithm lays them out.
    pub sealed: Vec<u8>,
}

impl fmt::Debug for SealedSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SealedSeed({}, {} bytes)",
            self.key_id,
            self.sealed.len()
        )
    }
}

/// A draw's seed as stored: sealed until the reveal; in the clear once revealed (and for draws
/// made before seeds were sealed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrawSecret {
    Sealed(SealedSeed),
    Clear(DrawSeed),
}

/// A draw's secret on its way into the store: its commitment now, its seal once the store has
/// numbered the drop, since the seal binds the drop's id; both are written in the drop's
/// creating transaction.
#[derive(Clone)]
pub struct DrawToSeal {
    pub commitment: DrawCommitment,
    seal: std::sync::Arc<dyn Fn(DropId) -> Result<SealedSeed, SealError> + Send + Sync>,
}

impl DrawToSeal {
    /// `commitment`, and `seal` to seal its seed for a drop id.
    pub fn new(
        commitment: DrawCommitment,
        seal: impl Fn(DropId) -> Result<SealedSeed, SealError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            commitment,
            seal: std::sync::Arc::new(seal),
        }
    }

    /// The seed sealed for `drop`.
    pub fn seal(&self, drop: DropId) -> Result<SealedSeed, SealError> {
        (self.seal)(drop)
    }
}

impl fmt::Debug for DrawToSeal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DrawToSeal({})", self.commitment.to_hex())
    }
}

/// Why a draw's seed cannot be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// No seal key is configured (`DRAW_SEAL_KEY`): no draw drop can be created.
    #[error("draws are not configured: no seal key")]
    NotConfigured,
    /// The key store or the randomness failed.
    #[error(transparent)]
    Infra(#[from] crate::InfraError),
}

/// One entry of the closed entry set: its buyer and the size it named (`None` in a drop
/// without sizes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entrant {
    pub user_id: UserId,
    pub sku: Option<Sku>,
}

impl Entrant {
    /// An entrant of a drop without sizes.
    pub fn without_size(user_id: UserId) -> Self {
        Self { user_id, sku: None }
    }
}

/// One entry's place in the draw of its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked {
    pub user_id: UserId,
    pub sku: Option<Sku>,
    pub rank_key: RankKey,
    /// 1 for the smallest rank key among the entries of its size.
    pub rank: u32,
}

/// The draw over `entrants`: each size's entries ranked 1, 2, ... by rank key from `seed`, a
/// tie (an HMAC collision) broken by user id, so the ranking depends on the seed and the
/// entrants alone; the rank keys are those of a drop without sizes (a size changes only whom
/// an entry is ranked against). A buyer listed twice counts once, under the size listed first.
pub fn rank(seed: &DrawSeed, entrants: &[Entrant]) -> Vec<Ranked> {
    let mut seen = std::collections::HashSet::new();
    let mut keyed: Vec<(&Option<Sku>, RankKey, UserId)> = entrants
        .iter()
        .filter(|e| seen.insert(e.user_id))
        .map(|e| (&e.sku, seed.rank_key(e.user_id), e.user_id))
        .collect();
    keyed.sort_unstable();
    let mut ranked = Vec::with_capacity(keyed.len());
    let mut rank = 0_u32;
    for (i, (sku, rank_key, user_id)) in keyed.iter().enumerate() {
        let first_of_size = i == 0 || keyed.get(i - 1).is_some_and(|prev| prev.0 != *sku);
        rank = if first_of_size { 1 } else { rank + 1 };
        ranked.push(Ranked {
            user_id: *user_id,
            sku: (*sku).clone(),
            rank_key: *rank_key,
            rank,
        });
    }
    ranked
}

/// The largest winning rank key of `sku`'s entries in `ranked`: that of rank
/// `min(limited, entries of the size)`; `None` without entries.
pub fn winning_cutoff(ranked: &[Ranked], sku: Option<&Sku>, limited: u32) -> Option<RankKey> {
    ranked
        .iter()
        .filter(|r| r.sku.as_ref() == sku && r.rank <= limited)
        .max_by_key(|r| r.rank)
        .map(|r| r.rank_key)
}

/// Whether a buyer with this rank key won, given the revealed cutoff: what a buyer checks.
pub fn won(rank_key: &RankKey, cutoff: Option<&RankKey>) -> bool {
    cutoff.is_some_and(|cutoff| rank_key <= cutoff)
}

/// Why an entry is refused. Nothing was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EntryRejection {
    /// A FIRST_COME drop takes purchases, not entries.
    #[error("the drop is not a draw")]
    NotADraw,
    /// Before `openAt`.
    #[error("the drop opens at {open_at}")]
    TooEarly { open_at: OffsetDateTime },
    /// Paused by its seller or an admin.
    #[error("the drop is paused")]
    Paused,
    /// From `entryCloseAt` on, or once the drop was closed.
    #[error("entries are closed")]
    EntriesClosed,
}

/// The entry window's gate at `now`, in this order: not a draw, before `openAt`, paused, from
/// `entryCloseAt` on (or closed early).
pub fn check_entry(drop: &LimitedDrop, now: OffsetDateTime) -> Result<(), EntryRejection> {
    let Some(entry_close_at) = drop.mode.entry_close_at() else {
        return Err(EntryRejection::NotADraw);
    };
    if drop.window.is_before_open(now) && drop.closed_at.is_none() {
        Err(EntryRejection::TooEarly {
            open_at: drop.window.open_at(),
        })
    } else if drop.paused {
        Err(EntryRejection::Paused)
    } else if now >= entry_close_at || drop.is_closed(now) {
        Err(EntryRejection::EntriesClosed)
    } else {
        Ok(())
    }
}

/// Whether the draw of `drop` is due at `now`: a draw drop whose entries have closed, not
/// drawn yet, and not closed early before its entries closed (such a drop is never drawn).
pub fn draw_due(drop: &LimitedDrop, drawn: bool, now: OffsetDateTime) -> bool {
    let Some(entry_close_at) = drop.mode.entry_close_at() else {
        return false;
    };
    !drawn && now >= entry_close_at && drop.closed_at.is_none_or(|at| at >= entry_close_at)
}

/// Whether a unit freed in `drop` at `now` goes to the waitlist: a drawn draw drop still on
/// sale (promotions stop at `closeAt`).
pub fn promotes(drop: &LimitedDrop, drawn: bool, now: OffsetDateTime) -> bool {
    drop.mode.is_draw() && drawn && !drop.is_closed(now)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub drop_id: DropId,
    pub user_id: UserId,
    /// The size it entered for (`None` in a drop without sizes).
    pub sku: Option<Sku>,
    pub entered_at: OffsetDateTime,
    /// Set by the draw: its rank among its size's entries, and its rank key.
    pub ranked: Option<(u32, RankKey)>,
    /// The order the draw or a promotion gave it (kept when that order is given back).
    pub order_id: Option<OrderId>,
    /// When a promotion off the waitlist gave it its order.
    pub promoted_at: Option<OffsetDateTime>,
    /// Its order was cancelled or expired: the unit went to the waitlist.
    pub order_given_back: bool,
    /// Why the ledger refused its award (the refusal's code); its unit went to the next rank.
    pub void_reason: Option<String>,
}

/// What a buyer sees of their entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryStatus {
    /// Entered; the draw has not been made.
    Entered,
    /// Won a unit: its order; `promoted_at` when a promotion off the waitlist gave it.
    Won {
        order_id: OrderId,
        promoted_at: Option<OffsetDateTime>,
    },
    /// Won, but its order expired unpaid or was cancelled: the unit went to the waitlist.
    Forfeited { order_id: OrderId },
    /// Waiting for a unit a winner gives back; 1 is next.
    Waitlisted { position: u32 },
    /// Not drawn, and the drop is closed: no unit will come.
    Lost,
    /// Its award was refused (`reason`, the refusal's code); the unit went to the next by rank.
    Void { reason: String },
}

impl EntryStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Entered => "ENTERED",
            Self::Won { .. } => "WON",
            Self::Forfeited { .. } => "FORFEITED",
            Self::Waitlisted { .. } => "WAITLISTED",
            Self::Lost => "LOST",
            Self::Void { .. } => "VOID",
        }
    }
}

impl Entry {
    /// Its status at `now` in `drop`, once the draw is `drawn` or not, with the `counts` of its
    /// size's draw ([`Draw::counts_of`]).
    pub fn status(
        &self,
        drop: &LimitedDrop,
        drawn: bool,
        counts: &DrawCounts,
        now: OffsetDateTime,
    ) -> EntryStatus {
        if let Some(reason) = &self.void_reason {
            return EntryStatus::Void {
                reason: reason.clone(),
            };
        }
        if let Some(order_id) = self.order_id {
            return match self.order_given_back {
                true => EntryStatus::Forfeited { order_id },
                false => EntryStatus::Won {
                    order_id,
                    promoted_at: self.promoted_at,
                },
            };
        }
        if drop.is_closed(now) {
            return EntryStatus::Lost;
        }
        match (drawn, self.ranked) {
            (true, Some((rank, _))) => EntryStatus::Waitlisted {
                position: waitlist_position(rank, counts),
            },
            _ => EntryStatus::Entered,
        }
    }
}

/// A waiting entry's place in the waitlist (1 is next), from its rank and the draw's counts
/// alone: awards and voids always take the lowest-ranked waiting entry, so every awarded or
/// voided entry ranks before every waiting one.
pub fn waitlist_position(rank: u32, counts: &DrawCounts) -> u32 {
    rank.saturating_sub(counts.winners)
        .saturating_sub(counts.voided)
        .max(1)
}

/// A draw drop's counts, kept as entries, awards and refusals happen (never recounted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrawCounts {
    pub entries: u32,
    /// Entries that got an order, by the draw or a promotion (forfeited ones included).
    pub winners: u32,
    /// Of those, by a promotion off the waitlist.
    pub promoted: u32,
    /// Entries whose award the ledger refused.
    pub voided: u32,
}

/// One size's draw in a drop sold in sizes, kept as its awards and refusals happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeDraw {
    pub sku: Sku,
    /// Its entries that got an order (forfeited ones included).
    pub winners: u32,
    /// Its entries whose award the ledger refused.
    pub voided: u32,
    /// Its largest winning rank key, set when the draw is done (`None` when nobody won it).
    pub cutoff: Option<RankKey>,
}

/// A size's winning cutoff as the draw ends: `sku` `None` for a drop without sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeCutoff {
    pub sku: Option<Sku>,
    pub cutoff: Option<RankKey>,
}

/// A draw drop's draw as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draw {
    pub drop_id: DropId,
    pub commitment: DrawCommitment,
    /// Sealed from creation; in the clear once revealed with `drawn_at`.
    pub secret: DrawSecret,
    /// The entry set's root, published when entries close, before the reveal.
    pub entries_root: Option<EntriesRoot>,
    pub drawn_at: Option<OffsetDateTime>,
    /// The largest winning rank key, set with `drawn_at` (`None` when nobody won, and in a drop
    /// sold in sizes, whose cutoffs are its sizes').
    pub cutoff: Option<RankKey>,
    /// The drop's totals.
    pub counts: DrawCounts,
    /// Each size's draw, in a drop sold in sizes (empty in one without).
    pub sizes: Vec<SizeDraw>,
}

impl Draw {
    /// The counts an entry of `sku` is placed by: its size's winners and refusals (the drop's
    /// for `None`, a drop without sizes). A size without a row counts none.
    pub fn counts_of(&self, sku: Option<&Sku>) -> DrawCounts {
        match sku {
            None => self.counts,
            Some(sku) => {
                let size = self.sizes.iter().find(|s| s.sku == *sku);
                DrawCounts {
                    entries: self.counts.entries,
                    winners: size.map_or(0, |s| s.winners),
                    promoted: 0,
                    voided: size.map_or(0, |s| s.voided),
                }
            }
        }
    }

    /// The winning cutoff an entry of `sku` is checked against (the drop's for `None`).
    pub fn cutoff_of(&self, sku: Option<&Sku>) -> Option<RankKey> {
        match sku {
            None => self.cutoff,
            Some(sku) => self
                .sizes
                .iter()
                .find(|s| s.sku == *sku)
                .and_then(|s| s.cutoff),
        }
    }

    /// The seed, once it may be shown: after the draw.
    pub fn revealed_seed(&self) -> Option<DrawSeed> {
        match (&self.secret, self.drawn_at) {
            (DrawSecret::Clear(seed), Some(_)) => Some(*seed),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DropMode, Price, ProductId, Quantity, SaleWindow};
    use rstest::rstest;
    use time::Duration;
    use time::macros::datetime;

    const OPEN: OffsetDateTime = datetime!(2026-12-01 09:00 UTC);
    const ENTRIES_CLOSE: OffsetDateTime = datetime!(2026-12-01 09:30 UTC);
    const CLOSE: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);
    const MS: Duration = Duration::milliseconds(1);

    fn user(id: i64) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn seed(n: u8) -> DrawSeed {
        DrawSeed::from_bytes([n; 32])
    }

    fn no_sizes(users: &[UserId]) -> Vec<Entrant> {
        users.iter().copied().map(Entrant::without_size).collect()
    }

    fn sku(raw: &str) -> Sku {
        Sku::parse("sku", raw).unwrap()
    }

    fn draw_drop(limited: i64) -> LimitedDrop {
        LimitedDrop {
            id: DropId::parse(1).unwrap(),
            product_id: ProductId::parse(1).unwrap(),
            window: SaleWindow::parse(OPEN, CLOSE).unwrap(),
            limited_quantity: Quantity::parse("limitedQuantity", limited).unwrap(),
            sizes: crate::Sizes::whole(Quantity::parse("limitedQuantity", limited).unwrap()),
            per_user_limit: Quantity::parse("perUserLimit", 1).unwrap(),
            price: Price::default(),
            paused: false,
            closed_at: None,
            mode: DropMode::Draw {
                entry_close_at: ENTRIES_CLOSE,
            },
            payment_window: None,
        }
    }

    #[test]
    fn the_commitment_and_rank_keys_are_the_published_functions_of_the_seed() {
        // Computed independently with Python's hashlib and hmac:
        //   s = bytes(range(32))
        //   hashlib.sha256(s).hexdigest()
        //   hmac.new(s, b"42", hashlib.sha256).hexdigest()
        let s = DrawSeed::from_bytes(std::array::from_fn(|i| u8::try_from(i).unwrap()));
        assert_eq!(
            s.commitment().to_hex(),
            "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"
        );
        assert_eq!(
            s.rank_key(user(42)).to_hex(),
            "7df989924b2ebf8832c80802d1213a8a21a062a23877f0718effe501daee1703"
        );
        assert!(s.opens(&s.commitment()));
        assert!(!seed(1).opens(&s.commitment()));
        assert_eq!(DrawSeed::from_hex(&s.to_hex()).unwrap(), s);
        assert_eq!(
            format!("{s:?}"),
            "DrawSeed(..)",
            "the seed never shows in logs"
        );
    }

    #[test]
    fn ranking_sorts_by_rank_key_and_is_the_same_whatever_the_order_entries_are_read_in() {
        let users: Vec<UserId> = (1..=50).map(user).collect();
        let ranked = rank(&seed(7), &no_sizes(&users));
        assert_eq!(ranked.len(), 50);
        assert!(ranked.windows(2).all(|w| w[0].rank_key < w[1].rank_key));
        assert_eq!(
            ranked.iter().map(|r| r.rank).collect::<Vec<_>>(),
            (1..=50).collect::<Vec<_>>()
        );
        let mut reversed = users.clone();
        reversed.reverse();
        reversed.push(user(3));
        assert_eq!(
            rank(&seed(7), &no_sizes(&reversed)),
            ranked,
            "order and duplicates do not matter"
        );
        assert_ne!(
            rank(&seed(8), &no_sizes(&users)),
            ranked,
            "another seed, another draw"
        );
        for r in &ranked {
            assert_eq!(r.rank_key, seed(7).rank_key(r.user_id));
        }
    }

    #[rstest]
    #[case(50, 10, 10)]
    #[case(5, 10, 5)]
    #[case(0, 10, 0)]
    fn the_cutoff_is_the_last_winners_rank_key(
        #[case] entries: i64,
        #[case] limited: u32,
        #[case] winners: usize,
    ) {
        let users: Vec<UserId> = (1..=entries).map(user).collect();
        let ranked = rank(&seed(3), &no_sizes(&users));
        let cutoff = winning_cutoff(&ranked, None, limited);
        let won_by_cutoff = ranked
            .iter()
            .filter(|r| won(&r.rank_key, cutoff.as_ref()))
            .count();
        assert_eq!(won_by_cutoff, winners);
        assert_eq!(cutoff, winners.checked_sub(1).map(|i| ranked[i].rank_key));
    }

    /// Every entrant's chance of winning is the same: over 4,000 draws with fixed seeds (so the
    /// test never flakes), 5 units among 40 entrants, each entrant's wins are compared with the
    /// 500 expected by Pearson's chi-square. With 39 degrees of freedom the statistic exceeds
    /// 72.05 with probability 0.001 for a fair draw; a draw that favours low user ids by even
    /// 15% fails it.
    #[test]
    fn every_entrant_has_the_same_chance_chi_square() {
        const ENTRANTS: i64 = 40;
        const LIMITED: u32 = 5;
        const DRAWS: u32 = 4000;
        const CRITICAL_39_DF_P001: f64 = 72.05;
        let users: Vec<UserId> = (1..=ENTRANTS).map(user).collect();
        let statistic = |draw: &dyn Fn(u32) -> Vec<UserId>| {
            let mut wins = vec![0_u32; usize::try_from(ENTRANTS).unwrap()];
            for n in 0..DRAWS {
                for winner in draw(n) {
                    wins[usize::try_from(winner.get() - 1).unwrap()] += 1;
                }
            }
            let expected = f64::from(DRAWS * LIMITED) / ENTRANTS as f64;
            wins.iter()
                .map(|&w| (f64::from(w) - expected).powi(2) / expected)
                .sum::<f64>()
        };
        let fair = |n: u32| {
            let seed = DrawSeed::from_bytes(Sha256::digest(n.to_be_bytes()).into());
            rank(&seed, &no_sizes(&users))
                .into_iter()
                .take(LIMITED as usize)
                .map(|r| r.user_id)
                .collect()
        };
        let chi = statistic(&fair);
        assert!(chi < CRITICAL_39_DF_P001, "chi-square {chi:.1} over 39 df");
        // The test can fail: a draw that gives user ids 1-5 a head start is caught.
        let biased = |n: u32| {
            let seed = DrawSeed::from_bytes(Sha256::digest(n.to_be_bytes()).into());
            let mut ranked = rank(&seed, &no_sizes(&users));
            if n.is_multiple_of(7) {
                ranked.sort_by_key(|r| r.user_id);
            }
            ranked
                .into_iter()
                .take(LIMITED as usize)
                .map(|r| r.user_id)
                .collect()
        };
        let chi = statistic(&biased);
        assert!(
            chi > CRITICAL_39_DF_P001,
            "the biased draw passed: {chi:.1}"
        );
    }

    #[rstest]
    #[case(OPEN - MS, Err(EntryRejection::TooEarly { open_at: OPEN }))]
    #[case(OPEN, Ok(()))]
    #[case(ENTRIES_CLOSE - MS, Ok(()))]
    #[case(ENTRIES_CLOSE, Err(EntryRejection::EntriesClosed))]
    #[case(CLOSE, Err(EntryRejection::EntriesClosed))]
    fn entries_are_taken_from_open_at_until_entry_close_at(
        #[case] now: OffsetDateTime,
        #[case] expected: Result<(), EntryRejection>,
    ) {
        assert_eq!(check_entry(&draw_drop(3), now), expected);
    }

    #[test]
    fn a_first_come_drop_or_a_paused_or_closed_draw_takes_no_entry() {
        let first_come = LimitedDrop {
            mode: DropMode::FirstCome,
            ..draw_drop(3)
        };
        assert_eq!(
            check_entry(&first_come, OPEN - MS),
            Err(EntryRejection::NotADraw),
            "checked first"
        );
        let paused = LimitedDrop {
            paused: true,
            ..draw_drop(3)
        };
        assert_eq!(check_entry(&paused, OPEN), Err(EntryRejection::Paused));
        let closed = LimitedDrop {
            closed_at: Some(OPEN + MS),
            ..draw_drop(3)
        };
        assert_eq!(
            check_entry(&closed, OPEN + MS),
            Err(EntryRejection::EntriesClosed)
        );
    }

    #[rstest]
    #[case(ENTRIES_CLOSE - MS, false, None, false)]
    #[case(ENTRIES_CLOSE, false, None, true)]
    #[case(CLOSE + Duration::hours(1), false, None, true)]
    #[case(ENTRIES_CLOSE, true, None, false)]
    #[case(ENTRIES_CLOSE, false, Some(ENTRIES_CLOSE - MS), false)]
    #[case(ENTRIES_CLOSE + MS, false, Some(ENTRIES_CLOSE + MS), true)]
    fn the_draw_is_due_once_entries_close_unless_drawn_or_closed_before(
        #[case] now: OffsetDateTime,
        #[case] drawn: bool,
        #[case] closed_at: Option<OffsetDateTime>,
        #[case] due: bool,
    ) {
        let drop = LimitedDrop {
            closed_at,
            ..draw_drop(3)
        };
        assert_eq!(draw_due(&drop, drawn, now), due);
    }

    #[test]
    fn promotions_run_after_the_draw_until_close_at() {
        let drop = draw_drop(3);
        assert!(!promotes(&drop, false, ENTRIES_CLOSE));
        assert!(promotes(&drop, true, ENTRIES_CLOSE));
        assert!(promotes(&drop, true, CLOSE - MS));
        assert!(!promotes(&drop, true, CLOSE));
    }

    fn counts(winners: u32, voided: u32) -> DrawCounts {
        DrawCounts {
            entries: 100,
            winners,
            promoted: 0,
            voided,
        }
    }

    fn entry(rank: Option<u32>, order: Option<i64>) -> Entry {
        Entry {
            drop_id: DropId::parse(1).unwrap(),
            user_id: user(5),
            sku: None,
            entered_at: OPEN,
            ranked: rank.map(|r| (r, seed(1).rank_key(user(5)))),
            order_id: order.map(|o| OrderId::parse(o).unwrap()),
            promoted_at: None,
            order_given_back: false,
            void_reason: None,
        }
    }

    #[rstest]
    #[case(false, None, None, 0, ENTRIES_CLOSE, EntryStatus::Entered)]
    #[case(true, Some(4), None, 3, ENTRIES_CLOSE, EntryStatus::Waitlisted { position: 1 })]
    #[case(true, Some(9), None, 4, ENTRIES_CLOSE, EntryStatus::Waitlisted { position: 5 })]
    #[case(true, Some(2), Some(7), 3, ENTRIES_CLOSE, EntryStatus::Won { order_id: OrderId::parse(7).unwrap(), promoted_at: None })]
    #[case(true, Some(2), Some(7), 3, CLOSE, EntryStatus::Won { order_id: OrderId::parse(7).unwrap(), promoted_at: None })]
    #[case(true, Some(9), None, 4, CLOSE, EntryStatus::Lost)]
    #[case(false, None, None, 0, CLOSE, EntryStatus::Lost)]
    fn an_entrys_status_follows_the_draw_its_order_and_the_close(
        #[case] drawn: bool,
        #[case] rank: Option<u32>,
        #[case] order: Option<i64>,
        #[case] winners: u32,
        #[case] now: OffsetDateTime,
        #[case] expected: EntryStatus,
    ) {
        let status = entry(rank, order).status(&draw_drop(3), drawn, &counts(winners, 0), now);
        assert_eq!(status, expected);
    }

    #[test]
    fn a_winner_whose_order_went_back_is_forfeited_and_a_promoted_one_says_when() {
        let mut forfeited = entry(Some(2), Some(7));
        forfeited.order_given_back = true;
        assert_eq!(
            forfeited.status(&draw_drop(3), true, &counts(3, 0), CLOSE),
            EntryStatus::Forfeited {
                order_id: OrderId::parse(7).unwrap()
            },
            "after the close too"
        );
        let mut promoted = entry(Some(5), Some(9));
        promoted.promoted_at = Some(ENTRIES_CLOSE + MS);
        assert_eq!(
            promoted.status(&draw_drop(3), true, &counts(5, 0), ENTRIES_CLOSE + MS),
            EntryStatus::Won {
                order_id: OrderId::parse(9).unwrap(),
                promoted_at: Some(ENTRIES_CLOSE + MS)
            }
        );
        let mut void = entry(Some(1), None);
        void.void_reason = Some("PER_USER_LIMIT_EXCEEDED".into());
        assert_eq!(
            void.status(&draw_drop(3), true, &counts(3, 1), CLOSE)
                .as_str(),
            "VOID"
        );
    }

    /// Ranks 1-3 won, rank 4 was voided, rank 5 won in its place; the waitlist starts at 6.
    #[rstest]
    #[case(6, 4, 1, 1)]
    #[case(7, 4, 1, 2)]
    #[case(20, 4, 1, 15)]
    #[case(4, 3, 0, 1)]
    fn the_waitlist_position_counts_only_waiting_entries_ahead(
        #[case] rank: u32,
        #[case] winners: u32,
        #[case] voided: u32,
        #[case] position: u32,
    ) {
        assert_eq!(waitlist_position(rank, &counts(winners, voided)), position);
    }

    #[test]
    fn the_seed_shows_only_after_the_draw() {
        let sealed = DrawSecret::Sealed(SealedSeed {
            key_id: "k1".into(),
            sealed: vec![1; 60],
        });
        let mut draw = Draw {
            drop_id: DropId::parse(1).unwrap(),
            commitment: seed(9).commitment(),
            secret: sealed.clone(),
            entries_root: None,
            drawn_at: None,
            cutoff: None,
            counts: DrawCounts::default(),
            sizes: Vec::new(),
        };
        assert_eq!(draw.revealed_seed(), None);
        draw.drawn_at = Some(ENTRIES_CLOSE);
        assert_eq!(draw.revealed_seed(), None, "a sealed seed is never shown");
        draw.secret = DrawSecret::Clear(seed(9));
        assert_eq!(draw.revealed_seed(), Some(seed(9)));
        assert!(!format!("{sealed:?}").contains("1, 1"), "no bytes in logs");
    }

    /// 30 buyers over three sizes (and one listed twice): each size's entries are ranked 1..n
    /// among themselves by the same rank keys as without sizes, in the order those keys give.
    #[test]
    fn each_size_ranks_its_own_entries_by_the_same_rank_keys() {
        let sizes = [sku("US-9"), sku("US-10"), sku("US-11")];
        let mut entrants: Vec<Entrant> = (1..=30)
            .map(|id| Entrant {
                user_id: user(id),
                sku: Some(sizes[usize::try_from(id % 3).unwrap()].clone()),
            })
            .collect();
        entrants.push(Entrant {
            user_id: user(4),
            sku: Some(sku("US-9")),
        });
        let ranked = rank(&seed(5), &entrants);
        assert_eq!(ranked.len(), 30, "a buyer counts once");
        let user_4 = ranked.iter().find(|r| r.user_id == user(4)).unwrap();
        assert_eq!(
            user_4.sku,
            Some(sku("US-10")),
            "under the size listed first"
        );
        for size in &sizes {
            let of_size: Vec<&Ranked> = ranked
                .iter()
                .filter(|r| r.sku.as_ref() == Some(size))
                .collect();
            assert_eq!(of_size.len(), 10, "{size}");
            let mut by_rank = of_size.clone();
            by_rank.sort_by_key(|r| r.rank);
            assert_eq!(
                by_rank.iter().map(|r| r.rank).collect::<Vec<_>>(),
                (1..=10).collect::<Vec<_>>(),
                "{size}: ranks 1..10"
            );
            assert!(
                by_rank.windows(2).all(|w| w[0].rank_key < w[1].rank_key),
                "{size}: ranked by rank key"
            );
        }
        for r in &ranked {
            assert_eq!(r.rank_key, seed(5).rank_key(r.user_id), "the unsized key");
        }
        // A drop without sizes is the case of one size: one ranking of everyone.
        let users: Vec<UserId> = (1..=30).map(user).collect();
        let whole = rank(&seed(5), &no_sizes(&users));
        assert_eq!(whole.iter().filter(|r| r.rank == 1).count(), 1);
        assert_eq!(ranked.iter().filter(|r| r.rank == 1).count(), 3);
    }

    #[rstest]
    #[case("US-9", 3, 3)]
    #[case("US-10", 20, 10)]
    #[case("US-12", 3, 0)]
    fn a_sizes_cutoff_is_its_own_last_winners_rank_key(
        #[case] size: &str,
        #[case] limited: u32,
        #[case] winners: usize,
    ) {
        let entrants: Vec<Entrant> = (1..=20)
            .map(|id| Entrant {
                user_id: user(id),
                sku: Some(sku(if id % 2 == 0 { "US-9" } else { "US-10" })),
            })
            .collect();
        let ranked = rank(&seed(3), &entrants);
        let size = sku(size);
        let cutoff = winning_cutoff(&ranked, Some(&size), limited);
        let won_by_cutoff = ranked
            .iter()
            .filter(|r| r.sku.as_ref() == Some(&size) && won(&r.rank_key, cutoff.as_ref()))
            .count();
        assert_eq!(won_by_cutoff, winners);
    }

    #[test]
    fn an_entry_is_placed_by_its_own_sizes_counts_and_cutoff() {
        let key = seed(1).rank_key(user(5));
        let draw = Draw {
            drop_id: DropId::parse(1).unwrap(),
            commitment: seed(1).commitment(),
            secret: DrawSecret::Clear(seed(1)),
            entries_root: None,
            drawn_at: Some(ENTRIES_CLOSE),
            cutoff: None,
            counts: counts(7, 1),
            sizes: vec![
                SizeDraw {
                    sku: sku("US-9"),
                    winners: 2,
                    voided: 1,
                    cutoff: Some(key),
                },
                SizeDraw {
                    sku: sku("US-10"),
                    winners: 5,
                    voided: 0,
                    cutoff: None,
                },
            ],
        };
        let mut waiting = entry(Some(6), None);
        waiting.sku = Some(sku("US-9"));
        let status = waiting.status(
            &draw_drop(7),
            true,
            &draw.counts_of(waiting.sku.as_ref()),
            ENTRIES_CLOSE,
        );
        assert_eq!(status, EntryStatus::Waitlisted { position: 3 });
        waiting.sku = Some(sku("US-10"));
        let status = waiting.status(
            &draw_drop(7),
            true,
            &draw.counts_of(waiting.sku.as_ref()),
            ENTRIES_CLOSE,
        );
        assert_eq!(status, EntryStatus::Waitlisted { position: 1 });
        assert_eq!(draw.counts_of(Some(&sku("US-11"))).winners, 0);
        assert_eq!(draw.counts_of(None), counts(7, 1), "the drop's own");
        assert_eq!(draw.cutoff_of(Some(&sku("US-9"))), Some(key));
        assert_eq!(draw.cutoff_of(Some(&sku("US-10"))), None);
        assert_eq!(draw.cutoff_of(None), None);
    }
}
