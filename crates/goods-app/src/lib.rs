//! Use cases of the limited-drop service.
//!
//! [`GoodsApp`] is the core: the ports, the drop and flag caches, the gate behind its breaker,
//! the committers and the tasks. It runs the purchase and hands out one service per feature
//! ([`Drops`], [`Draws`], [`Orders`], [`Flags`], [`Reconciler`], [`Products`], [`PaymentLog`],
//! [`Events`]), each holding only the ports it uses. This crate decides *what* happens
//! atomically (which ledger transaction a use case runs, when the gate is confirmed or given
//! back); the adapters only know *how*.

mod actor;
mod drops;
mod events;
mod healing;
mod mechanisms;
mod operations;
mod orders;
mod products;
mod purchase;
mod rate_limits;
pub mod telemetry;

pub use actor::{Actor, Role};
pub use drops::Drops;
pub use drops::draw::{DrawView, Draws, EntryError, EntryView};
pub use drops::operate::OperateDropError;
pub use drops::stats::DropStats;
pub use drops::view::{DropReadError, DropView};
pub use events::{
    EventPage, Events, ListEvents, ListEventsError, RELAY_BATCH, Relay, RelayReport, Retention,
};
pub use healing::background::{Background, RELAY_TICK};
pub use healing::{DRAW_TICK, HealReport};
pub use mechanisms::budget::Budgeted;
pub use mechanisms::buffer::WriteBuffer;
pub use mechanisms::drop_index::MIN_SCAN_INTERVAL as DROP_SCAN_INTERVAL;
pub use mechanisms::group_commit::GroupCommit;
pub use mechanisms::tasks::Tasks;
pub use operations::flags::{FlagError, Flags};
pub use operations::reconcile::{Reconciler, Reconciliation};
pub use orders::Orders;
pub use orders::lifecycle::{ListOrders, OrderPage};
pub use orders::payments::{ListPayments, ListPaymentsError, PaymentLog, PaymentPage};
pub use orders::view::GetOrderError;
pub use products::{CreateProductError, GetProductError, Products};
pub use purchase::{PurchaseCommand, PurchaseError, Purchased};
pub use rate_limits::{RateLimited, RateLimits};

use goods_domain::ports::{
    AdmissionGate, ChangeNotifier, Clock, DrawRepository, DropRepository, EventOutbox,
    EventPublisher, OrderRepository, PaymentRepository, ProductRepository, PurchaseLedger,
    SeedVault, SourceOfTruth, StatsRecorder,
};
use goods_domain::{DropId, InfraError, LimitedDrop, PaymentWindow};
use mechanisms::single_flight::{self, Shared, unshared};
use mechanisms::{breaker, group_commit};
use std::sync::Arc;
use std::time::Duration;

/// The adapters a [`GoodsApp`] runs on.
#[derive(Clone)]
pub struct Ports {
    pub products: Arc<dyn ProductRepository>,
    pub drops: Arc<dyn DropRepository>,
    pub orders: Arc<dyn OrderRepository>,
    /// Recorded payment events, read side.
    pub payments: Arc<dyn PaymentRepository>,
    /// The source of truth's transactions.
    pub ledger: Arc<dyn PurchaseLedger>,
    /// The admission gate; `None` runs the database-only strategy (`GATE=off`).
    pub gate: Option<Arc<dyn AdmissionGate>>,
    pub clock: Arc<dyn Clock>,
    pub events: Arc<dyn EventPublisher>,
    /// Alerts that must not be lost, recorded once in the source of truth.
    pub outbox: Arc<dyn EventOutbox>,
    /// Every decision's event, as the source of truth wrote it.
    pub event_log: Arc<dyn goods_domain::ports::EventLog>,
    pub stats: Arc<dyn StatsRecorder>,
    pub flags: Arc<dyn goods_domain::ports::FlagStore>,
    /// Draw drops' entries and draws.
    pub draws: Arc<dyn DrawRepository>,
    /// Where draw seeds come from.
    pub seeds: Arc<dyn SeedVault>,
}

impl Ports {
    /// The ports a source of truth implements (products, drops, orders, payments, the ledger,
    /// the outbox, the flags) all from `store`, with the others given.
    pub fn from_store(
        store: &Arc<dyn SourceOfTruth>,
        gate: Option<Arc<dyn AdmissionGate>>,
        clock: Arc<dyn Clock>,
        events: Arc<dyn EventPublisher>,
        stats: Arc<dyn StatsRecorder>,
        seeds: Arc<dyn SeedVault>,
    ) -> Self {
        Self {
            products: store.clone(),
            drops: store.clone(),
            orders: store.clone(),
            payments: store.clone(),
            ledger: store.clone(),
            outbox: store.clone(),
            event_log: store.clone(),
            flags: store.clone(),
            draws: store.clone(),
            gate,
            clock,
            events,
            stats,
            seeds,
        }
    }
}

/// How long an admitted reservation may stay in progress before it is resolved against the
/// database, unless configured (`RESERVATION_LEASE_MS`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(8);

pub use drops::cache::REMAINING_TTL;

/// The core of the application (see the crate documentation).
#[derive(Clone)]
pub struct GoodsApp {
    ports: Ports,
    buffer: WriteBuffer,
    /// The gate behind its breaker and flag.
    access: breaker::GateAccess,
    /// The drops served from memory: definitions, the ids that exist, counted units left.
    drops: Arc<drops::cache::DropCache>,
    /// Gate seedings in flight: purchases finding a drop's gate empty share one seeding.
    seedings: Arc<single_flight::SingleFlight<DropId, Shared<()>>>,
    /// The admission lease of every reservation.
    lease: time::Duration,
    /// One committer per drop, batching its admitted purchases.
    committers: Arc<group_commit::Committers>,
    /// One committer per draw drop, batching its entries.
    entries: Arc<group_commit::Committers<drops::draw::Entries>>,
    /// Each draw drop's draw and counts, reused for [`REMAINING_TTL`].
    draw_views: Arc<drops::draw::DrawViews>,
    /// Closed draws' entry sets, for inclusion proofs.
    entry_trees: Arc<drops::draw::EntryTrees>,
    /// Draw drops whose waitlist promotion is running here (see `promote_after`).
    promotions: Arc<drops::draw::Promotions>,
    healing: Arc<healing::HealState>,
    flags_cache: Arc<operations::flags::FlagCache>,
    /// Tells the other instances that a flag or a drop changed; `None`: they learn it at
    /// their next poll.
    notifier: Option<Arc<dyn ChangeNotifier>>,
    /// How long a PENDING order holds its units before it expires.
    payment_window: PaymentWindow,
    /// How long the event log is kept; `None`: for ever.
    event_retention: Option<Retention>,
    /// Every background task: settles, resyncs, notices, committers, the binary's loops.
    tasks: Tasks,
    /// `RATE_LIMIT_PER_BUYER` and `RATE_LIMIT_PER_IP`; `None`: nothing is limited.
    rate_limits: Option<rate_limits::Limiter>,
    /// Drops a seller may have not yet closed (`SELLER_MAX_ACTIVE_DROPS`); `None`: no quota.
    seller_quota: Option<u32>,
}

impl GoodsApp {
    /// An application over `ports`, admitting purchases to the database through `buffer`.
    pub fn new(ports: Ports, buffer: WriteBuffer) -> Self {
        let tasks = Tasks::default();
        let committers = Arc::new(group_commit::Committers::new(
            group_commit::Orders(Arc::clone(&ports.ledger)),
            GroupCommit::default(),
            tasks.clone(),
        ));
        let drops = Arc::new(drops::cache::DropCache::new(Arc::clone(&ports.drops)));
        let entries = Arc::new(group_commit::Committers::new(
            drops::draw::Entries(Arc::clone(&ports.draws)),
            GroupCommit::default(),
            tasks.clone(),
        ));
        let flags_cache = Arc::<operations::flags::FlagCache>::default();
        let access = breaker::GateAccess {
            gate: ports.gate.clone(),
            breaker: Arc::default(),
            flags: Arc::clone(&flags_cache),
        };
        Self {
            access,
            committers,
            entries,
            draw_views: Arc::default(),
            entry_trees: Arc::default(),
            promotions: Arc::default(),
            ports,
            buffer,
            drops,
            seedings: Arc::default(),
            lease: lease_of(DEFAULT_LEASE),
            healing: Arc::default(),
            flags_cache,
            notifier: None,
            payment_window: PaymentWindow::default(),
            event_retention: None,
            tasks,
            rate_limits: None,
            seller_quota: None,
        }
    }

    /// Sets how long the event log is kept (`EVENTS_RETENTION_S`): the healing pass deletes
    /// older events.
    #[must_use]
    pub fn with_event_retention(mut self, retention: Retention) -> Self {
        self.event_retention = Some(retention);
        self
    }

    /// Sets how many drops a seller may have not yet closed (`SELLER_MAX_ACTIVE_DROPS`); one more
    /// is refused `QuotaExceeded`.
    #[must_use]
    pub fn with_seller_quota(mut self, max_active_drops: u32) -> Self {
        self.seller_quota = Some(max_active_drops);
        self
    }

    /// Sets how long a PENDING order holds its units before it expires (`PAYMENT_WINDOW_S`).
    #[must_use]
    pub fn with_payment_window(mut self, window: PaymentWindow) -> Self {
        self.payment_window = window;
        self
    }

    /// How long a PENDING order holds its units (the order view's `expiresAt`).
    pub fn payment_window(&self) -> PaymentWindow {
        self.payment_window
    }

    /// Announces every flag change and drop operation through `notifier` once it is committed,
    /// so the fleet re-reads them at once rather than at its next poll.
    #[must_use]
    pub fn with_change_notifier(mut self, notifier: Arc<dyn ChangeNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Announces a committed change of a flag or a drop, in the background: the caller's
    /// answer does not wait for it, and a lost notice only delays the other instances until
    /// their next poll.
    fn announce_change(&self) {
        if let Some(notifier) = self.notifier.clone() {
            self.tasks.spawn(async move {
                if let Err(error) = notifier.changed().await {
                    tracing::warn!(error = %error, "change notice not sent; the other instances poll");
                }
            });
        }
    }

    /// Sets the admission lease: how long a reservation may stay in progress before it is
    /// resolved against the database. It should exceed the write-slot wait plus the
    /// transaction limit, or slow purchases are refused (503) for nothing; it never risks an
    /// oversell either way, since the ledger refuses to commit after it.
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease_of(lease);
        self
    }

    /// Sets how each drop's admitted purchases are batched into transactions.
    #[must_use]
    pub fn with_group_commit(mut self, config: GroupCommit) -> Self {
        self.committers = Arc::new(group_commit::Committers::new(
            group_commit::Orders(Arc::clone(&self.ports.ledger)),
            config,
            self.tasks.clone(),
        ));
        self.entries = Arc::new(group_commit::Committers::new(
            drops::draw::Entries(Arc::clone(&self.ports.draws)),
            config,
            self.tasks.clone(),
        ));
        self
    }

    /// The tracker every background task of this application runs on.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// Stops this application once no request is in flight any more (the HTTP server has
    /// drained): each drop's committer commits what it holds, answers its buyers and ends; the
    /// loops stop after the pass under way; settles, resyncs and notices finish. Waits up to
    /// `within`; `false` when some task was still running then.
    pub async fn shutdown(&self, within: Duration) -> bool {
        self.committers.close();
        self.entries.close();
        self.tasks.shutdown(within).await
    }

    /// Free database write slots right now (a saturation gauge).
    pub fn write_slots_available(&self) -> usize {
        self.buffer.available()
    }

    /// Sets the gauges that are read rather than counted (buffer saturation, the gate's
    /// breaker), for a metrics scrape.
    pub fn record_gauges(&self) {
        let available = self.buffer.available();
        metrics::gauge!(telemetry::WRITE_SLOTS_AVAILABLE).set(available as f64);
        metrics::gauge!(telemetry::WRITE_SLOTS_IN_USE)
            .set(self.buffer.permits().saturating_sub(available) as f64);
        metrics::gauge!(telemetry::WRITE_WAITERS).set(self.buffer.waiters() as f64);
        let degraded = self.ports.gate.is_some() && self.access.breaker.is_open();
        metrics::gauge!(telemetry::GATE_DEGRADED).set(if degraded { 1.0 } else { 0.0 });
    }

    /// The ports, for the health check and the reconciliation task.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// Products and their stock (`/products`).
    pub fn products(&self) -> Products {
        Products::new(Arc::clone(&self.ports.products))
    }

    /// The recorded payment events (`/admin/payments`).
    pub fn payment_log(&self) -> PaymentLog {
        PaymentLog::new(Arc::clone(&self.ports.payments))
    }

    /// The event log's reader (`/admin/events`).
    pub fn events(&self) -> Events {
        Events::new(Arc::clone(&self.ports.event_log))
    }

    /// Re-reads the flags and every cached drop, and scans for drops created through other
    /// instances (the binary runs it every `DROP_REFRESH_MS`).
    pub async fn refresh(&self) -> Result<(), InfraError> {
        self.flags().refresh().await?;
        self.drops.refresh().await.map(drop)
    }

    /// Whether the limited-drop feature is on (`limited-drop.enabled`); off, every drop route
    /// answers as if there were no drops.
    fn drops_on(&self) -> bool {
        self.flags_cache.drops_on()
    }

    /// The gate, if it may be asked now (see [`breaker::GateAccess`]).
    fn gate(&self) -> Option<&Arc<dyn goods_domain::ports::AdmissionGate>> {
        self.access.usable()
    }

    /// Units left: the gate's counter when it has one, else the database's truth.
    async fn remaining(&self, drop: &LimitedDrop) -> Result<u32, InfraError> {
        match self.access.remaining(drop).await {
            Some(remaining) => Ok(remaining),
            None => self.drops.counted_remaining(drop).await,
        }
    }
}

fn lease_of(lease: Duration) -> time::Duration {
    time::Duration::try_from(lease).unwrap_or(time::Duration::MAX)
}

#[cfg(test)]
pub(crate) mod test_support;
