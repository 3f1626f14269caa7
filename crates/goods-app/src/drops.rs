//! Drops: creation, the buyers' view, operations and stats, draws, and the drop cache. Units
//! left and a draw's view are the core's, behind [`DropsCore`].

pub(crate) mod cache;
pub(crate) mod create;
pub(crate) mod draw;
pub(crate) mod operate;
pub(crate) mod stats;
pub(crate) mod view;

use crate::operations::flags::FlagCache;
use crate::{Actor, DrawView, GoodsApp};
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{
    AdmissionGate, Clock, DrawRepository, DropRepository, EventPublisher, OrderRepository,
    ProductRepository, SeedVault, StatsRecorder,
};
use goods_domain::{DropId, InfraError, LimitedDrop, PaymentWindow};
use std::sync::Arc;

/// What the drop features need from the core.
#[cfg_attr(test, mockall::automock)]
#[async_trait::async_trait]
pub(crate) trait DropsCore: Send + Sync {
    /// Units left per size: the gate's counters when it has them, else the database's truth.
    async fn remaining(&self, drop: &LimitedDrop) -> Result<FreeUnits, InfraError>;
    /// A draw drop's draw and counts; `None` for a first-come drop.
    async fn draw_view(&self, drop: &LimitedDrop) -> Result<Option<DrawView>, InfraError>;
    /// Tells the other instances, in the background, that a drop changed.
    fn announce_change(&self);
}

#[derive(Clone)]
pub struct Drops {
    drops: Arc<dyn DropRepository>,
    products: Arc<dyn ProductRepository>,
    orders: Arc<dyn OrderRepository>,
    stats: Arc<dyn StatsRecorder>,
    draws: Arc<dyn DrawRepository>,
    seeds: Arc<dyn SeedVault>,
    events: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    /// Seeded at creation and told of a close; `None` without a gate (`GATE=off`).
    gate: Option<Arc<dyn AdmissionGate>>,
    cache: Arc<cache::DropCache>,
    flags: Arc<FlagCache>,
    payment_window: PaymentWindow,
    /// Drops a seller may have not yet closed (`SELLER_MAX_ACTIVE_DROPS`); `None`: no quota.
    seller_quota: Option<u32>,
    core: Arc<dyn DropsCore>,
}

impl GoodsApp {
    /// Drops and their operations (`/drops`, `/products/{id}/drops`).
    pub fn drops(&self) -> Drops {
        let ports = self.ports();
        Drops {
            drops: Arc::clone(&ports.drops),
            products: Arc::clone(&ports.products),
            orders: Arc::clone(&ports.orders),
            stats: Arc::clone(&ports.stats),
            draws: Arc::clone(&ports.draws),
            seeds: Arc::clone(&ports.seeds),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
            gate: ports.gate.clone(),
            cache: Arc::clone(&self.drops),
            flags: Arc::clone(&self.flags_cache),
            payment_window: self.payment_window(),
            seller_quota: self.seller_quota,
            core: Arc::new(self.clone()),
        }
    }
}

#[async_trait::async_trait]
impl DropsCore for GoodsApp {
    async fn remaining(&self, drop: &LimitedDrop) -> Result<FreeUnits, InfraError> {
        GoodsApp::remaining(self, drop).await
    }

    async fn draw_view(&self, drop: &LimitedDrop) -> Result<Option<DrawView>, InfraError> {
        // A first-come drop's view (the hot read) builds no draws service.
        if !drop.mode.is_draw() {
            return Ok(None);
        }
        self.draws().view(drop).await
    }

    fn announce_change(&self) {
        GoodsApp::announce_change(self);
    }
}

impl Drops {
    /// The drop, when it exists and `actor` manages its product.
    async fn managed(&self, id: DropId, actor: Actor) -> Result<Option<LimitedDrop>, InfraError> {
        managed_drop(&self.cache, &self.flags, &*self.products, id, actor).await
    }
}

/// The drop, when the feature is on, it exists and `actor` manages its product. Another
/// seller's drop is reported as missing, so its existence is not disclosed.
pub(crate) async fn managed_drop(
    cache: &cache::DropCache,
    flags: &FlagCache,
    products: &dyn ProductRepository,
    id: DropId,
    actor: Actor,
) -> Result<Option<LimitedDrop>, InfraError> {
    if !flags.drops_on() {
        return Ok(None);
    }
    match cache.load(id).await? {
        Some(drop) if crate::actor::manages_product(products, drop.product_id, actor).await? => {
            Ok(Some(drop))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::test_support::{OPEN, drops_serving, sample_drop};
    use goods_domain::ports::{
        MockAdmissionGate, MockClock, MockDrawRepository, MockDropRepository, MockEventPublisher,
        MockOrderRepository, MockProductRepository, MockSeedVault, MockStatsRecorder,
    };

    /// The ports of [`Drops`], mocked: the drop repository serves [`sample_drop`] (100, 2 per
    /// buyer); the clock reads [`OPEN`]; the core answers 100 units left and no draw.
    pub struct DropMocks {
        pub drops: MockDropRepository,
        pub products: MockProductRepository,
        pub orders: MockOrderRepository,
        pub stats: MockStatsRecorder,
        pub draws: MockDrawRepository,
        pub seeds: MockSeedVault,
        pub events: MockEventPublisher,
        pub gate: Option<MockAdmissionGate>,
        pub core: MockDropsCore,
    }

    impl DropMocks {
        pub fn new() -> Self {
            let mut core = MockDropsCore::new();
            core.expect_remaining()
                .returning(|_| Ok(goods_domain::ports::whole_units(100)));
            core.expect_draw_view().returning(|_| Ok(None));
            Self {
                drops: drops_serving(sample_drop(100, 2)),
                products: MockProductRepository::new(),
                orders: MockOrderRepository::new(),
                stats: MockStatsRecorder::new(),
                draws: MockDrawRepository::new(),
                seeds: MockSeedVault::new(),
                events: MockEventPublisher::new(),
                gate: None,
                core,
            }
        }

        pub fn service(self) -> Drops {
            let mut clock = MockClock::new();
            clock.expect_now().return_const(OPEN);
            let drops: Arc<dyn DropRepository> = Arc::new(self.drops);
            Drops {
                cache: Arc::new(cache::DropCache::new(Arc::clone(&drops))),
                drops,
                products: Arc::new(self.products),
                orders: Arc::new(self.orders),
                stats: Arc::new(self.stats),
                draws: Arc::new(self.draws),
                seeds: Arc::new(self.seeds),
                events: Arc::new(self.events),
                clock: Arc::new(clock),
                gate: self.gate.map(|g| Arc::new(g) as Arc<dyn AdmissionGate>),
                flags: Arc::default(),
                payment_window: PaymentWindow::default(),
                seller_quota: None,
                core: Arc::new(self.core),
            }
        }
    }
}
