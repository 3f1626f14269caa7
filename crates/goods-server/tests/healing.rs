//! The gate's settle fails after the database decided (the `confirm` or `cancel` script times
//! out, Redis drops the connection): the in-progress marker stays, and its lease heals it. Real
//! MariaDB and Redis; the failure is injected by a gate that delegates everything to the Redis
//! gate except the settle calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adapters_memory::{LogEventPublisher, MemoryStats};
use adapters_mysql::MysqlStore;
use adapters_redis::{RedisConfig, RedisConnection, RedisGate};
use async_trait::async_trait;
use goods_app::{GoodsApp, Ports, PurchaseCommand, PurchaseError, WriteBuffer};
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{
    AdmissionGate, Clock, DropRepository, GateSeed, ProductRepository, Reservation, ReserveOutcome,
    StaleReservation, SystemClock, units_in_all,
};
use goods_domain::{
    DropId, DropInput, IdempotencyKey, InfraError, NewLimitedDrop, NewProduct, OrderId, Quantity,
    Sku, UserId,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// An admin: manages the ownerless products these tests create.
const ADMIN: goods_app::Actor = goods_app::Actor {
    user_id: goods_domain::UserId::MIN,
    role: goods_app::Role::Admin,
};

/// The units the gate still admits for `drop`, in all sizes.
async fn left(gate: &RedisGate, drop: DropId) -> Option<u32> {
    let units = gate.remaining(drop).await.unwrap()?;
    Some(units_in_all(&units))
}

/// The Redis gate, except that every confirm and cancel fails without reaching Redis.
struct SettleFails(RedisGate);

#[async_trait]
impl AdmissionGate for SettleFails {
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError> {
        self.0.seed_if_absent(seed).await
    }
    async fn reserve(&self, r: &Reservation) -> Result<ReserveOutcome, InfraError> {
        self.0.reserve(r).await
    }
    async fn confirm(&self, _: &Reservation, _: OrderId) -> Result<(), InfraError> {
        Err(InfraError::msg("injected: confirm timed out"))
    }
    async fn cancel(&self, _: &Reservation) -> Result<(), InfraError> {
        Err(InfraError::msg("injected: cancel timed out"))
    }
    async fn resync(&self, seed: &GateSeed) -> Result<(), InfraError> {
        self.0.resync(seed).await
    }
    async fn stale(
        &self,
        drop: DropId,
        now: OffsetDateTime,
    ) -> Result<Vec<StaleReservation>, InfraError> {
        self.0.stale(drop, now).await
    }
    async fn release(
        &self,
        d: DropId,
        u: UserId,
        s: Option<Sku>,
        q: Quantity,
    ) -> Result<(), InfraError> {
        self.0.release(d, u, s, q).await
    }
    async fn closed(&self, drop: DropId, at: OffsetDateTime) -> Result<(), InfraError> {
        self.0.closed(drop, at).await
    }

    async fn remaining(&self, drop: DropId) -> Result<Option<FreeUnits>, InfraError> {
        self.0.remaining(drop).await
    }
    async fn done_markers(
        &self,
        drop: DropId,
    ) -> Result<Vec<(UserId, goods_domain::IdempotencyKey)>, InfraError> {
        self.0.done_markers(drop).await
    }
}

const LEASE: Duration = Duration::from_millis(300);

fn app(store: &Arc<MysqlStore>, gate: Arc<dyn AdmissionGate>, permits: usize) -> GoodsApp {
    app_at(store, gate, permits, Arc::new(SystemClock))
}

/// [`app`] with its own clock.
fn app_at(
    store: &Arc<MysqlStore>,
    gate: Arc<dyn AdmissionGate>,
    permits: usize,
    clock: Arc<dyn Clock>,
) -> GoodsApp {
    let store: Arc<dyn goods_domain::ports::SourceOfTruth> = store.clone();
    GoodsApp::new(
        Ports::from_store(
            &store,
            Some(gate),
            clock,
            Arc::new(LogEventPublisher),
            Arc::new(MemoryStats::default()),
            Arc::new(adapters_memory::SealingVault::with_keys(
                adapters_memory::SealKey::from_bytes(&[7; 32]),
                Vec::new(),
            )),
        ),
        WriteBuffer::new(permits, Duration::ZERO),
    )
    .with_lease(LEASE)
}

/// A fresh MariaDB database, a Redis gate under a fresh prefix, and an open drop of 5 units,
/// one per buyer.
async fn fixture() -> (Arc<MysqlStore>, RedisGate, DropId) {
    fixture_of(5).await
}

/// [`fixture`] with a drop (and a product stock) of `units`.
async fn fixture_of(units: u32) -> (Arc<MysqlStore>, RedisGate, DropId) {
    let url = test_support::mysql::fresh_database().await;
    let store = Arc::new(adapters_mysql::Mysql::connect(&url, 4, true).await.unwrap());
    let redis = RedisConfig {
        url: test_support::redis::server_url(),
        prefix: test_support::redis::fresh_prefix(),
        pool_size: 2,
        command_timeout: Duration::from_millis(500),
        tls_ca_file: None,
    };
    let conn = RedisConnection::connect(&redis, Duration::from_secs(2))
        .await
        .unwrap();
    let gate = RedisGate::new(conn, Duration::from_secs(2));
    let now = OffsetDateTime::now_utc();
    let product = ProductRepository::create(
        &*store,
        &NewProduct::parse("Sneaker", units.into()).unwrap(),
    )
    .await
    .unwrap();
    let input = DropInput {
        product_id: product.id.get(),
        open_at: now - time::Duration::seconds(1),
        close_at: now + time::Duration::hours(1),
        limited_quantity: Some(units.into()),
        variants: None,
        per_user_limit: 1,
        price_minor: 0,
        currency: "XXX".into(),
        mode: "FIRST_COME".into(),
        entry_close_at: None,
        payment_window_seconds: None,
    };
    let drop = DropRepository::create(
        &*store,
        &NewLimitedDrop::parse(&input, now).unwrap(),
        None,
        now,
        None,
    )
    .await
    .unwrap();
    (store, gate, drop.id)
}

fn buy(drop: DropId, user: i64) -> PurchaseCommand {
    PurchaseCommand {
        drop_id: drop,
        user_id: UserId::parse(user).unwrap(),
        sku: None,
        quantity: Quantity::parse("quantity", 1).unwrap(),
        key: IdempotencyKey::parse("k").unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_lost_after_the_database_decided_is_healed_by_the_lease() {
    let (store, redis_gate, drop) = fixture().await;
    let gate: Arc<dyn AdmissionGate> = Arc::new(SettleFails(redis_gate.clone()));
    let buyers = app(&store, Arc::clone(&gate), 4);
    // An instance with no write slot: whatever it admits is throttled and must be cancelled.
    let throttled = app(&store, Arc::clone(&gate), 0);

    // Buyer 1: the database commits, the confirm is lost. Buyer 2: throttled, the cancel is lost.
    let first = buyers.purchase(buy(drop, 1)).await.unwrap();
    assert!(!first.replayed);
    let refused = throttled.purchase(buy(drop, 2)).await.unwrap_err();
    assert!(matches!(refused, PurchaseError::Throttled), "{refused:?}");
    // Both markers are still in progress: 2 units held, 1 of them without a sale.
    assert_eq!(left(&redis_gate, drop).await, Some(3));
    assert!(matches!(
        buyers.purchase(buy(drop, 1)).await.unwrap_err(),
        PurchaseError::InProgress
    ));

    // Once the leases have passed (by the database's clock), healing passes settle both, on
    // the real gate (the healer's own calls go through a gate that works again).
    let healer = app(&store, Arc::new(redis_gate.clone()), 4);
    // Either path may settle buyer 1's marker: a resolution finds its order, or a resync
    // (the same drift on two passes) rebuilds it as done from the order it reads.
    let start = Instant::now();
    while left(&redis_gate, drop).await != Some(4) {
        let report = healer.heal_all().await.unwrap();
        assert_eq!(report.failed, 0, "{report:?}");
        assert!(
            start.elapsed() < LEASE + Duration::from_secs(3),
            "never healed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        left(&redis_gate, drop).await,
        Some(4),
        "the throttled buyer's unit is back, the sold one is not"
    );
    let replay = healer.purchase(buy(drop, 1)).await.unwrap();
    assert_eq!((replay.order.id, replay.replayed), (first.order.id, true));
    let recon = healer.reconciler().reconcile(drop, ADMIN).await.unwrap();
    assert_eq!((recon.sold_quantity, recon.drift), (1, Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_of_a_key_past_its_lease_resolves_it_without_waiting_for_the_healer() {
    let (store, redis_gate, drop) = fixture().await;
    let lossy = app(&store, Arc::new(SettleFails(redis_gate.clone())), 4);
    let healthy = app(&store, Arc::new(redis_gate.clone()), 4);

    let first = lossy.purchase(buy(drop, 1)).await.unwrap();
    // The buyer retries until the lease has passed; the retry itself asks the database.
    let start = Instant::now();
    let replay = loop {
        match healthy.purchase(buy(drop, 1)).await {
            Ok(replay) => break replay,
            Err(PurchaseError::InProgress) => {}
            Err(other) => panic!("{other:?}"),
        }
        assert!(
            start.elapsed() < LEASE + Duration::from_secs(3),
            "still in progress"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((replay.order.id, replay.replayed), (first.order.id, true));
    assert_eq!(left(&redis_gate, drop).await, Some(4));
}

/// Two healing passes at once, as when a leader's pass outlives its lease and the next
/// leader's starts: lost confirms, lost cancels and overdue orders are each settled exactly
/// once, and the gate ends holding every unit (docs/gate.md, "One leader").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_healing_passes_at_once_settle_everything_exactly_once() {
    const UNITS: u32 = 40;
    let (store, redis_gate, drop) = fixture_of(UNITS).await;
    let product = DropRepository::get(&*store, drop)
        .await
        .unwrap()
        .unwrap()
        .product_id;
    let stock = || async {
        ProductRepository::get(&*store, product)
            .await
            .unwrap()
            .unwrap()
            .stock
            .quantity()
    };
    let stock_before = stock().await;
    let lossy = app(&store, Arc::new(SettleFails(redis_gate.clone())), 4);
    let throttled = app(&store, Arc::new(SettleFails(redis_gate.clone())), 0);
    let healthy = app(&store, Arc::new(redis_gate.clone()), 4);
    for user in 1..=10 {
        lossy.purchase(buy(drop, user)).await.unwrap();
    }
    for user in 11..=20 {
        let refused = throttled.purchase(buy(drop, user)).await.unwrap_err();
        assert!(matches!(refused, PurchaseError::Throttled), "{refused:?}");
    }
    for user in 21..=30 {
        healthy.purchase(buy(drop, user)).await.unwrap();
    }
    assert_eq!(left(&redis_gate, drop).await, Some(UNITS - 30));

    // Two healers twenty minutes ahead: every order is past its ten-minute payment window,
    // every reservation past its lease; the drop is still on sale.
    let later = OffsetDateTime::now_utc() + time::Duration::minutes(20);
    let healers = [0, 1].map(|_| {
        app_at(
            &store,
            Arc::new(redis_gate.clone()),
            4,
            Arc::new(test_support::clock::ManualClock::at(later)),
        )
    });
    let settled = || async {
        let recon = healers[0]
            .reconciler()
            .reconcile(drop, ADMIN)
            .await
            .unwrap();
        recon.units.all.expired == 20 && recon.gate_remaining == Some(UNITS)
    };
    let start = Instant::now();
    let mut rounds = 0;
    while !settled().await || rounds < 5 {
        let (a, b) = tokio::join!(healers[0].heal_all(), healers[1].heal_all());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!((a.failed, b.failed), (0, 0), "{a:?} {b:?}");
        rounds += 1;
        assert!(
            start.elapsed() < LEASE + Duration::from_secs(5),
            "not settled after {rounds} overlapping rounds"
        );
    }
    let recon = healers[1]
        .reconciler()
        .reconcile(drop, ADMIN)
        .await
        .unwrap();
    assert_eq!(
        (
            recon.units.all.pending,
            recon.units.all.paid,
            recon.units.all.expired
        ),
        (0, 0, 20),
        "each order expired once: {recon:?}"
    );
    assert_eq!(
        (
            recon.sold_quantity,
            recon.gate_remaining,
            recon.drift,
            recon.oversold
        ),
        (0, Some(UNITS), Some(0), false),
        "every unit back once, in the gate and the drop: {recon:?}"
    );
    assert_eq!(
        stock().await,
        stock_before,
        "the stock got each unit back once"
    );
    eprintln!("settled by {rounds} pairs of overlapping passes");
}
