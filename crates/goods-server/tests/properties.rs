//! Property tests of the purchase invariants: random sequences of purchases, replays, cancels,
//! payments and clock steps (which let unpaid orders expire) run against the real application (embedded SQLite and the in-process gate),
//! and after every step:
//!
//! - units sold never exceed `limitedQuantity`, and the gate admits exactly what is left
//!   (`gateRemaining = limitedQuantity - units in live orders`, drift 0);
//! - no buyer holds more than `perUserLimit` in live orders;
//! - one order per (buyer, key): a key that succeeded always answers with the same order;
//! - the product's stock plus the units sold stays what it was.
//!
//! Time moves with a controllable clock from before `openAt` to past `closeAt`, so the sale
//! window's refusals are part of the sequences.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adapters_memory::{LogEventPublisher, MemoryGate, MemoryStats};
use goods_app::{Actor, GoodsApp, Ports, PurchaseCommand, PurchaseError, Role, WriteBuffer};
use goods_domain::{
    CancelOrderError, Currency, DropId, DropInput, IdempotencyKey, Money, NewProduct, OrderId,
    OrderStatus, PaymentEvent, PaymentEventId, PaymentEventKind, PaymentOutcome, PaymentReference,
    ProductId, Quantity, UserId,
};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use test_support::clock::ManualClock;
use time::OffsetDateTime;

/// An admin: manages the ownerless products these tests create.
const ADMIN: goods_app::Actor = goods_app::Actor {
    user_id: goods_domain::UserId::MIN,
    role: goods_app::Role::Admin,
};

const STOCK: u32 = 12;
const LIMITED: u32 = 8;
const PER_USER: u32 = 3;

#[derive(Debug, Clone)]
enum Step {
    /// Buyer `user` buys `quantity` with key `key` (a repeat is a replay or a reuse).
    Buy { user: i64, key: u8, quantity: i64 },
    /// The buyer of the `nth` order so far cancels it (again, maybe).
    Cancel { nth: usize },
    /// The buyer of the `nth` order so far pays it (again, maybe: the same key replays).
    Pay { nth: usize },
    /// Time moves on by this many seconds.
    Wait { seconds: i64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1..=4_i64, 0..3_u8, 1..=3_i64).prop_map(|(user, key, quantity)| Step::Buy { user, key, quantity }),
        2 => (0..16_usize).prop_map(|nth| Step::Cancel { nth }),
        2 => (0..16_usize).prop_map(|nth| Step::Pay { nth }),
        1 => (0..900_i64).prop_map(|seconds| Step::Wait { seconds }),
    ]
}

struct World {
    app: GoodsApp,
    clock: Arc<ManualClock>,
    drop: DropId,
    product: ProductId,
    /// (buyer, key) -> the order its first success created.
    orders_by_key: HashMap<(i64, u8), OrderId>,
    /// Orders in creation order, with their buyer.
    orders: Vec<(OrderId, i64)>,
    /// Payment events sent so far (each gets a fresh id).
    events: u32,
    _dir: tempfile::TempDir,
}

impl World {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("goods.db").display());
        let store = Arc::new(adapters_sqlite::Sqlite::open(&url, true).await.unwrap());
        // Close to real time: the lease fence compares with the database's clock.
        let start = OffsetDateTime::now_utc();
        let clock = Arc::new(ManualClock::at(start));
        let truth: Arc<dyn goods_domain::ports::SourceOfTruth> = store.clone();
        let app = GoodsApp::new(
            Ports::from_store(
                &truth,
                Some(Arc::new(MemoryGate::default())),
                clock.clone(),
                Arc::new(LogEventPublisher),
                Arc::new(MemoryStats::default()),
                Arc::new(adapters_memory::SealingVault::with_keys(
                    adapters_memory::SealKey::from_bytes(&[7; 32]),
                    Vec::new(),
                )),
            ),
            WriteBuffer::new(4, Duration::from_secs(5)),
        );
        let product = app
            .products()
            .create(&NewProduct::parse("Sneaker", i64::from(STOCK)).unwrap())
            .await
            .unwrap();
        let drop = app
            .drops()
            .create(
                DropInput {
                    product_id: product.id.get(),
                    open_at: start + time::Duration::seconds(60),
                    close_at: start + time::Duration::hours(1),
                    limited_quantity: Some(i64::from(LIMITED)),
                    variants: None,
                    per_user_limit: i64::from(PER_USER),
                    price_minor: 0,
                    currency: "XXX".into(),
                    mode: "FIRST_COME".into(),
                    entry_close_at: None,
                    payment_window_seconds: None,
                },
                ADMIN,
            )
            .await
            .unwrap();
        Self {
            app,
            clock,
            drop: drop.drop.id,
            product: product.id,
            orders_by_key: HashMap::new(),
            orders: Vec::new(),
            events: 0,
            _dir: dir,
        }
    }

    fn actor(user: i64) -> Actor {
        Actor {
            user_id: UserId::parse(user).unwrap(),
            role: Role::Buyer,
        }
    }

    async fn run(&mut self, step: &Step) {
        match *step {
            Step::Buy {
                user,
                key,
                quantity,
            } => {
                let result = self
                    .app
                    .purchase(PurchaseCommand {
                        drop_id: self.drop,
                        user_id: UserId::parse(user).unwrap(),
                        sku: None,
                        quantity: Quantity::parse("quantity", quantity).unwrap(),
                        key: IdempotencyKey::parse(&format!("k{key}")).unwrap(),
                    })
                    .await;
                match result {
                    Ok(bought) => {
                        let first = *self
                            .orders_by_key
                            .entry((user, key))
                            .or_insert(bought.order.id);
                        assert_eq!(first, bought.order.id, "one order per (buyer, key)");
                        assert_eq!(
                            bought.replayed,
                            self.orders.iter().any(|(id, _)| *id == first)
                        );
                        if !bought.replayed {
                            self.orders.push((bought.order.id, user));
                        }
                    }
                    Err(
                        PurchaseError::Refused(
                            goods_domain::PurchaseRejection::TooEarly { .. }
                            | goods_domain::PurchaseRejection::Closed,
                        )
                        | PurchaseError::SoldOut { .. }
                        | PurchaseError::PerUserLimitExceeded { .. }
                        | PurchaseError::OrderLimitReached { .. }
                        | PurchaseError::KeyReused,
                    ) => {}
                    Err(other) => panic!("unexpected refusal {other:?} for {step:?}"),
                }
            }
            Step::Cancel { nth } => {
                if let Some(&(order, user)) = self.orders.get(nth) {
                    match self.app.orders().cancel(order, Self::actor(user)).await {
                        Ok(cancelled) => assert_eq!(cancelled.status, OrderStatus::Cancelled),
                        Err(CancelOrderError::NotCancellable(
                            OrderStatus::Paid | OrderStatus::Expired,
                        )) => {}
                        Err(other) => panic!("unexpected refusal {other:?} for {step:?}"),
                    }
                }
            }
            Step::Pay { nth } => {
                if let Some(&(order, _)) = self.orders.get(nth) {
                    self.events += 1;
                    let event = PaymentEvent {
                        id: PaymentEventId::parse(&format!("evt-{}", self.events)).unwrap(),
                        kind: PaymentEventKind::Succeeded,
                        order_id: order,
                        amount: Money::parse("amountMinor", 0, Currency::NONE).unwrap(),
                        reference: PaymentReference::parse("ref").unwrap(),
                    };
                    let outcome = self
                        .app
                        .orders()
                        .apply_payment(event)
                        .await
                        .unwrap()
                        .outcome;
                    assert!(
                        matches!(
                            outcome,
                            PaymentOutcome::Paid
                                | PaymentOutcome::AlreadyPaid
                                | PaymentOutcome::RefundRequired
                        ),
                        "{outcome:?} for {step:?}"
                    );
                }
            }
            Step::Wait { seconds } => {
                self.clock.advance(time::Duration::seconds(seconds));
            }
        }
    }

    async fn check(&self) {
        // Reading the orders first settles those past their payment window (lazy expiry), so
        // the reconciliation below sees the same state.
        let mut held: HashMap<i64, u32> = HashMap::new();
        let mut live = 0;
        for &(id, user) in &self.orders {
            let order = self.app.orders().get(id, Self::actor(user)).await.unwrap();
            if order.status.is_live() {
                *held.entry(user).or_default() += order.quantity.get();
                live += order.quantity.get();
            }
        }
        let recon = self
            .app
            .reconciler()
            .reconcile(self.drop, ADMIN)
            .await
            .unwrap();
        assert!(recon.sold_quantity <= LIMITED, "oversold: {recon:?}");
        assert!(!recon.oversold);
        if let Some(remaining) = recon.gate_remaining {
            assert_eq!(remaining, LIMITED - recon.sold_quantity, "{recon:?}");
        }
        let stock = self
            .app
            .products()
            .get(self.product, ADMIN)
            .await
            .unwrap()
            .stock
            .quantity();
        assert_eq!(
            stock + recon.sold_quantity,
            STOCK,
            "stock + sold is constant"
        );
        assert_eq!(
            recon.units.all.pending + recon.units.all.paid,
            recon.sold_quantity,
            "sold = pending + paid: {recon:?}"
        );
        assert_eq!(live, recon.sold_quantity, "sold = units in live orders");
        assert!(held.values().all(|h| *h <= PER_USER), "{held:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_sequence_of_purchases_replays_cancels_and_clock_steps_keeps_the_invariants(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let mut world = World::new().await;
            for step in &steps {
                world.run(step).await;
                world.check().await;
            }
        });
    }
}
