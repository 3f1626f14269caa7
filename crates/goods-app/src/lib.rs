//! Use cases of the limited-drop service.
//!
//! [`GoodsApp`] holds the ports and runs each use case; every use case lives in its own module
//! with its own error type. This crate decides *what* happens atomically (which ledger
//! transaction a use case runs, when the gate is confirmed or given back); the adapters only
//! know *how*.

mod actor;
mod breaker;
mod budget;
mod buffer;
mod cancel_order;
mod catalog;
mod create_drop;
mod drop_index;
mod flags;
mod get_drop;
mod get_order;
mod group_commit;
mod heal;
mod operate_drop;
mod order_lifecycle;
mod payments;
mod purchase;
mod reconcile;
mod single_flight;
mod stats;
pub mod telemetry;

pub use actor::{Actor, Role};
pub use budget::Budgeted;
pub use buffer::WriteBuffer;
pub use catalog::{CreateProductError, GetProductError};
pub use drop_index::MIN_SCAN_INTERVAL as DROP_SCAN_INTERVAL;
pub use flags::FlagError;
pub use get_drop::{DropReadError, DropView};
pub use get_order::GetOrderError;
pub use group_commit::GroupCommit;
pub use heal::HealReport;
pub use operate_drop::OperateDropError;
pub use order_lifecycle::{ListOrders, OrderPage};
pub use payments::{ListPayments, ListPaymentsError, PaymentPage};
pub use purchase::{PurchaseCommand, PurchaseError, Purchased};
pub use reconcile::Reconciliation;
pub use stats::DropStats;

use goods_domain::ports::{
    AdmissionGate, ChangeNotifier, Clock, DropRepository, EventOutbox, EventPublisher,
    OrderRepository, PaymentRepository, ProductRepository, PurchaseLedger, StatsRecorder,
};
use goods_domain::{DropId, InfraError, LimitedDrop, PaymentWindow, ProductId};
use single_flight::{Shared, unshared};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The adapters a [`GoodsApp`] runs on.
#[derive(Clone)]
pub struct Ports {
    /// Products and stock.
    pub products: Arc<dyn ProductRepository>,
    /// Limited drops.
    pub drops: Arc<dyn DropRepository>,
    /// Orders, read side.
    pub orders: Arc<dyn OrderRepository>,
    /// Recorded payment events, read side.
    pub payments: Arc<dyn PaymentRepository>,
    /// The source of truth's transactions.
    pub ledger: Arc<dyn PurchaseLedger>,
    /// The admission gate; `None` runs the database-only strategy (`GATE=off`).
    pub gate: Option<Arc<dyn AdmissionGate>>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Alerts.
    pub events: Arc<dyn EventPublisher>,
    /// Alerts that must not be lost, recorded once in the source of truth.
    pub outbox: Arc<dyn EventOutbox>,
    /// Outcome counters.
    pub stats: Arc<dyn StatsRecorder>,
    /// Runtime feature flags.
    pub flags: Arc<dyn goods_domain::ports::FlagStore>,
}

/// How long an admitted reservation may stay in progress before it is resolved against the
/// database, unless configured (`RESERVATION_LEASE_MS`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(8);

/// How long a drop's units left, counted in the database because no gate answers, serve views
/// before they are counted again (purchases and cancels through this instance count again at
/// once; through another, the view lags this much at most).
pub const REMAINING_TTL: Duration = Duration::from_millis(500);

/// The application: ports, the write buffer and a cache of drop definitions.
#[derive(Clone)]
pub struct GoodsApp {
    ports: Ports,
    buffer: WriteBuffer,
    breaker: Arc<breaker::GateBreaker>,
    /// Drop definitions, so the hot path reads a drop without a database round trip. A drop
    /// changes only by a pause, a resume or a close: this instance's cache takes them at once,
    /// the other instances' at their next [`GoodsApp::refresh_drops`] (on a change
    /// notice, or the poll). The healing pass forgets
    /// drops an hour after they close.
    drops: Arc<RwLock<HashMap<DropId, LimitedDrop>>>,
    /// Cache misses in flight: the buyers missing one drop at once share one read.
    drop_loads: Arc<single_flight::SingleFlight<DropId, Shared<Option<LimitedDrop>>>>,
    /// Which drop ids exist: a request for one that does not costs no database read.
    index: Arc<drop_index::DropIndex>,
    /// Units left of drops counted in the database (no gate to ask), reused for
    /// [`REMAINING_TTL`] unless this instance changed them, so views of a drop cost the
    /// database at most one count per interval.
    remaining_counts: Arc<RwLock<HashMap<DropId, (std::time::Instant, u32)>>>,
    /// Counts in flight: views missing one drop at once share one count.
    remaining_loads: Arc<single_flight::SingleFlight<DropId, Shared<u32>>>,
    /// Gate seedings in flight: purchases finding a drop's gate empty share one seeding.
    seedings: Arc<single_flight::SingleFlight<DropId, Shared<()>>>,
    /// The admission lease of every reservation.
    lease: time::Duration,
    /// One committer per drop, batching its admitted purchases.
    committers: Arc<group_commit::Committers>,
    healing: Arc<heal::HealState>,
    flags_cache: Arc<flags::FlagCache>,
    /// Bumped by every drop operation made through this instance (see `refresh_drops`).
    drops_epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Tells the other instances that a flag or a drop changed; `None`: they learn it at
    /// their next poll.
    notifier: Option<Arc<dyn ChangeNotifier>>,
    /// How long a PENDING order holds its units before it expires.
    payment_window: PaymentWindow,
}

impl GoodsApp {
    /// An application over `ports`, admitting purchases to the database through `buffer`.
    pub fn new(ports: Ports, buffer: WriteBuffer) -> Self {
        let committers = Arc::new(group_commit::Committers::new(
            Arc::clone(&ports.ledger),
            GroupCommit::default(),
        ));
        Self {
            committers,
            ports,
            buffer,
            breaker: Arc::default(),
            drops: Arc::default(),
            drop_loads: Arc::default(),
            index: Arc::default(),
            remaining_counts: Arc::default(),
            remaining_loads: Arc::default(),
            seedings: Arc::default(),
            lease: lease_of(DEFAULT_LEASE),
            healing: Arc::default(),
            flags_cache: Arc::default(),
            drops_epoch: Arc::default(),
            notifier: None,
            payment_window: PaymentWindow::default(),
        }
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
            tokio::spawn(async move {
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
            Arc::clone(&self.ports.ledger),
            config,
        ));
        self
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
        let degraded = self.ports.gate.is_some() && self.breaker.is_open();
        metrics::gauge!(telemetry::GATE_DEGRADED).set(if degraded { 1.0 } else { 0.0 });
    }

    /// The ports, for the health check and the reconciliation task.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// Forgets cached drops that closed more than `grace` before `now` (the healing pass calls
    /// it), so the cache holds the drops that can still be bought, not every drop ever read.
    pub(crate) fn prune_closed_drops(&self, now: time::OffsetDateTime, grace: time::Duration) {
        if let Ok(mut cache) = self.drops.write() {
            cache.retain(|_, drop| drop.ends_at().saturating_add(grace) > now);
        }
        if let Ok(mut counts) = self.remaining_counts.write() {
            counts.retain(|_, (at, _)| at.elapsed() < REMAINING_TTL);
        }
    }

    /// Puts a drop's stored state in the cache, after an operation made through this
    /// instance.
    fn cache_drop(&self, drop: LimitedDrop) {
        self.index.add(drop.id);
        self.units_changed(drop.id);
        if let Ok(mut cache) = self.drops.write() {
            self.drops_epoch
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            cache.insert(drop.id, drop);
        }
    }

    /// Re-reads the flags and every cached drop, and scans for drops created through other
    /// instances (the binary runs it every `DROP_REFRESH_MS`).
    ///
    /// # Errors
    /// [`InfraError`] when the database fails; what was cached is kept.
    pub async fn refresh(&self) -> Result<(), InfraError> {
        self.refresh_flags().await?;
        self.refresh_drops().await?;
        self.index
            .scan(&*self.ports.drops, tokio::time::Instant::now(), false)
            .await
    }

    /// Whether the limited-drop feature is on (`limited-drop.enabled`); off, every drop route
    /// answers as if there were no drops.
    fn drops_on(&self) -> bool {
        self.flags_cache.drops_on()
    }

    /// Re-reads every cached drop from the database in one query, so a pause, a resume or a close made
    /// through another instance reaches this one. The binary runs it every
    /// `DROP_REFRESH_MS`. Returns how many cached drops changed.
    ///
    /// # Errors
    /// [`InfraError`] when the database fails; the cache keeps what it had.
    pub async fn refresh_drops(&self) -> Result<usize, InfraError> {
        let ids: Vec<DropId> = self
            .drops
            .read()
            .map(|cache| cache.keys().copied().collect())
            .unwrap_or_default();
        let epoch = self.drops_epoch.load(std::sync::atomic::Ordering::SeqCst);
        let fresh = self.ports.drops.get_many(&ids).await?;
        let mut changed = 0;
        if let Ok(mut cache) = self.drops.write() {
            // An operation made here while the rows were read is newer than what was read;
            // the next refresh picks up the rest.
            if self.drops_epoch.load(std::sync::atomic::Ordering::SeqCst) != epoch {
                return Ok(0);
            }
            for drop in fresh {
                if let Some(cached) = cache.get_mut(&drop.id)
                    && *cached != drop
                {
                    *cached = drop;
                    changed += 1;
                }
            }
        }
        Ok(changed)
    }

    /// How many drops are cached (for tests of the pruning).
    #[cfg(test)]
    pub(crate) fn cached_drops(&self) -> usize {
        self.drops.read().map(|c| c.len()).unwrap_or(0)
    }

    /// The drop with `id`, from the cache or the database. An id the index of drop ids does
    /// not hold is answered without reading the drop: below the highest id at once, above it
    /// after a scan for new ids that many such requests share.
    async fn load_drop(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError> {
        if let Some(drop) = self.drops.read().ok().and_then(|m| m.get(&id).copied()) {
            return Ok(Some(drop));
        }
        match self.index.knows(id) {
            drop_index::Known::Exists => {}
            drop_index::Known::Absent => return Ok(None),
            drop_index::Known::Unknown => {
                self.index
                    .scan(&*self.ports.drops, tokio::time::Instant::now(), true)
                    .await?;
                if self.index.knows(id) != drop_index::Known::Exists {
                    return Ok(None);
                }
            }
        }
        self.drop_loads
            .run(id, || async {
                let drop = self.ports.drops.get(id).await.map_err(Arc::new)?;
                if let (Some(drop), Ok(mut cache)) = (drop, self.drops.write()) {
                    cache.entry(id).or_insert(drop);
                }
                Ok(drop)
            })
            .await
            .map_err(|error| unshared(&error))
    }

    /// Whether `actor` manages `product` (its seller, or an admin); `false` when it does not
    /// exist.
    async fn manages_product(&self, product: ProductId, actor: Actor) -> Result<bool, InfraError> {
        if actor.role == Role::Admin {
            return Ok(true);
        }
        Ok(self
            .ports
            .products
            .get(product)
            .await?
            .is_some_and(|p| actor.manages(p.owner)))
    }

    /// The drop, when it exists and `actor` manages its product. Another seller's drop is
    /// reported as missing, so its existence is not disclosed.
    async fn managed_drop(
        &self,
        id: DropId,
        actor: Actor,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        if !self.drops_on() {
            return Ok(None);
        }
        match self.load_drop(id).await? {
            Some(drop) if self.manages_product(drop.product_id, actor).await? => Ok(Some(drop)),
            _ => Ok(None),
        }
    }

    /// The gate, unless there is none, the `limited-drop.redis-gate.enabled` flag is off, or
    /// its breaker is open (it failed moments ago).
    fn gate(&self) -> Option<&Arc<dyn goods_domain::ports::AdmissionGate>> {
        self.ports
            .gate
            .as_ref()
            .filter(|_| self.flags_cache.gate_on() && self.breaker.allows())
    }

    /// Units left: the gate's counter when it has one, else the database's truth.
    async fn remaining(&self, drop: &LimitedDrop) -> Result<u32, InfraError> {
        if let Some(gate) = self.gate() {
            match gate.remaining(drop.id).await {
                Ok(Some(remaining)) => return Ok(remaining),
                Ok(None) => {}
                Err(error) => {
                    self.breaker.trip();
                    tracing::warn!(drop.id = %drop.id, error = %error, "gate unreachable; reading remaining from the database");
                }
            }
        }
        let fresh = self.remaining_counts.read().ok().and_then(|counts| {
            counts
                .get(&drop.id)
                .filter(|(at, _)| at.elapsed() < REMAINING_TTL)
                .map(|(_, left)| *left)
        });
        if let Some(left) = fresh {
            return Ok(left);
        }
        let limited = drop.limited_quantity.get();
        let left = self
            .remaining_loads
            .run(drop.id, || async {
                let sold = self
                    .ports
                    .drops
                    .sold_quantity(drop.id)
                    .await
                    .map_err(Arc::new)?;
                let left = limited.saturating_sub(sold);
                if let Ok(mut counts) = self.remaining_counts.write() {
                    counts.insert(drop.id, (std::time::Instant::now(), left));
                }
                Ok(left)
            })
            .await
            .map_err(|error| unshared(&error))?;
        Ok(left)
    }

    /// Forgets the counted units left of `drop` after this instance changed them (an order
    /// committed, cancelled or expired), so its next view counts again.
    pub(crate) fn units_changed(&self, drop: DropId) {
        if let Ok(mut counts) = self.remaining_counts.write() {
            counts.remove(&drop);
        }
    }
}

fn lease_of(lease: Duration) -> time::Duration {
    time::Duration::try_from(lease).unwrap_or(time::Duration::MAX)
}

#[cfg(test)]
pub(crate) mod test_support;
