//! Mocks and fixtures shared by the use-case tests.

use crate::{Actor, GoodsApp, Ports, Role, WriteBuffer};
use goods_domain::ports::{
    MockAdmissionGate, MockClock, MockDropRepository, MockEventOutbox, MockEventPublisher,
    MockOrderRepository, MockProductRepository, MockPurchaseLedger, MockStatsRecorder, PlaceOrder,
    Placed, Placement,
};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop, OrderId, OrderStatus, ProductId,
    Quantity, SaleWindow, UserId,
};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use time::macros::datetime;

pub const OPEN: OffsetDateTime = datetime!(2026-12-01 09:00 UTC);
pub const CLOSE: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

pub fn drop_id() -> DropId {
    DropId::parse(1).unwrap()
}

pub fn order_id() -> OrderId {
    OrderId::parse(9).unwrap()
}

pub fn buyer() -> Actor {
    Actor {
        user_id: UserId::parse(42).unwrap(),
        role: Role::Buyer,
    }
}

pub fn admin() -> Actor {
    Actor {
        user_id: UserId::parse(1).unwrap(),
        role: Role::Admin,
    }
}

pub fn seller(id: i64) -> Actor {
    Actor {
        user_id: UserId::parse(id).unwrap(),
        role: Role::Seller,
    }
}

pub fn qty(n: i64) -> Quantity {
    Quantity::parse("quantity", n).unwrap()
}

pub fn key() -> IdempotencyKey {
    IdempotencyKey::parse("k-1").unwrap()
}

pub fn sample_drop(limited: i64, per_user: i64) -> LimitedDrop {
    LimitedDrop {
        id: drop_id(),
        product_id: ProductId::parse(1).unwrap(),
        window: SaleWindow::parse(OPEN, CLOSE).unwrap(),
        limited_quantity: qty(limited),
        sizes: goods_domain::Sizes::whole(qty(limited)),
        per_user_limit: qty(per_user),
        price: goods_domain::Price::default(),
        paused: false,
        closed_at: None,
        mode: goods_domain::DropMode::FirstCome,
        payment_window: None,
    }
}

/// [`sample_drop`] in two sizes, `US-9` and `US-10`, of 50 units each, 2 per buyer across them.
pub fn sample_sized_drop() -> LimitedDrop {
    let inputs = [("US-9", 50), ("US-10", 50)].map(|(sku, limited)| goods_domain::SizeInput {
        sku: sku.to_owned(),
        limited_quantity: limited,
    });
    LimitedDrop {
        sizes: goods_domain::Sizes::parse(None, Some(&inputs)).unwrap(),
        ..sample_drop(100, 2)
    }
}

/// The size `raw` as the domain holds it.
pub fn sku(raw: &str) -> Option<goods_domain::Sku> {
    Some(goods_domain::Sku::parse("sku", raw).unwrap())
}

pub fn sample_order(status: OrderStatus) -> GoodsOrder {
    GoodsOrder {
        id: order_id(),
        drop_id: drop_id(),
        product_id: ProductId::parse(1).unwrap(),
        user_id: buyer().user_id,
        sku: None,
        quantity: qty(1),
        amount: goods_domain::Money::parse("amountMinor", 0, goods_domain::Currency::NONE).unwrap(),
        status,
        idempotency_key: key(),
        created_at: OPEN,
        payment: None,
        deadline: None,
    }
}

/// The buyer's purchase of `quantity` units of [`sample_drop`] with [`key`].
pub fn cmd(quantity: i64) -> crate::PurchaseCommand {
    crate::PurchaseCommand {
        drop_id: drop_id(),
        user_id: buyer().user_id,
        sku: None,
        quantity: qty(quantity),
        key: key(),
    }
}

/// The database's seed of a gate for `drop` with nothing left and no orders.
pub fn sold_out_seed(drop: &LimitedDrop) -> goods_domain::ports::GateSeed {
    goods_domain::ports::GateSeed {
        unexplained: Vec::new(),
        drop_id: drop.id,
        remaining: goods_domain::ports::whole_units(0),
        expires_at: CLOSE,
        orders: Vec::new(),
    }
}

/// A gate that answers one reservation with `outcome`.
pub fn gate_answering(outcome: goods_domain::ports::ReserveOutcome) -> MockAdmissionGate {
    let mut gate = MockAdmissionGate::new();
    gate.expect_done_markers().returning(|_| Ok(Vec::new()));
    gate.expect_reserve()
        .times(1)
        .returning(move |_| Ok(outcome));
    gate
}

/// A drop repository holding `drop` alone: `get` answers it, and so does the scan of drop ids.
/// Buyer `buyer`'s purchase of one unit of [`sample_drop`], as the ledger is asked for it.
pub fn place_order(buyer: i64) -> PlaceOrder {
    let drop = sample_drop(100, 2);
    PlaceOrder {
        drop_id: drop.id,
        product_id: drop.product_id,
        limited_quantity: drop.limited_quantity,
        per_user_limit: drop.per_user_limit,
        price: drop.price,
        user_id: UserId::parse(buyer).unwrap(),
        sku: None,
        quantity: qty(1),
        key: key(),
        now: OPEN,
        deadline: None,
        window: goods_domain::PaymentWindow::default(),
    }
}

/// A ledger's answer to a batch of one: [`sample_order`] created.
pub fn created_one() -> Result<Vec<Placement>, InfraError> {
    Ok(vec![Ok(Placed::Created(sample_order(
        OrderStatus::Pending,
    )))])
}

pub fn drops_serving(drop: LimitedDrop) -> MockDropRepository {
    let mut drops = MockDropRepository::new();
    drops.expect_get().returning({
        let drop = drop.clone();
        move |_| Ok(Some(drop.clone()))
    });
    drops.expect_ids_after().returning(move |after| {
        Ok(Some(drop.id)
            .filter(|id| after < Some(*id))
            .into_iter()
            .collect())
    });
    drops
}

/// Every port mocked; the drop repository already answers `get` with a drop of 100, 2 per
/// buyer, and stats accept any outcome.
pub struct Mocks {
    pub products: MockProductRepository,
    pub drops: MockDropRepository,
    pub orders: MockOrderRepository,
    pub payments: goods_domain::ports::MockPaymentRepository,
    pub ledger: MockPurchaseLedger,
    pub clock: MockClock,
    pub events: MockEventPublisher,
    pub outbox: MockEventOutbox,
    pub event_log: goods_domain::ports::MockEventLog,
    pub flags: goods_domain::ports::MockFlagStore,
    pub stats: MockStatsRecorder,
    pub draws: goods_domain::ports::MockDrawRepository,
    /// Every seed is 32 bytes of 7.
    pub seeds: goods_domain::ports::MockSeedVault,
    pub permits: usize,
}

impl Mocks {
    pub fn at(now: OffsetDateTime) -> Self {
        let drops = drops_serving(sample_drop(100, 2));
        let mut clock = MockClock::new();
        clock.expect_now().return_const(now);
        let mut stats = MockStatsRecorder::new();
        stats.expect_record().returning(|_, _, _| Ok(()));
        Self {
            products: MockProductRepository::new(),
            drops,
            orders: {
                let mut orders = MockOrderRepository::new();
                orders
                    .expect_units_by_status()
                    .returning(|_| Ok(goods_domain::ports::DropUnits::default()));
                // No order is past its payment window unless a test says so.
                orders.expect_overdue().returning(|_, _| Ok(Vec::new()));
                orders
            },
            payments: goods_domain::ports::MockPaymentRepository::new(),
            ledger: MockPurchaseLedger::new(),
            clock,
            events: MockEventPublisher::new(),
            outbox: MockEventOutbox::new(),
            event_log: goods_domain::ports::MockEventLog::new(),
            flags: goods_domain::ports::MockFlagStore::new(),
            stats,
            draws: goods_domain::ports::MockDrawRepository::new(),
            seeds: {
                let mut seeds = goods_domain::ports::MockSeedVault::new();
                seeds
                    .expect_seed()
                    .returning(|| Ok(goods_domain::DrawSeed::from_bytes([7; 32])));
                // Sealed as the bytes themselves: the app never reads inside a seal.
                seeds.expect_seal().returning(|_, seed, _| {
                    Ok(goods_domain::SealedSeed {
                        key_id: "test".into(),
                        sealed: seed.bytes().to_vec(),
                    })
                });
                seeds.expect_open().returning(|_, sealed, _| {
                    let bytes: [u8; 32] = sealed
                        .sealed
                        .clone()
                        .try_into()
                        .map_err(|_| goods_domain::InfraError::msg("not a test seal"))?;
                    Ok(goods_domain::DrawSeed::from_bytes(bytes))
                });
                seeds
            },
            permits: 4,
        }
    }

    pub fn app(self, gate: Option<MockAdmissionGate>) -> GoodsApp {
        self.app_with_drops(gate, |drops| Arc::new(drops))
    }

    /// [`app`](Self::app) over the mocked drops wrapped in [`HeldDrops`], which it returns.
    pub fn app_holding_drops(self, gate: Option<MockAdmissionGate>) -> (GoodsApp, Arc<HeldDrops>) {
        let mut held = None;
        let app = self.app_with_drops(gate, |drops| {
            let wrapped = Arc::new(HeldDrops::new(drops));
            held = Some(Arc::clone(&wrapped));
            wrapped
        });
        (app, held.expect("wrapped"))
    }

    fn app_with_drops(
        self,
        gate: Option<MockAdmissionGate>,
        wrap: impl FnOnce(MockDropRepository) -> Arc<dyn goods_domain::ports::DropRepository>,
    ) -> GoodsApp {
        let gate = gate.map(|g| Arc::new(g) as Arc<dyn goods_domain::ports::AdmissionGate>);
        GoodsApp::new(
            Ports {
                products: Arc::new(self.products),
                drops: wrap(self.drops),
                orders: Arc::new(self.orders),
                payments: Arc::new(self.payments),
                ledger: Arc::new(self.ledger),
                gate,
                clock: Arc::new(self.clock),
                events: Arc::new(self.events),
                outbox: Arc::new(self.outbox),
                event_log: Arc::new(self.event_log),
                draws: Arc::new(self.draws),
                seeds: Arc::new(self.seeds),
                flags: Arc::new(self.flags),
                stats: Arc::new(self.stats),
            },
            WriteBuffer::new(self.permits, Duration::from_millis(20)),
        )
    }
}

/// Metrics recorded on this thread while the returned guard lives (a current-thread test
/// runtime runs spawned tasks here too); read them with [`counters`].
pub fn local_metrics() -> (
    metrics_util::debugging::Snapshotter,
    metrics::LocalRecorderGuard<'static>,
) {
    let recorder: &'static metrics_util::debugging::DebuggingRecorder =
        Box::leak(Box::new(metrics_util::debugging::DebuggingRecorder::new()));
    let snapshotter = recorder.snapshotter();
    (snapshotter, metrics::set_default_local_recorder(recorder))
}

/// Every counter recorded so far (one snapshot: taking one drains what it read), as
/// `name{k=v,...}` with the labels sorted.
pub fn counters(
    snapshotter: &metrics_util::debugging::Snapshotter,
) -> std::collections::HashMap<String, u64> {
    use metrics_util::debugging::DebugValue;
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            match value {
                DebugValue::Counter(n) => {
                    Some((format!("{}{{{}}}", key.name(), labels.join(",")), n))
                }
                _ => None,
            }
        })
        .collect()
}

/// The mocked drop repository, except that its reads of a drop (`get`) and of a gate seed
/// (`gate_seed`) are counted and wait until the test lets them go: a load in flight stays in
/// flight while other calls arrive.
pub struct HeldDrops {
    inner: MockDropRepository,
    gets: std::sync::atomic::AtomicUsize,
    seeds: std::sync::atomic::AtomicUsize,
    gets_open: tokio::sync::Semaphore,
    seeds_open: tokio::sync::Semaphore,
}

impl HeldDrops {
    fn new(inner: MockDropRepository) -> Self {
        Self {
            inner,
            gets: Default::default(),
            seeds: Default::default(),
            gets_open: tokio::sync::Semaphore::new(0),
            seeds_open: tokio::sync::Semaphore::new(0),
        }
    }

    /// Reads of a drop so far (held or not).
    pub fn gets(&self) -> usize {
        self.gets.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Reads of a gate seed so far (held or not).
    pub fn seeds(&self) -> usize {
        self.seeds.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Lets every read of a drop through, now and from now on.
    pub fn release_gets(&self) {
        self.gets_open
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    /// Lets every read of a gate seed through, now and from now on.
    pub fn release_seeds(&self) {
        self.seeds_open
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

#[async_trait::async_trait]
impl goods_domain::ports::DropRepository for HeldDrops {
    async fn create(
        &self,
        drop: &goods_domain::NewLimitedDrop,
        seed: Option<goods_domain::DrawToSeal>,
        now: OffsetDateTime,
        seller_quota: Option<u32>,
    ) -> Result<LimitedDrop, goods_domain::ports::CreateDropError> {
        self.inner.create(drop, seed, now, seller_quota).await
    }
    async fn get(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError> {
        self.gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _open = self.gets_open.acquire().await;
        self.inner.get(id).await
    }
    async fn get_many(&self, ids: &[DropId]) -> Result<Vec<LimitedDrop>, InfraError> {
        self.inner.get_many(ids).await
    }
    async fn ids_after(&self, after: Option<DropId>) -> Result<Vec<DropId>, InfraError> {
        self.inner.ids_after(after).await
    }
    async fn sold_quantity(&self, id: DropId) -> Result<u32, InfraError> {
        self.inner.sold_quantity(id).await
    }
    async fn sold_by_size(&self, id: DropId) -> Result<goods_domain::batch::FreeUnits, InfraError> {
        self.inner.sold_by_size(id).await
    }
    async fn set_paused(
        &self,
        id: DropId,
        paused: bool,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        self.inner.set_paused(id, paused).await
    }
    async fn close(
        &self,
        id: DropId,
        at: OffsetDateTime,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        self.inner.close(id, at).await
    }
    async fn list_unclosed(&self, now: OffsetDateTime) -> Result<Vec<LimitedDrop>, InfraError> {
        self.inner.list_unclosed(now).await
    }
    async fn gate_seed(
        &self,
        drop: &LimitedDrop,
    ) -> Result<goods_domain::ports::GateSeed, InfraError> {
        self.seeds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _open = self.seeds_open.acquire().await;
        self.inner.gate_seed(drop).await
    }
}

/// Yields until `ready` holds, then a few times more, so every task that could still join a
/// load in flight has run up to it.
pub async fn settle_until(ready: impl Fn() -> bool) {
    while !ready() {
        tokio::task::yield_now().await;
    }
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}
