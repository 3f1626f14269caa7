//! Use cases of the limited-drop service.
//!
//! [`GoodsApp`] is the core: ports, drop and flag caches, the gate behind its breaker, tasks.
//! It holds the purchase service (built once) and hands out one service per other feature
//! ([`Drops`], [`Draws`], [`Orders`], [`Flags`], [`Reconciler`], [`Products`], [`PaymentLog`],
//! [`Events`]). This crate decides *what* happens atomically; the adapters know *how*.

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
mod webhooks;

pub use actor::{Actor, Role};
pub use drops::Drops;
pub use drops::draw::{DrawView, Draws, EntryError, EntryView};
pub use drops::operate::OperateDropError;
pub use drops::stats::{DropStats, SizeStats};
pub use drops::view::{DropReadError, DropView, SizeView};
pub use events::{
    EventPage, Events, ListEvents, ListEventsError, RELAY_BATCH, Relay, RelayReport, Retention,
};
pub use healing::background::{Background, Delivering, RELAY_TICK};
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
pub use webhooks::{
    Deliverer, DeliveryPage, EndpointInput, EndpointPatch, RoundReport, WebhookError,
    WebhookSettings, Webhooks,
};

use goods_domain::ports::{
    AdmissionGate, ChangeNotifier, Clock, DrawRepository, DropRepository, EventOutbox,
    EventPublisher, OrderRepository, PaymentRepository, ProductRepository, PurchaseLedger,
    SeedVault, SourceOfTruth, StatsRecorder,
};
use goods_domain::{DropId, InfraError, LimitedDrop, PaymentWindow};
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
    /// The gate behind its breaker and flag.
    access: breaker::GateAccess,
    /// The drops served from memory: definitions, the ids that exist, counted units left.
    drops: Arc<drops::cache::DropCache>,
    /// The purchase, with the write buffer and each drop's committer.
    purchases: purchase::Purchases,
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
    /// Sellers' webhook endpoints; `None`: not offered here.
    webhooks: Option<Webhooks>,
}

impl GoodsApp {
    /// An application over `ports`, admitting purchases to the database through `buffer`.
    pub fn new(ports: Ports, buffer: WriteBuffer) -> Self {
        let tasks = Tasks::default();
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
        let purchases = purchase::Purchases {
            drops: Arc::clone(&drops),
            access: access.clone(),
            clock: Arc::clone(&ports.clock),
            orders: Arc::clone(&ports.orders),
            ledger: Arc::clone(&ports.ledger),
            drop_store: Arc::clone(&ports.drops),
            stats: Arc::clone(&ports.stats),
            events: Arc::clone(&ports.events),
            buffer,
            committers: Arc::new(group_commit::Committers::new(
                group_commit::Orders(Arc::clone(&ports.ledger)),
                GroupCommit::default(),
                tasks.clone(),
            )),
            seedings: Arc::default(),
            tasks: tasks.clone(),
            lease: lease_of(DEFAULT_LEASE),
            payment_window: PaymentWindow::default(),
            fleet_bucket: None,
        };
        Self {
            access,
            purchases,
            entries,
            draw_views: Arc::default(),
            entry_trees: Arc::default(),
            promotions: Arc::default(),
            ports,
            drops,
            healing: Arc::default(),
            flags_cache,
            notifier: None,
            payment_window: PaymentWindow::default(),
            event_retention: None,
            tasks,
            rate_limits: None,
            seller_quota: None,
            webhooks: None,
        }
    }

    /// Sets how long the event log is kept (`EVENTS_RETENTION_S`): the healing pass deletes
    /// older events.
    #[must_use]
    pub fn with_event_retention(mut self, retention: Retention) -> Self {
        self.event_retention = Some(retention);
        self
    }

    /// Offers sellers' webhook endpoints (`/webhook-endpoints`).
    #[must_use]
    pub fn with_webhooks(mut self, webhooks: Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Sellers' webhook endpoints, when offered.
    pub fn webhooks(&self) -> Option<&Webhooks> {
        self.webhooks.as_ref()
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
        self.purchases.payment_window = window;
        self
    }

    /// How long a PENDING order holds its units (the order view's `expiresAt`).
    pub fn payment_window(&self) -> PaymentWindow {
        self.payment_window
    }

    /// The label of `order`'s size (its variant's, from the drop held in memory); `None` for
    /// an order of a drop without sizes, or when the drop cannot be read now (the view then
    /// goes without it rather than fail).
    pub async fn size_label(
        &self,
        order: &goods_domain::GoodsOrder,
    ) -> Option<goods_domain::VariantLabel> {
        let sku = order.sku.as_ref()?;
        let drop = self.drops.load(order.drop_id).await.ok().flatten()?;
        drop.sizes.get(Some(sku))?.label.clone()
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
        self.purchases.lease = lease_of(lease);
        self
    }

    /// Sets how each drop's admitted purchases are batched into transactions.
    #[must_use]
    pub fn with_group_commit(mut self, config: GroupCommit) -> Self {
        self.purchases.committers = Arc::new(group_commit::Committers::new(
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

    /// Stops once the HTTP server has drained: committers commit what they hold, loops stop
    /// after their pass, settles and notices finish. `false` when a task outlived `within`.
    pub async fn shutdown(&self, within: Duration) -> bool {
        self.purchases.committers.close();
        self.entries.close();
        self.tasks.shutdown(within).await
    }

    /// Free database write slots right now (a saturation gauge).
    pub fn write_slots_available(&self) -> usize {
        self.purchases.buffer.available()
    }

    /// Sets the gauges that are read rather than counted (buffer saturation, the gate's
    /// breaker), for a metrics scrape.
    pub fn record_gauges(&self) {
        let available = self.purchases.buffer.available();
        metrics::gauge!(telemetry::WRITE_SLOTS_AVAILABLE).set(available as f64);
        metrics::gauge!(telemetry::WRITE_SLOTS_IN_USE)
            .set(self.purchases.buffer.permits().saturating_sub(available) as f64);
        metrics::gauge!(telemetry::WRITE_WAITERS).set(self.purchases.buffer.waiters() as f64);
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

    /// The gate, if it may be asked now (see [`breaker::GateAccess`]).
    fn gate(&self) -> Option<&Arc<dyn goods_domain::ports::AdmissionGate>> {
        self.access.usable()
    }

    /// Units left per size: the gate's counters when it has them, else the database's truth.
    async fn remaining(
        &self,
        drop: &LimitedDrop,
    ) -> Result<goods_domain::batch::FreeUnits, InfraError> {
        match self.access.remaining(drop).await {
            Some(remaining) => Ok(remaining),
            None => self.drops.counted_remaining(drop).await,
        }
    }
}

impl GoodsApp {
    /// Buys units of a drop (see [`PurchaseCommand`]).
    pub async fn purchase(&self, cmd: PurchaseCommand) -> Result<Purchased, PurchaseError> {
        self.purchases.purchase(self, cmd).await
    }
}

#[async_trait::async_trait]
impl purchase::PurchaseHooks for GoodsApp {
    async fn as_it_is_now(
        &self,
        order: goods_domain::GoodsOrder,
    ) -> Result<goods_domain::GoodsOrder, InfraError> {
        self.orders().settle(order).await
    }

    async fn gate_bypassed(&self, drop: DropId, failing: bool) {
        self.healing.mark_dirty(drop);
        if failing {
            self.gate_event(goods_domain::Fact::GateDegraded { drop })
                .await;
        }
    }

    fn gate_is_back(&self) {
        GoodsApp::gate_is_back(self);
    }

    fn resync_soon(&self, drop: LimitedDrop) {
        GoodsApp::resync_soon(self, drop);
    }
}

fn lease_of(lease: Duration) -> time::Duration {
    time::Duration::try_from(lease).unwrap_or(time::Duration::MAX)
}

#[cfg(test)]
mod hook_tests {
    //! The core's [`purchase::PurchaseHooks`]: what a purchase's hook sets off, through the
    //! whole application.
    use crate::PurchaseError;
    use crate::test_support::*;
    use goods_domain::InfraError;
    use goods_domain::ports::{MockAdmissionGate, PlaceOrderError, ReserveOutcome};

    #[tokio::test]
    async fn a_database_sold_out_after_the_gate_admitted_resyncs_the_gate() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .returning(|_| Ok(vec![Err(PlaceOrderError::SoldOut { remaining: 0 })]));
        m.drops
            .expect_gate_seed()
            .times(1)
            .returning(|drop| Ok(sold_out_seed(drop)));
        let (resynced, mut done) = tokio::sync::mpsc::unbounded_channel();
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(1).returning(|_| Ok(()));
        gate.expect_resync()
            .withf(|seed| seed.remaining == goods_domain::ports::whole_units(0))
            .times(1)
            .returning(move |_| {
                resynced.send(()).unwrap();
                Ok(())
            });
        let err = m.app(Some(gate)).purchase(cmd(1)).await.unwrap_err();
        assert!(matches!(err, PurchaseError::SoldOut { .. }));
        done.recv().await.unwrap();
    }

    #[tokio::test]
    async fn a_failing_gate_writes_the_drops_gate_degraded_once_per_outage() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().returning(|_| created_one());
        m.events.expect_publish().returning(|_| Ok(()));
        m.event_log
            .expect_record_gate()
            .withf(|fact, _| *fact == goods_domain::Fact::GateDegraded { drop: drop_id() })
            .times(1)
            .returning(|_, _| Ok(true));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_reserve()
            .returning(|_| Err(InfraError::msg("connection refused")));
        gate.expect_confirm()
            .returning(|_, _| Err(InfraError::msg("connection refused")));
        let app = m.app(Some(gate));
        app.purchase(cmd(1)).await.unwrap();
        app.purchase(cmd(1)).await.unwrap();
    }
}

#[cfg(test)]
pub(crate) mod test_support;
