//! Draw drops: buyers enter during `[openAt, entryCloseAt)`; once entries close, the instance
//! leading the background work draws within one healing pass: it closes the entries, ranks
//! them by goods-domain's rule, gives the winners their orders in batches, and reveals the seed.
//! A unit a winner gives back (cancel, expiry) goes to the first waitlisted entry until
//! `closeAt`.
//!
//! Every step can be run again by another instance after a crash without awarding twice: the
//! ranking is a function of the seed and the entrants, a winner's order has the idempotency key
//! `draw-{dropId}` (one order per buyer per draw, replayed if it exists), an entry keeps the
//! first order it got, and the ledger's conditional updates never let the drop's orders exceed
//! its units.

use crate::mechanisms::group_commit::Sink;
use crate::{Actor, GoodsApp, REMAINING_TTL, telemetry};
use async_trait::async_trait;
use goods_domain::draw::{EntryRejection, check_entry, draw_due, promotes};
use goods_domain::ports::{
    DrawRepository, EnterError, Entered, NewEntry, PlaceOrder, PlaceOrderError, Placed,
};
use goods_domain::{
    DrawCommitment, DrawCounts, DrawSeed, DropId, Entry, EntryStatus, GoodsOrder, IdempotencyKey,
    InfraError, LimitedDrop, OrderId, Quantity, RankKey, UserId,
};
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

    async fn commit(&self, batch: &[EntryItem]) -> Result<Vec<Self::Answer>, InfraError> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        let entries: Vec<NewEntry> = batch.iter().map(|i| i.entry).collect();
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
    pub status: EntryStatus,
    pub entered_at: OffsetDateTime,
    /// Its rank key, once the draw is done (the buyer checks it against the revealed seed).
    pub rank_key: Option<RankKey>,
    /// Its order came from the waitlist (a winner's unit given back), not from the draw: its
    /// rank key is past the winning cutoff.
    pub promoted: bool,
    /// This request created it (202); `false`: it existed (200).
    pub created: bool,
}

/// What a draw drop's view adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawView {
    pub entry_close_at: OffsetDateTime,
    /// `SHA-256(seed)`, published from creation.
    pub commitment: DrawCommitment,
    /// The seed, once drawn.
    pub seed: Option<DrawSeed>,
    pub drawn_at: Option<OffsetDateTime>,
    /// The largest winning rank key, once drawn.
    pub cutoff: Option<RankKey>,
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

/// Why an entry was not recorded or read. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// No such drop.
    #[error("drop not found")]
    DropNotFound,
    /// A FIRST_COME drop.
    #[error("the drop is not a draw")]
    NotADraw,
    /// Before `openAt`.
    #[error("the drop opens at {open_at}")]
    TooEarly { open_at: OffsetDateTime },
    /// Paused by its seller or an admin.
    #[error("the drop is paused")]
    Paused,
    /// From `entryCloseAt` on (and the buyer has no entry).
    #[error("entries are closed")]
    EntriesClosed,
    /// The buyer has no entry in the drop.
    #[error("no entry")]
    EntryNotFound,
    /// No database write slot within the wait bound.
    #[error("throttled")]
    Throttled,
    /// The database did not answer within its bound.
    #[error("service unavailable")]
    Unavailable,
    /// A store failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<InfraError> for EntryError {
    fn from(error: InfraError) -> Self {
        if error.is_unavailable() {
            Self::Unavailable
        } else {
            Self::Unexpected(error.into())
        }
    }
}

impl EntryError {
    fn label(&self) -> &'static str {
        match self {
            Self::DropNotFound => "drop_not_found",
            Self::NotADraw => "not_a_draw",
            Self::TooEarly { .. } => "too_early",
            Self::Paused => "paused",
            Self::EntriesClosed => "entries_closed",
            Self::EntryNotFound => "entry_not_found",
            Self::Throttled => "throttled",
            Self::Unavailable => "unavailable",
            Self::Unexpected(_) => "unexpected",
        }
    }
}

/// The order a draw gives `user`: one unit, its window starting `now`, keyed `draw-{dropId}`
/// so that awarding it again (a leader that died mid-draw, two promotions of one entry) replays
/// it instead of creating another.
fn award_order(
    drop: &LimitedDrop,
    user: UserId,
    now: OffsetDateTime,
) -> Result<PlaceOrder, InfraError> {
    let key = IdempotencyKey::parse(&format!("draw-{}", drop.id))
        .map_err(|e| InfraError::new("draw key", e))?;
    Ok(PlaceOrder {
        drop_id: drop.id,
        product_id: drop.product_id,
        limited_quantity: drop.limited_quantity,
        per_user_limit: drop.per_user_limit,
        price: drop.price,
        user_id: user,
        quantity: Quantity::ONE,
        key,
        now,
        deadline: None,
    })
}

impl GoodsApp {
    /// Enters `actor` in a draw drop: 202 for a new entry, the existing entry for a buyer who
    /// entered before (also after entries closed).
    ///
    /// # Errors
    /// [`EntryError`] naming why no entry was recorded.
    #[tracing::instrument(skip_all, fields(drop.id = %id, user.id = %actor.user_id, outcome))]
    pub async fn enter_draw(&self, id: DropId, actor: Actor) -> Result<EntryView, EntryError> {
        let result = self.enter_draw_inner(id, actor).await;
        let outcome = match &result {
            Ok(view) if view.created => "entered",
            Ok(_) => "repeated",
            Err(error) => error.label(),
        };
        tracing::Span::current().record("outcome", outcome);
        metrics::counter!(telemetry::DRAW_ENTRIES, "outcome" => outcome).increment(1);
        result
    }

    async fn enter_draw_inner(&self, id: DropId, actor: Actor) -> Result<EntryView, EntryError> {
        let drop = self.draw_drop(id).await?;
        let now = self.ports.clock.now();
        match check_entry(&drop, now) {
            Ok(()) => {}
            Err(EntryRejection::NotADraw) => return Err(EntryError::NotADraw),
            Err(EntryRejection::TooEarly { open_at }) => {
                return Err(EntryError::TooEarly { open_at });
            }
            Err(EntryRejection::Paused) => return Err(EntryError::Paused),
            Err(EntryRejection::EntriesClosed) => {
                // A buyer who entered still gets their entry; only closed drops pay this read.
                return self
                    .entry_view(&drop, actor.user_id, now)
                    .await?
                    .ok_or(EntryError::EntriesClosed);
            }
        }
        let Some(_permit) = self.buffer.acquire().await else {
            return Err(EntryError::Throttled);
        };
        let item = EntryItem {
            drop: drop.id,
            entry: NewEntry {
                user_id: actor.user_id,
                at: now,
            },
        };
        match self.entries.place(item).await {
            Ok(entered) => {
                if entered.created {
                    self.draw_views.forget(drop.id);
                }
                Ok(EntryView {
                    drop_id: drop.id,
                    user_id: actor.user_id,
                    status: EntryStatus::Entered,
                    entered_at: entered.entry.entered_at,
                    rank_key: None,
                    promoted: false,
                    created: entered.created,
                })
            }
            // The draw began between the check and the commit.
            Err(EnterError::EntriesClosed) => self
                .entry_view(&drop, actor.user_id, now)
                .await?
                .ok_or(EntryError::EntriesClosed),
            Err(EnterError::Infra(error)) => Err(error.into()),
        }
    }

    /// `actor`'s entry in a draw drop, with its status now.
    ///
    /// # Errors
    /// [`EntryError::EntryNotFound`] without one; `DropNotFound`, `NotADraw`, or the store's
    /// failure.
    #[tracing::instrument(skip_all, fields(drop.id = %id, user.id = %actor.user_id))]
    pub async fn my_entry(&self, id: DropId, actor: Actor) -> Result<EntryView, EntryError> {
        let drop = self.draw_drop(id).await?;
        if !drop.mode.is_draw() {
            return Err(EntryError::NotADraw);
        }
        self.entry_view(&drop, actor.user_id, self.ports.clock.now())
            .await?
            .ok_or(EntryError::EntryNotFound)
    }

    async fn draw_drop(&self, id: DropId) -> Result<LimitedDrop, EntryError> {
        if !self.drops_on() {
            return Err(EntryError::DropNotFound);
        }
        self.drops.load(id).await?.ok_or(EntryError::DropNotFound)
    }

    async fn entry_view(
        &self,
        drop: &LimitedDrop,
        user: UserId,
        now: OffsetDateTime,
    ) -> Result<Option<EntryView>, InfraError> {
        let Some((entry, ahead)) = self.ports.draws.entry(drop.id, user).await? else {
            return Ok(None);
        };
        let drawn = match entry.ranked {
            Some(_) => self
                .ports
                .draws
                .draw(drop.id)
                .await?
                .is_some_and(|d| d.drawn_at.is_some()),
            None => false,
        };
        Ok(Some(view_of(drop, &entry, drawn, ahead, now)))
    }

    /// What a draw drop's view adds (its draw and counts), reused for [`REMAINING_TTL`];
    /// `None` for a first-come drop.
    pub(crate) async fn draw_view(
        &self,
        drop: &LimitedDrop,
    ) -> Result<Option<DrawView>, InfraError> {
        let Some(entry_close_at) = drop.mode.entry_close_at() else {
            return Ok(None);
        };
        if let Some(view) = self.draw_views.get(drop.id) {
            return Ok(Some(view));
        }
        let draw = self
            .ports
            .draws
            .draw(drop.id)
            .await?
            .ok_or_else(|| InfraError::msg(format!("draw drop {} has no draw", drop.id)))?;
        let counts = self.ports.draws.draw_counts(drop.id).await?;
        let view = DrawView {
            entry_close_at,
            commitment: draw.commitment,
            seed: draw.revealed_seed(),
            drawn_at: draw.drawn_at,
            cutoff: draw.cutoff,
            counts,
        };
        self.draw_views.put(drop.id, view.clone());
        Ok(Some(view))
    }

    /// Draws `drop` if its draw is due (entries closed, not drawn): closes the entries, ranks
    /// them, awards the winners their orders, and reveals the seed with the cutoff. Safe to
    /// run again after a crash at any step, and on two instances at once. `true` when this
    /// call finished the draw.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails; the next healing pass goes on from where it was.
    #[tracing::instrument(skip_all, fields(drop.id = %drop.id))]
    pub async fn run_draw(&self, drop: &LimitedDrop) -> Result<bool, InfraError> {
        let now = self.ports.clock.now();
        let Some(draw) = self.ports.draws.draw(drop.id).await? else {
            return Ok(false);
        };
        if !draw_due(drop, draw.drawn_at.is_some(), now) {
            return Ok(false);
        }
        let started = Instant::now();
        let limited = drop.limited_quantity.get();
        let cutoff = self
            .ports
            .draws
            .rank_entries(drop.id, &draw.seed, limited, now)
            .await?;
        let awarded = self.award(drop, 0, Some(limited), false).await?;
        let finished = self.ports.draws.finish_draw(drop.id, now, cutoff).await?;
        self.draw_views.forget(drop.id);
        if finished {
            metrics::histogram!(telemetry::DRAW_DURATION).record(started.elapsed().as_secs_f64());
            tracing::info!(awarded, "draw done, seed revealed");
        }
        Ok(finished)
    }

    /// Gives `drop`'s free units to its waitlist in rank order, while it is drawn and on sale.
    /// Run after a winner's order is cancelled or expires, and by every healing pass (so a
    /// promotion lost to a crash happens on the next one). Returns the promotions this call
    /// made.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    pub async fn promote_waitlist(&self, drop: &LimitedDrop) -> Result<u32, InfraError> {
        let now = self.ports.clock.now();
        let drawn = self
            .ports
            .draws
            .draw(drop.id)
            .await?
            .is_some_and(|d| d.drawn_at.is_some());
        if !promotes(drop, drawn, now) {
            return Ok(0);
        }
        let limited = drop.limited_quantity.get();
        let mut promoted = 0;
        loop {
            let sold = self.ports.drops.sold_quantity(drop.id).await?;
            let free = limited.saturating_sub(sold);
            if free == 0 {
                break;
            }
            let made = self.award(drop, limited, None, true).await?;
            if made == 0 {
                break;
            }
            promoted += made;
        }
        if promoted > 0 {
            self.draw_views.forget(drop.id);
            self.drops.units_changed(drop.id);
        }
        Ok(promoted)
    }

    /// Awards entries ranked in `(after, up_to]` without an order, lowest rank first, a batch
    /// at a time, until none is left or the drop has no free unit; the orders this call
    /// created. Each batch's orders start their payment window when the batch is placed (the
    /// clock is read per batch: a promotion that runs on while units keep coming back must not
    /// give new orders a window that has already passed).
    async fn award(
        &self,
        drop: &LimitedDrop,
        after: u32,
        up_to: Option<u32>,
        promoted: bool,
    ) -> Result<u32, InfraError> {
        let mut created = 0;
        loop {
            let now = self.ports.clock.now();
            let batch = match up_to {
                Some(_) => AWARD_BATCH,
                // Promotions: no more than the units free now.
                None => AWARD_BATCH.min(
                    drop.limited_quantity
                        .get()
                        .saturating_sub(self.ports.drops.sold_quantity(drop.id).await?),
                ),
            };
            if batch == 0 {
                return Ok(created);
            }
            let users = self
                .ports
                .draws
                .unawarded(drop.id, after, up_to, batch)
                .await?;
            if users.is_empty() {
                return Ok(created);
            }
            let orders = users
                .iter()
                .map(|&user| award_order(drop, user, now))
                .collect::<Result<Vec<_>, _>>()?;
            let placements = self.ports.ledger.place_orders(&orders).await?;
            let mut awards: Vec<(UserId, OrderId)> = Vec::with_capacity(users.len());
            let mut refused = false;
            let mut made = 0_u32;
            for (user, placement) in users.iter().zip(placements) {
                match placement {
                    Ok(Placed::Created(order)) => {
                        made += 1;
                        awards.push((*user, order.id));
                    }
                    Ok(Placed::Replayed(order)) => awards.push((*user, order.id)),
                    // No free unit, or the drop closed: nobody further down gets one either.
                    Err(PlaceOrderError::SoldOut { .. } | PlaceOrderError::Closed) => {
                        refused = true;
                    }
                    Err(PlaceOrderError::Infra(error)) => return Err(error),
                    Err(other) => {
                        return Err(InfraError::msg(format!(
                            "draw award for user {user} refused: {other}"
                        )));
                    }
                }
            }
            self.ports.draws.award(drop.id, &awards, promoted).await?;
            let by = if promoted { "promotion" } else { "draw" };
            metrics::counter!(telemetry::DRAW_AWARDS, "by" => by).increment(made.into());
            created += made;
            if refused {
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
        let app = self.clone();
        self.tasks.spawn(async move {
            loop {
                let result = match app.drops.load(drop).await {
                    Ok(Some(drop)) => app.promote_waitlist(&drop).await.map(|_| ()),
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                };
                if let Err(error) = result {
                    // The next healing pass promotes what this one did not.
                    tracing::warn!(drop.id = %drop, error = %error, "waitlist promotion failed");
                }
                if app.promotions.finish(drop) {
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
    drawn: bool,
    ahead: u32,
    now: OffsetDateTime,
) -> EntryView {
    EntryView {
        drop_id: drop.id,
        user_id: entry.user_id,
        status: entry.status(drop, drawn, ahead, now),
        entered_at: entry.entered_at,
        rank_key: entry.ranked.filter(|_| drawn).map(|(_, key)| key),
        promoted: entry.promoted,
        created: false,
    }
}
