//! Draw drops: buyers enter during `[openAt, entryCloseAt)`; then the leading instance closes
//! the entries (publishing the RFC 6962 root of the entrants before the sealed seed is opened),
//! ranks them by goods-domain's rule, gives the winners their orders in batches and reveals the
//! seed. A unit given back goes to the first waitlisted entry until `closeAt`.
//!
//! Every step can be rerun after a crash without awarding twice: the ranking is a function of
//! seed and entrants, a winner's order has the service's own key (no client can send it), an
//! entry keeps its first order, and the ledger never lets orders exceed units. A refused entry
//! is voided and its unit goes to the next by rank.

use crate::drops::cache::DropCache;
use crate::mechanisms::group_commit::{Committers, Sink};
use crate::operations::flags::FlagCache;
use crate::{Actor, GoodsApp, REMAINING_TTL, Tasks, WriteBuffer, telemetry};
use async_trait::async_trait;
use goods_domain::draw::{EntryRejection, check_entry, draw_due, promotes, rank};
use goods_domain::ports::{
    Clock, DrawRepository, DropRepository, EnterError, Entered, NewEntry, PlaceOrder,
    PlaceOrderError, Placed, PurchaseLedger, SeedVault,
};
use goods_domain::{
    Draw, DrawCommitment, DrawCounts, DrawSecret, DrawSeed, DropId, EntriesRoot, EntriesTree,
    Entry, EntryStatus, GoodsOrder, IdempotencyKey, InclusionProof, InfraError, LimitedDrop,
    OrderId, PaymentWindow, Quantity, RankKey, UserId,
};
use goods_domain::{SizeCutoff, Sku, SkuRejection};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use time::OffsetDateTime;

/// Winners awarded per ledger transaction: the size of a purchase batch, whose statements the
/// connections keep prepared.
const AWARD_BATCH: u32 = 64;

/// The entries' sink: one batch of a drop's entries per transaction.
pub(crate) struct Entries(pub(crate) Arc<dyn DrawRepository>);

/// One buyer's entry, handed to the drop's committer.
pub(crate) struct EntryItem {
    drop: DropId,
    entry: NewEntry,
}

#[async_trait]
impl Sink for Entries {
    type Item = EntryItem;
    type Answer = Result<Entered, EnterError>;

    fn drop_of(item: &EntryItem) -> DropId {
        item.drop
    }

    async fn commit(&self, batch: Vec<EntryItem>) -> Result<Vec<Self::Answer>, InfraError> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        let entries: Vec<NewEntry> = batch.iter().map(|i| i.entry.clone()).collect();
        match self.0.enter(first.drop, &entries).await {
            Ok(entered) => Ok(entered.into_iter().map(Ok).collect()),
            Err(EnterError::EntriesClosed) => Ok(batch
                .iter()
                .map(|_| Err(EnterError::EntriesClosed))
                .collect()),
            Err(EnterError::Infra(error)) => Err(error),
        }
    }

    fn failed(error: InfraError) -> Self::Answer {
        Err(EnterError::Infra(error))
    }
}

/// A buyer's entry as they see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryView {
    pub drop_id: DropId,
    pub user_id: UserId,
    /// The size it is for (`None` in a drop without sizes).
    pub sku: Option<Sku>,
    pub status: EntryStatus,
    pub entered_at: OffsetDateTime,
    /// Its rank key, once the draw is done (the buyer checks it against the revealed seed).
    pub rank_key: Option<RankKey>,
    /// Its leaf's audit path in the entry set published when entries closed.
    pub inclusion_proof: Option<InclusionProof>,
    /// This request created it (202); `false`: it existed (200).
    pub created: bool,
}

/// What a draw drop's view adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawView {
    pub entry_close_at: OffsetDateTime,
    /// `SHA-256(seed)`, published from creation.
    pub commitment: DrawCommitment,
    pub seed: Option<DrawSeed>,
    /// The entry set's root, once entries closed (before the seed is revealed).
    pub entries_root: Option<EntriesRoot>,
    pub drawn_at: Option<OffsetDateTime>,
    /// The largest winning rank key, once drawn (a drop without sizes).
    pub cutoff: Option<RankKey>,
    /// Each size's largest winning rank key, once drawn, in a drop sold in sizes (`None`:
    /// nobody won that size).
    pub size_cutoffs: Vec<(Sku, Option<RankKey>)>,
    pub counts: DrawCounts,
}

/// Each draw drop's view, reused for [`REMAINING_TTL`]: a flood of views of a hot draw drop
/// costs the database two reads per interval.
#[derive(Debug, Default)]
pub(crate) struct DrawViews {
    cached: Mutex<HashMap<DropId, (Instant, DrawView)>>,
}

impl DrawViews {
    fn get(&self, drop: DropId) -> Option<DrawView> {
        let cached = self.cached.lock().ok()?;
        cached
            .get(&drop)
            .filter(|(at, _)| at.elapsed() < REMAINING_TTL)
            .map(|(_, view)| view.clone())
    }

    fn put(&self, drop: DropId, view: DrawView) {
        if let Ok(mut cached) = self.cached.lock() {
            cached.retain(|_, (at, _)| at.elapsed() < REMAINING_TTL);
            cached.insert(drop, (Instant::now(), view));
        }
    }

    /// The drop's draw or counts changed here: the next view reads them afresh.
    fn forget(&self, drop: DropId) {
        if let Ok(mut cached) = self.cached.lock() {
            cached.remove(&drop);
        }
    }
}

/// The entry sets of closed draws, built once per instance from the entrants (a set never
/// changes once closed), for the inclusion proofs of entry views. A few drops at a time.
#[derive(Debug, Default)]
pub(crate) struct EntryTrees {
    trees: Mutex<Vec<(DropId, Arc<EntriesTree>)>>,
}

impl EntryTrees {
    const KEPT: usize = 8;

    fn get(&self, drop: DropId) -> Option<Arc<EntriesTree>> {
        let trees = self.trees.lock().ok()?;
        trees
            .iter()
            .find(|(d, _)| *d == drop)
            .map(|(_, t)| Arc::clone(t))
    }

    fn put(&self, drop: DropId, tree: Arc<EntriesTree>) {
        if let Ok(mut trees) = self.trees.lock() {
            trees.retain(|(d, _)| *d != drop);
            if trees.len() >= Self::KEPT {
                trees.remove(0);
            }
            trees.push((drop, tree));
        }
    }
}

/// Why an entry was not recorded or read. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("drop not found")]
    DropNotFound,
    /// The size named is not one of the drop's, or is missing or superfluous.
    #[error(transparent)]
    Size(#[from] SkuRejection),
    /// The entry window refused it (for `EntriesClosed`: and the buyer has no entry).
    #[error(transparent)]
    Refused(#[from] EntryRejection),
    /// The buyer has no entry in the drop.
    #[error("no entry")]
    EntryNotFound,
    /// No database write slot within the wait bound.
    #[error("throttled")]
    Throttled,
    /// A store failed (or did not answer within its bound: [`InfraError::is_unavailable`]).
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl EntryError {
    fn label(&self) -> &'static str {
        match self {
            Self::DropNotFound => "drop_not_found",
            Self::Size(_) => "invalid_size",
            Self::Refused(EntryRejection::NotADraw) => "not_a_draw",
            Self::Refused(EntryRejection::TooEarly { .. }) => "too_early",
            Self::Refused(EntryRejection::Paused) => "paused",
            Self::Refused(EntryRejection::EntriesClosed) => "entries_closed",
            Self::EntryNotFound => "entry_not_found",
            Self::Throttled => "throttled",
            Self::Infra(e) if e.is_unavailable() => "unavailable",
            Self::Infra(_) => "unexpected",
        }
    }
}

/// The order a draw gives `user`: one unit, its window starting `now`, under the service's own
/// key for the drop's draw, so that awarding it again (a leader that died mid-draw, two
/// promotions of one entry) replays it instead of creating another, and no client can hold
/// that key first.
fn award_order(
    drop: &LimitedDrop,
    sku: Option<&Sku>,
    user: UserId,
    now: OffsetDateTime,
    default_window: PaymentWindow,
) -> PlaceOrder {
    PlaceOrder {
        // A winner's window starts at the award (or the promotion), not at the entry.
        window: drop.payment_window_or(default_window),
        drop_id: drop.id,
        product_id: drop.product_id,
        limited_quantity: drop.limited_quantity,
        per_user_limit: drop.per_user_limit,
        price: drop.price,
        user_id: user,
        sku: sku.cloned(),
        quantity: Quantity::ONE,
        key: IdempotencyKey::for_draw(drop.id),
        now,
        deadline: None,
    }
}

/// Draw drops' entries, draws and waitlists.
#[derive(Clone)]
pub struct Draws {
    draws: Arc<dyn DrawRepository>,
    drops: Arc<dyn DropRepository>,
    ledger: Arc<dyn PurchaseLedger>,
    seeds: Arc<dyn SeedVault>,
    clock: Arc<dyn Clock>,
    /// The database write slots an entry takes.
    buffer: WriteBuffer,
    /// One committer per draw drop, batching its entries.
    entries: Arc<Committers<Entries>>,
    cache: Arc<DropCache>,
    flags: Arc<FlagCache>,
    views: Arc<DrawViews>,
    entry_trees: Arc<EntryTrees>,
    promotions: Arc<Promotions>,
    tasks: Tasks,
    payment_window: PaymentWindow,
}

impl GoodsApp {
    /// Draw drops' entries, draws and waitlists (`/limited-drops/{id}/entries`, the draws'
    /// schedule).
    pub fn draws(&self) -> Draws {
        let ports = self.ports();
        Draws {
            draws: Arc::clone(&ports.draws),
            drops: Arc::clone(&ports.drops),
            ledger: Arc::clone(&ports.ledger),
            seeds: Arc::clone(&ports.seeds),
            clock: Arc::clone(&ports.clock),
            buffer: self.purchases.buffer.clone(),
            entries: Arc::clone(&self.entries),
            cache: Arc::clone(&self.drops),
            flags: Arc::clone(&self.flags_cache),
            views: Arc::clone(&self.draw_views),
            entry_trees: Arc::clone(&self.entry_trees),
            promotions: Arc::clone(&self.promotions),
            tasks: self.tasks.clone(),
            payment_window: self.payment_window(),
        }
    }
}

impl Draws {
    /// Enters `actor` in a draw drop for the size `sku` names (as sent; `None` for a drop
    /// without sizes): 202 for a new entry, the existing entry (with the size it named) for a
    /// buyer who entered before (also after entries closed).
    #[tracing::instrument(skip_all, fields(drop.id = %id, user.id = %actor.user_id, outcome))]
    pub async fn enter(
        &self,
        id: DropId,
        actor: Actor,
        sku: Option<&str>,
    ) -> Result<EntryView, EntryError> {
        let result = self.enter_inner(id, actor, sku).await;
        let outcome = match &result {
            Ok(view) if view.created => "entered",
            Ok(_) => "repeated",
            Err(error) => error.label(),
        };
        tracing::Span::current().record("outcome", outcome);
        metrics::counter!(telemetry::DRAW_ENTRIES, "outcome" => outcome).increment(1);
        result
    }

    async fn enter_inner(
        &self,
        id: DropId,
        actor: Actor,
        sku: Option<&str>,
    ) -> Result<EntryView, EntryError> {
        let drop = self.draw_drop(id).await?;
        // The size: one of the drop's, or none for a drop without sizes (an input error, so
        // before the entry window's answers, as for purchases).
        let size = drop.sizes.choose(sku)?.sku.clone();
        let now = self.clock.now();
        match check_entry(&drop, now) {
            Ok(()) => {}
            Err(EntryRejection::EntriesClosed) => {
                // A buyer who entered still gets their entry; only closed drops pay this read.
                return self
                    .entry_view(&drop, actor.user_id, now)
                    .await?
                    .ok_or(EntryRejection::EntriesClosed.into());
            }
            Err(refused) => return Err(refused.into()),
        }
        let Some(_permit) = self.buffer.acquire().await else {
            return Err(EntryError::Throttled);
        };
        let item = EntryItem {
            drop: drop.id,
            entry: NewEntry {
                user_id: actor.user_id,
                sku: size,
                at: now,
            },
        };
        match self.entries.place(item).await {
            Ok(entered) => {
                if entered.created {
                    self.views.forget(drop.id);
                }
                Ok(EntryView {
                    drop_id: drop.id,
                    user_id: actor.user_id,
                    sku: entered.entry.sku.clone(),
                    status: EntryStatus::Entered,
                    entered_at: entered.entry.entered_at,
                    rank_key: None,
                    inclusion_proof: None,
                    created: entered.created,
                })
            }
            // The draw began between the check and the commit.
            Err(EnterError::EntriesClosed) => self
                .entry_view(&drop, actor.user_id, now)
                .await?
                .ok_or(EntryRejection::EntriesClosed.into()),
            Err(EnterError::Infra(error)) => Err(error.into()),
        }
    }

    /// `actor`'s entry in a draw drop, with its status now.
    #[tracing::instrument(skip_all, fields(drop.id = %id, user.id = %actor.user_id))]
    pub async fn my_entry(&self, id: DropId, actor: Actor) -> Result<EntryView, EntryError> {
        let drop = self.draw_drop(id).await?;
        if !drop.mode.is_draw() {
            return Err(EntryRejection::NotADraw.into());
        }
        self.entry_view(&drop, actor.user_id, self.clock.now())
            .await?
            .ok_or(EntryError::EntryNotFound)
    }

    async fn draw_drop(&self, id: DropId) -> Result<LimitedDrop, EntryError> {
        if !self.flags.drops_on() {
            return Err(EntryError::DropNotFound);
        }
        self.cache.load(id).await?.ok_or(EntryError::DropNotFound)
    }

    async fn entry_view(
        &self,
        drop: &LimitedDrop,
        user: UserId,
        now: OffsetDateTime,
    ) -> Result<Option<EntryView>, InfraError> {
        let Some(entry) = self.draws.entry(drop.id, user).await? else {
            return Ok(None);
        };
        let draw = self.draw_of(drop.id).await?;
        let proof = match draw.entries_root {
            Some(root) => self.inclusion_proof(drop.id, &root, user).await?,
            None => None,
        };
        Ok(Some(view_of(drop, &entry, &draw, proof, now)))
    }

    /// The draw of a draw drop (it has one from creation).
    async fn draw_of(&self, drop: DropId) -> Result<Draw, InfraError> {
        self.draws
            .draw(drop)
            .await?
            .ok_or_else(|| InfraError::msg(format!("draw drop {drop} has no draw")))
    }

    /// `user`'s audit path in the entry set of `drop` whose published root is `root`.
    async fn inclusion_proof(
        &self,
        drop: DropId,
        root: &EntriesRoot,
        user: UserId,
    ) -> Result<Option<InclusionProof>, InfraError> {
        let tree = match self.entry_trees.get(drop) {
            Some(tree) => tree,
            None => {
                let users: Vec<UserId> = (self.draws.entrants(drop).await?)
                    .into_iter()
                    .map(|e| e.user_id)
                    .collect();
                let tree = Arc::new(EntriesTree::new(&users));
                self.entry_trees.put(drop, Arc::clone(&tree));
                tree
            }
        };
        if tree.root() != *root {
            // The set read now is not the one published: say nothing rather than a proof
            // that does not check.
            tracing::error!(drop.id = %drop, "the entry set read differs from its published root");
            return Ok(None);
        }
        Ok(tree.prove(user))
    }

    /// What a draw drop's view adds (its draw and counts), reused for [`REMAINING_TTL`];
    /// `None` for a first-come drop.
    pub(crate) async fn view(&self, drop: &LimitedDrop) -> Result<Option<DrawView>, InfraError> {
        let Some(entry_close_at) = drop.mode.entry_close_at() else {
            return Ok(None);
        };
        if let Some(view) = self.views.get(drop.id) {
            return Ok(Some(view));
        }
        let draw = self.draw_of(drop.id).await?;
        let view = DrawView {
            entry_close_at,
            commitment: draw.commitment,
            seed: draw.revealed_seed(),
            entries_root: draw.entries_root,
            drawn_at: draw.drawn_at,
            cutoff: draw.cutoff,
            size_cutoffs: draw
                .sizes
                .iter()
                .filter(|_| draw.drawn_at.is_some())
                .map(|s| (s.sku.clone(), s.cutoff))
                .collect(),
            counts: draw.counts,
        };
        self.views.put(drop.id, view.clone());
        Ok(Some(view))
    }

    /// Draws `drop` if its draw is due (entries closed, not drawn), in the module's steps; safe
    /// to run again after a failure at any step, and on two instances at once. `true` when this
    /// call finished the draw.
    #[tracing::instrument(skip_all, fields(drop.id = %drop.id))]
    pub async fn run(&self, drop: &LimitedDrop) -> Result<bool, InfraError> {
        let now = self.clock.now();
        let Some(draw) = self.draws.draw(drop.id).await? else {
            return Ok(false);
        };
        if !draw_due(drop, draw.drawn_at.is_some(), now) {
            return Ok(false);
        }
        let started = Instant::now();
        let draws = &self.draws;
        draws.close_entries(drop.id, now).await?;
        let entrants = draws.entrants(drop.id).await?;
        let users: Vec<UserId> = entrants.iter().map(|e| e.user_id).collect();
        let tree = Arc::new(EntriesTree::new(&users));
        draws.publish_root(drop.id, &tree.root()).await?;
        self.entry_trees.put(drop.id, Arc::clone(&tree));
        // Only now, with the entry set fixed and published, is the seed opened.
        let seed = self.open_seed(&draw)?;
        draws.rank_entries(drop.id, &rank(&seed, &entrants)).await?;
        let awarded = self.award(drop, false).await?;
        // Each size's cutoff: its last winner's rank key (one for a drop without sizes).
        let mut cutoffs = Vec::new();
        for size in drop.sizes.iter() {
            cutoffs.push(SizeCutoff {
                sku: size.sku.clone(),
                cutoff: draws.last_awarded(drop.id, size.sku.clone()).await?,
            });
        }
        let finished = draws.finish_draw(drop.id, now, &seed, &cutoffs).await?;
        self.views.forget(drop.id);
        if finished {
            metrics::histogram!(telemetry::DRAW_DURATION).record(started.elapsed().as_secs_f64());
            tracing::info!(
                awarded,
                entries = entrants.len(),
                "draw done, seed revealed"
            );
        }
        Ok(finished)
    }

    fn open_seed(&self, draw: &Draw) -> Result<DrawSeed, InfraError> {
        match &draw.secret {
            DrawSecret::Sealed(sealed) => self.seeds.open(draw.drop_id, sealed, &draw.commitment),
            DrawSecret::Clear(seed) => Ok(*seed),
        }
    }

    /// Gives `drop`'s free units to its waitlist in rank order, while it is drawn and on sale.
    /// Run after a winner's order is cancelled or expires, and by the draws' own schedule (so
    /// a promotion lost to a crash happens on the next tick). Returns the promotions this call
    /// made.
    pub async fn promote_waitlist(&self, drop: &LimitedDrop) -> Result<u32, InfraError> {
        let now = self.clock.now();
        let drawn = self
            .draws
            .draw(drop.id)
            .await?
            .is_some_and(|d| d.drawn_at.is_some());
        if !promotes(drop, drawn, now) {
            return Ok(0);
        }
        let promoted = self.award(drop, true).await?;
        if promoted > 0 {
            self.views.forget(drop.id);
        }
        Ok(promoted)
    }

    /// Awards each size's waiting entries, lowest rank first, a batch at a time, while the size
    /// has units free (a drop without sizes is one size); an entry the ledger refuses is voided
    /// with the reason and the unit goes to the next of its size. Each batch's payment windows
    /// start when it is placed.
    async fn award(&self, drop: &LimitedDrop, promoted: bool) -> Result<u32, InfraError> {
        let mut created = 0;
        for size in drop.sizes.iter() {
            created += self
                .award_size(drop, size.sku.as_ref(), size.limited.get(), promoted)
                .await?;
        }
        Ok(created)
    }

    async fn award_size(
        &self,
        drop: &LimitedDrop,
        sku: Option<&Sku>,
        limited: u32,
        promoted: bool,
    ) -> Result<u32, InfraError> {
        let by = if promoted { "promotion" } else { "draw" };
        let mut created = 0;
        loop {
            let now = self.clock.now();
            let sold = match sku {
                None => self.drops.sold_quantity(drop.id).await?,
                Some(sku) => self
                    .drops
                    .sold_by_size(drop.id)
                    .await?
                    .get(&Some(sku.clone()))
                    .copied()
                    .unwrap_or(0),
            };
            let batch = AWARD_BATCH.min(limited.saturating_sub(sold));
            if batch == 0 {
                return Ok(created);
            }
            let users = self.draws.waiting(drop.id, sku.cloned(), batch).await?;
            if users.is_empty() {
                return Ok(created);
            }
            let orders: Vec<PlaceOrder> = users
                .iter()
                .map(|&user| award_order(drop, sku, user, now, self.payment_window))
                .collect();
            let placements = self.ledger.place_orders(&orders).await?;
            let mut awards: Vec<(UserId, OrderId)> = Vec::with_capacity(users.len());
            let mut refused = Vec::new();
            let mut sold_out = false;
            let mut made = 0_u32;
            for (user, placement) in users.iter().zip(placements) {
                match placement {
                    Ok(Placed::Created(order)) => {
                        made += 1;
                        awards.push((*user, order.id));
                    }
                    Ok(Placed::Replayed(order)) => awards.push((*user, order.id)),
                    // No free unit in the size, or the drop closed: nobody further down the
                    // size's ranks gets one either.
                    Err(PlaceOrderError::SoldOut { .. } | PlaceOrderError::Closed) => {
                        sold_out = true;
                    }
                    Err(PlaceOrderError::Infra(error)) => return Err(error),
                    Err(other) => refused.push((*user, other.reason())),
                }
            }
            if made > 0 {
                // Views count this size's units again, not from before the batch.
                self.cache.units_changed(drop.id);
            }
            self.draws
                .award(drop.id, sku.cloned(), &awards, promoted, now)
                .await?;
            for (user, reason) in refused {
                if self
                    .draws
                    .void(drop.id, sku.cloned(), user, reason, now)
                    .await?
                {
                    metrics::counter!(telemetry::DRAW_VOIDED).increment(1);
                    tracing::warn!(drop.id = %drop.id, user.id = %user, reason, "draw entry voided; its unit goes to the next by rank");
                }
            }
            metrics::counter!(telemetry::DRAW_AWARDS, "by" => by).increment(made.into());
            created += made;
            if sold_out {
                return Ok(created);
            }
        }
    }

    /// After `order`'s units went back (cancelled, or expired): a draw drop's waitlist gets
    /// them, in the background. One promotion per drop runs here at a time: when 300 orders
    /// expire in one pass, the first call starts it and the others only ask it to look again
    /// once it is done, instead of 300 promotions racing for the same free units.
    pub(crate) fn promote_after(&self, order: &GoodsOrder) {
        let drop = order.drop_id;
        if !self.promotions.start(drop) {
            return;
        }
        let draws = self.clone();
        self.tasks.spawn(async move {
            loop {
                let result = match draws.cache.load(drop).await {
                    Ok(Some(drop)) => draws.promote_waitlist(&drop).await.map(|_| ()),
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                };
                if let Err(error) = result {
                    // The next healing pass promotes what this one did not.
                    tracing::warn!(drop.id = %drop, error = %error, "waitlist promotion failed");
                }
                if draws.promotions.finish(drop) {
                    break;
                }
            }
        });
    }
}

/// The draw drops whose promotion runs in this instance, each with whether more units came
/// back since it started.
#[derive(Debug, Default)]
pub(crate) struct Promotions(Mutex<HashMap<DropId, bool>>);

impl Promotions {
    /// `true` when the caller is to run `drop`'s promotion; otherwise the running one is asked
    /// to look again.
    fn start(&self, drop: DropId) -> bool {
        let Ok(mut running) = self.0.lock() else {
            return true;
        };
        match running.get_mut(&drop) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                running.insert(drop, false);
                true
            }
        }
    }

    /// `true` when the promotion of `drop` is done; `false` when units came back meanwhile
    /// and it must run once more.
    fn finish(&self, drop: DropId) -> bool {
        let Ok(mut running) = self.0.lock() else {
            return true;
        };
        match running.get_mut(&drop) {
            Some(again) if *again => {
                *again = false;
                false
            }
            _ => {
                running.remove(&drop);
                true
            }
        }
    }
}

fn view_of(
    drop: &LimitedDrop,
    entry: &Entry,
    draw: &Draw,
    inclusion_proof: Option<InclusionProof>,
    now: OffsetDateTime,
) -> EntryView {
    let drawn = draw.drawn_at.is_some();
    EntryView {
        drop_id: drop.id,
        user_id: entry.user_id,
        sku: entry.sku.clone(),
        status: entry.status(drop, drawn, &draw.counts_of(entry.sku.as_ref()), now),
        entered_at: entry.entered_at,
        rank_key: entry.ranked.filter(|_| drawn).map(|(_, key)| key),
        inclusion_proof,
        created: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{
        MockClock, MockDrawRepository, MockDropRepository, MockPurchaseLedger, MockSeedVault,
    };
    use std::time::Duration;

    const ENTRIES_CLOSE: OffsetDateTime = time::macros::datetime!(2026-12-01 09:30 UTC);

    fn draw_drop(limited: i64) -> LimitedDrop {
        LimitedDrop {
            mode: goods_domain::DropMode::Draw {
                entry_close_at: ENTRIES_CLOSE,
            },
            ..sample_drop(limited, 1)
        }
    }

    /// The drop's draw before it is drawn, its seed in the clear.
    fn undrawn(seed: DrawSeed) -> Draw {
        Draw {
            drop_id: drop_id(),
            commitment: seed.commitment(),
            secret: DrawSecret::Clear(seed),
            entries_root: None,
            drawn_at: None,
            cutoff: None,
            counts: DrawCounts::default(),
            sizes: Vec::new(),
        }
    }

    fn user(id: i64) -> UserId {
        UserId::parse(id).unwrap()
    }

    /// The ports of [`Draws`], mocked.
    struct DrawMocks {
        draws: MockDrawRepository,
        drops: MockDropRepository,
        ledger: MockPurchaseLedger,
        seeds: MockSeedVault,
    }

    impl DrawMocks {
        fn new(drop: LimitedDrop) -> Self {
            Self {
                draws: MockDrawRepository::new(),
                drops: drops_serving(drop),
                ledger: MockPurchaseLedger::new(),
                seeds: MockSeedVault::new(),
            }
        }

        fn service(self, now: OffsetDateTime) -> Draws {
            let mut clock = MockClock::new();
            clock.expect_now().return_const(now);
            let draws: Arc<dyn DrawRepository> = Arc::new(self.draws);
            let drops: Arc<dyn DropRepository> = Arc::new(self.drops);
            let tasks = Tasks::default();
            Draws {
                entries: Arc::new(Committers::new(
                    Entries(Arc::clone(&draws)),
                    crate::GroupCommit::default(),
                    tasks.clone(),
                )),
                cache: Arc::new(DropCache::new(Arc::clone(&drops))),
                draws,
                drops,
                ledger: Arc::new(self.ledger),
                seeds: Arc::new(self.seeds),
                clock: Arc::new(clock),
                buffer: WriteBuffer::new(4, Duration::from_millis(20)),
                flags: Arc::default(),
                views: Arc::default(),
                entry_trees: Arc::default(),
                promotions: Arc::default(),
                tasks,
                payment_window: PaymentWindow::default(),
            }
        }
    }

    #[tokio::test]
    async fn entries_outside_their_window_are_refused_before_any_write() {
        let before_open = OPEN - time::Duration::minutes(1);
        let mut m = DrawMocks::new(draw_drop(2));
        m.draws.expect_enter().never();
        let refused = m.service(before_open).enter(drop_id(), buyer(), None).await;
        assert!(
            matches!(
                refused,
                Err(EntryError::Refused(EntryRejection::TooEarly { .. }))
            ),
            "{refused:?}"
        );
        // After entries closed, a buyer without an entry is told so, and nothing is written.
        let mut m = DrawMocks::new(draw_drop(2));
        m.draws.expect_enter().never();
        m.draws.expect_entry().times(1).returning(|_, _| Ok(None));
        let refused = m
            .service(ENTRIES_CLOSE)
            .enter(drop_id(), buyer(), None)
            .await;
        assert!(
            matches!(
                refused,
                Err(EntryError::Refused(EntryRejection::EntriesClosed))
            ),
            "{refused:?}"
        );
        // A first-come drop takes no entries.
        let mut m = DrawMocks::new(sample_drop(2, 1));
        m.draws.expect_enter().never();
        let refused = m.service(OPEN).enter(drop_id(), buyer(), None).await;
        assert!(
            matches!(refused, Err(EntryError::Refused(EntryRejection::NotADraw))),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_due_draw_awards_by_rank_and_a_refused_winner_is_voided_for_the_next() {
        let seed = DrawSeed::from_bytes([7; 32]);
        let mut m = DrawMocks::new(draw_drop(2));
        m.draws
            .expect_draw()
            .returning(move |_| Ok(Some(undrawn(seed))));
        m.draws
            .expect_close_entries()
            .times(1)
            .returning(|_, _| Ok(()));
        m.draws.expect_entrants().returning(|_| {
            Ok([1, 2, 3]
                .map(|id| goods_domain::Entrant::without_size(user(id)))
                .to_vec())
        });
        m.draws
            .expect_publish_root()
            .times(1)
            .returning(|_, _| Ok(()));
        m.draws
            .expect_rank_entries()
            .withf(|_, ranked| ranked.len() == 3)
            .times(1)
            .returning(|_, _| Ok(()));
        // Sold 0, then 1 (buyer 1 won, buyer 2 refused), then 2: the draw stops at its units.
        let mut sold = vec![0, 1, 2].into_iter();
        m.drops
            .expect_sold_quantity()
            .times(3)
            .returning(move |_| Ok(sold.next().unwrap_or(2)));
        let mut waiting = vec![vec![user(1), user(2)], vec![user(3)]].into_iter();
        m.draws
            .expect_waiting()
            .times(2)
            .returning(move |_, _, _| Ok(waiting.next().unwrap_or_default()));
        m.ledger.expect_place_orders().times(2).returning(|batch| {
            Ok(batch
                .iter()
                .map(|order| {
                    assert_eq!(order.key, IdempotencyKey::for_draw(drop_id()));
                    if order.user_id == user(2) {
                        Err(PlaceOrderError::OrderLimitReached { limit: 1 })
                    } else {
                        Ok(Placed::Created(sample_order(
                            goods_domain::OrderStatus::Pending,
                        )))
                    }
                })
                .collect())
        });
        m.draws
            .expect_award()
            .withf(|_, _, awards, promoted, _| !promoted && awards.len() == 1)
            .times(2)
            .returning(|_, _, _, _, _| Ok(()));
        m.draws
            .expect_void()
            .withf(|_, _, u, _, _| *u == user(2))
            .times(1)
            .returning(|_, _, _, _, _| Ok(true));
        m.draws.expect_last_awarded().returning(|_, _| Ok(None));
        m.draws
            .expect_finish_draw()
            .withf(move |_, at, revealed, _| *at == ENTRIES_CLOSE && *revealed == seed)
            .times(1)
            .returning(|_, _, _, _| Ok(true));
        // Views count units from the database (no gate holds a draw drop): the count taken
        // before the draw is not served after it.
        let counts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        m.drops.expect_sold_by_size().returning({
            let counts = Arc::clone(&counts);
            move |_| {
                counts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(goods_domain::ports::whole_units(0))
            }
        });
        let draws = m.service(ENTRIES_CLOSE);
        draws.cache.counted_remaining(&draw_drop(2)).await.unwrap();
        assert!(draws.run(&draw_drop(2)).await.unwrap());
        draws.cache.counted_remaining(&draw_drop(2)).await.unwrap();
        assert_eq!(
            counts.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "counted again after the awards"
        );
    }

    #[tokio::test]
    async fn a_draw_not_yet_due_is_left_alone() {
        let mut m = DrawMocks::new(draw_drop(2));
        let seed = DrawSeed::from_bytes([7; 32]);
        m.draws
            .expect_draw()
            .returning(move |_| Ok(Some(undrawn(seed))));
        m.draws.expect_close_entries().never();
        let before = ENTRIES_CLOSE - time::Duration::seconds(1);
        assert!(!m.service(before).run(&draw_drop(2)).await.unwrap());
    }
}
