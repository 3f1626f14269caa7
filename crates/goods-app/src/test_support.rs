//! Mocks and fixtures shared by the use-case tests.

use crate::{Actor, GoodsApp, Ports, Role, WriteBuffer};
use goods_domain::ports::{
    MockAdmissionGate, MockClock, MockDropRepository, MockEventOutbox, MockEventPublisher,
    MockOrderRepository, MockProductRepository, MockPurchaseLedger, MockStatsRecorder,
};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, LimitedDrop, OrderId, OrderStatus, ProductId, Quantity,
    SaleWindow, UserId,
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
        per_user_limit: qty(per_user),
        paused: false,
        closed_at: None,
    }
}

pub fn sample_order(status: OrderStatus) -> GoodsOrder {
    GoodsOrder {
        id: order_id(),
        drop_id: drop_id(),
        product_id: ProductId::parse(1).unwrap(),
        user_id: buyer().user_id,
        quantity: qty(1),
        status,
        idempotency_key: key(),
        created_at: OPEN,
        payment: None,
    }
}

/// Every port mocked; the drop repository already answers `get` with a drop of 100, 2 per
/// buyer, and stats accept any outcome.
pub struct Mocks {
    pub products: MockProductRepository,
    pub drops: MockDropRepository,
    pub orders: MockOrderRepository,
    pub ledger: MockPurchaseLedger,
    pub clock: MockClock,
    pub events: MockEventPublisher,
    pub outbox: MockEventOutbox,
    pub flags: goods_domain::ports::MockFlagStore,
    pub stats: MockStatsRecorder,
    pub permits: usize,
}

impl Mocks {
    pub fn at(now: OffsetDateTime) -> Self {
        let mut drops = MockDropRepository::new();
        drops
            .expect_get()
            .returning(|_| Ok(Some(sample_drop(100, 2))));
        let mut clock = MockClock::new();
        clock.expect_now().return_const(now);
        let mut stats = MockStatsRecorder::new();
        stats.expect_record().returning(|_, _| Ok(()));
        Self {
            products: MockProductRepository::new(),
            drops,
            orders: {
                let mut orders = MockOrderRepository::new();
                orders
                    .expect_units_by_status()
                    .returning(|_| Ok(goods_domain::ports::UnitsByStatus::default()));
                // No order is past its payment window unless a test says so.
                orders.expect_overdue().returning(|_, _| Ok(Vec::new()));
                orders
            },
            ledger: MockPurchaseLedger::new(),
            clock,
            events: MockEventPublisher::new(),
            outbox: MockEventOutbox::new(),
            flags: goods_domain::ports::MockFlagStore::new(),
            stats,
            permits: 4,
        }
    }

    pub fn app(self, gate: Option<MockAdmissionGate>) -> GoodsApp {
        let gate = gate.map(|g| Arc::new(g) as Arc<dyn goods_domain::ports::AdmissionGate>);
        GoodsApp::new(
            Ports {
                products: Arc::new(self.products),
                drops: Arc::new(self.drops),
                orders: Arc::new(self.orders),
                ledger: Arc::new(self.ledger),
                gate,
                clock: Arc::new(self.clock),
                events: Arc::new(self.events),
                outbox: Arc::new(self.outbox),
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
