//! PurchaseLimitedDrop: time gate -> admission gate -> write buffer -> the drop's next group
//! commit -> confirm. Any failure after the gate admitted gives the units back.

mod admission;
mod commit;

pub(crate) use admission::resolve_stale;

use crate::drops::cache::DropCache;
use crate::mechanisms::breaker::GateAccess;
use crate::mechanisms::group_commit::Committers;
use crate::mechanisms::single_flight::{Shared, SingleFlight};
use crate::{Tasks, WriteBuffer};
use goods_domain::ports::{
    Clock, DropRepository, EventPublisher, OrderRepository, PlaceOrder, PlaceOrderError,
    PurchaseLedger, PurchaseOutcome, StatsRecorder,
};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop, PaymentWindow, PurchaseRejection,
    Quantity, Sku, SkuRejection, UserId,
};
use std::sync::Arc;
use time::OffsetDateTime;

/// A purchase request, parsed at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurchaseCommand {
    pub drop_id: DropId,
    pub user_id: UserId,
    /// The size asked for, as sent: the drop's sizes decide whether it is one of them
    /// ([`goods_domain::Sizes::choose`]); `None` for a drop without sizes.
    pub sku: Option<String>,
    pub quantity: Quantity,
    pub key: IdempotencyKey,
}

/// A purchase of one of the drop's sizes: a [`PurchaseCommand`] whose `sku` the drop chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chosen {
    pub(crate) drop_id: DropId,
    pub(crate) user_id: UserId,
    pub(crate) sku: Option<Sku>,
    pub(crate) quantity: Quantity,
    pub(crate) key: IdempotencyKey,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchased {
    pub order: GoodsOrder,
    /// Whether it was created by an earlier request with the same key.
    pub replayed: bool,
}

/// Why a purchase did not create an order. In every case no order exists for the request.
#[derive(Debug, thiserror::Error)]
pub enum PurchaseError {
    #[error("drop not found")]
    DropNotFound,
    /// The key was used for a different request.
    #[error("idempotency key reused for a different request")]
    KeyReused,
    /// The key's first request is still being processed.
    #[error("a request with this idempotency key is in progress")]
    InProgress,
    /// The drop's sale refused it: a draw drop, before openAt, paused, or closed (also when
    /// it closed before the order could commit).
    #[error(transparent)]
    Refused(#[from] PurchaseRejection),
    /// The `sku` asked for is not one of the drop's sizes (missing, unknown, or given for a
    /// drop without sizes).
    #[error(transparent)]
    Size(#[from] SkuRejection),
    /// Fewer units left than asked for (in the size asked for: `sku`).
    #[error("sold out")]
    SoldOut { remaining: u32, sku: Option<Sku> },
    /// Past the per-buyer limit.
    #[error("per-user limit exceeded")]
    PerUserLimitExceeded { limit: u32 },
    /// The buyer placed as many orders in the drop as anyone may (cancelled ones included).
    #[error("order limit reached")]
    OrderLimitReached { limit: u32 },
    /// Admitted, but no database write slot within the wait bound.
    #[error("throttled")]
    Throttled,
    /// The buyer's fleet-wide bucket refused it, charged as the purchase reached a shared
    /// store (in the gate's own reservation where the gate keeps the buckets).
    #[error("rate limited")]
    RateLimited(crate::RateLimited),
    /// A store failed ([`InfraError::is_unavailable`]: not within its bound, or the lease ran
    /// out); a retry with the same key replays the order or tries afresh.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<PlaceOrderError> for PurchaseError {
    fn from(error: PlaceOrderError) -> Self {
        match error {
            PlaceOrderError::SoldOut { remaining } => Self::SoldOut {
                remaining,
                sku: None,
            },
            PlaceOrderError::PerUserLimitExceeded { limit } => Self::PerUserLimitExceeded { limit },
            PlaceOrderError::KeyReused => Self::KeyReused,
            PlaceOrderError::OrderLimitReached { limit } => Self::OrderLimitReached { limit },
            PlaceOrderError::LeaseExpired => Self::Infra(InfraError::unavailable(
                "the admission lease ran out before the order was committed",
            )),
            PlaceOrderError::Closed => PurchaseRejection::Closed.into(),
            PlaceOrderError::Throttled => Self::Throttled,
            PlaceOrderError::Infra(e) => e.into(),
        }
    }
}

impl PurchaseError {
    /// A short name of the refusal, for the purchase span's `outcome`.
    fn label(&self) -> &'static str {
        match self {
            Self::DropNotFound => "drop_not_found",
            Self::Size(_) => "invalid_sku",
            Self::KeyReused => "key_reused",
            Self::InProgress => "in_progress",
            Self::Refused(PurchaseRejection::TooEarly { .. }) => "too_early",
            Self::Refused(PurchaseRejection::Paused) => "paused",
            Self::Refused(PurchaseRejection::DrawDrop) => "draw_drop",
            Self::Refused(PurchaseRejection::Closed) => "closed",
            Self::SoldOut { .. } => "sold_out",
            Self::PerUserLimitExceeded { .. } => "per_user_limit_exceeded",
            Self::OrderLimitReached { .. } => "order_limit_reached",
            Self::Throttled => "throttled",
            Self::RateLimited(_) => "rate_limited",
            Self::Infra(e) if e.is_unavailable() => "unavailable",
            Self::Infra(_) => "unexpected",
        }
    }

    fn outcome(&self) -> Option<PurchaseOutcome> {
        match self {
            Self::Refused(PurchaseRejection::TooEarly { .. }) => Some(PurchaseOutcome::TooEarly),
            Self::Refused(PurchaseRejection::Closed) => Some(PurchaseOutcome::Closed),
            Self::SoldOut { .. } => Some(PurchaseOutcome::SoldOut),
            Self::PerUserLimitExceeded { .. } | Self::OrderLimitReached { .. } => {
                Some(PurchaseOutcome::PerUserLimit)
            }
            Self::Throttled => Some(PurchaseOutcome::Throttled),
            Self::DropNotFound
            | Self::Size(_)
            | Self::Refused(PurchaseRejection::Paused | PurchaseRejection::DrawDrop)
            | Self::KeyReused
            | Self::InProgress
            | Self::RateLimited(_)
            | Self::Infra(_) => None,
        }
    }
}

/// What a purchase asks of the rest of the application: the healer's bookkeeping of the gate,
/// and the order lifecycle for a replayed order.
#[cfg_attr(test, mockall::automock)]
#[async_trait::async_trait]
pub(crate) trait PurchaseHooks: Send + Sync {
    /// A replayed order as it is now: past its payment window, expired (its units freed).
    async fn as_it_is_now(&self, order: GoodsOrder) -> Result<GoodsOrder, InfraError>;
    /// A purchase of `drop` went past the gate, which must be resynced when it is back;
    /// `failing`: because the gate failed or its breaker is open (not because its flag is off).
    async fn gate_bypassed(&self, drop: DropId, failing: bool);
    /// The gate answered again after its breaker had opened.
    fn gate_is_back(&self);
    /// The gate disagrees with the database about `drop`: rebuild it in the background.
    fn resync_soon(&self, drop: LimitedDrop);
}

/// The purchase use case. Built once with the core and held by it, so a purchase builds nothing
/// of its own; the core passes itself as the [`PurchaseHooks`].
#[derive(Clone)]
pub(crate) struct Purchases {
    pub(crate) drops: Arc<DropCache>,
    /// The gate behind its flag and breaker; its flags also hold `limited-drop.enabled`.
    pub(crate) access: GateAccess,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) orders: Arc<dyn OrderRepository>,
    pub(crate) ledger: Arc<dyn PurchaseLedger>,
    /// Where a gate's seed is read.
    pub(crate) drop_store: Arc<dyn DropRepository>,
    pub(crate) stats: Arc<dyn StatsRecorder>,
    pub(crate) events: Arc<dyn EventPublisher>,
    pub(crate) buffer: WriteBuffer,
    /// One committer per drop, batching its admitted purchases.
    pub(crate) committers: Arc<Committers>,
    /// Gate seedings in flight: purchases finding a drop's gate empty share one seeding.
    pub(crate) seedings: Arc<SingleFlight<DropId, Shared<()>>>,
    pub(crate) tasks: Tasks,
    /// The admission lease of every reservation.
    pub(crate) lease: time::Duration,
    pub(crate) payment_window: PaymentWindow,
    /// The buyers' fleet-wide bucket (`RATE_LIMIT_PER_BUYER` in the fleet's store), charged
    /// once a purchase reaches a shared store; `None` without one.
    pub(crate) fleet_bucket: Option<crate::rate_limits::FleetBucket>,
}

impl Purchases {
    /// Buys `quantity` units of a drop, in the order of checks of the API contract.
    #[tracing::instrument(
        skip_all,
        fields(drop.id = %cmd.drop_id, user.id = %cmd.user_id, order.id, outcome)
    )]
    pub(crate) async fn purchase(
        &self,
        hooks: &dyn PurchaseHooks,
        cmd: PurchaseCommand,
    ) -> Result<Purchased, PurchaseError> {
        let drop_id = cmd.drop_id;
        // The size the purchase is of, once it is known to be one of the drop's: its outcome
        // is counted in the size's stats too (never under a sku a client made up).
        let mut size = None;
        let result = match self.purchase_inner(hooks, cmd, &mut size).await {
            Ok(Purchased {
                order,
                replayed: true,
            }) => hooks
                .as_it_is_now(order)
                .await
                .map(|order| Purchased {
                    order,
                    replayed: true,
                })
                .map_err(PurchaseError::from),
            other => other,
        };
        let span = tracing::Span::current();
        match &result {
            Ok(bought) => {
                span.record("order.id", bought.order.id.get());
                span.record(
                    "outcome",
                    if bought.replayed {
                        "replayed"
                    } else {
                        "created"
                    },
                );
            }
            Err(error) => {
                span.record("outcome", error.label());
            }
        }
        let outcome = match &result {
            Ok(Purchased {
                replayed: false, ..
            }) => Some(PurchaseOutcome::Success),
            Ok(_) => None,
            Err(error) => error.outcome(),
        };
        if let Some(outcome) = outcome
            && let Err(error) = self.stats.record(drop_id, size.as_ref(), outcome)
        {
            tracing::warn!(error = %error, "purchase outcome not counted");
        }
        result
    }

    /// The purchase; `chosen` gets the drop's size it is of, once checked.
    async fn purchase_inner(
        &self,
        hooks: &dyn PurchaseHooks,
        cmd: PurchaseCommand,
        chosen: &mut Option<goods_domain::Sku>,
    ) -> Result<Purchased, PurchaseError> {
        if !self.access.flags.drops_on() {
            return Err(PurchaseError::DropNotFound);
        }
        let drop = self
            .drops
            .load(cmd.drop_id)
            .await?
            .ok_or(PurchaseError::DropNotFound)?;
        // The size: one of the drop's, or none for a drop without sizes (an input error, so
        // before the sale's own answers).
        let size = drop.sizes.choose(cmd.sku.as_deref())?;
        chosen.clone_from(&size.sku);
        let cmd = Chosen {
            drop_id: cmd.drop_id,
            user_id: cmd.user_id,
            sku: size.sku.clone(),
            quantity: cmd.quantity,
            key: cmd.key,
        };
        let now = self.clock.now();
        // The sale window: before openAt neither the gate nor the database is touched.
        match drop.check_on_sale(now) {
            Ok(()) => {}
            Err(PurchaseRejection::Closed) => {
                // A replay still wins over CLOSED; only closed drops pay for this lookup.
                return match self.find_replay(&cmd).await? {
                    Some(replay) => Ok(replay),
                    None => Err(PurchaseRejection::Closed.into()),
                };
            }
            Err(refused) => return Err(refused.into()),
        }
        // Where a stage goes that decides who may try at all (a draw's entrants, a waiting
        // room's turn): after the sale window, before any unit is reserved.
        //
        // Admission, then the commit: the gate reserves the units and the database commits
        // them with the drop's next batch; without a gate the database decides alone.
        let sku = cmd.sku.clone();
        let gate = self.access.usable().cloned();
        // The buyer's fleet-wide bucket, now that the purchase reaches a shared store: in the
        // gate's own reservation when the gate keeps the buckets (one round trip for both);
        // else in a round trip of its own, unless the gate answers from this instance's memory
        // (a sold-out size), which costs the fleet nothing.
        let bucket = match &self.fleet_bucket {
            Some(fleet) if gate.as_ref().is_some_and(|g| g.keeps_buckets()) => Some(fleet.limit),
            Some(fleet) => {
                if !gate
                    .as_ref()
                    .is_some_and(|g| g.answers_locally(drop.id, sku.clone()))
                {
                    fleet
                        .charge(cmd.user_id)
                        .await
                        .map_err(PurchaseError::RateLimited)?;
                }
                None
            }
            None => None,
        };
        let result = match gate {
            Some(gate) => {
                self.through_gate(hooks, gate, &drop, cmd, now, bucket)
                    .await
            }
            None => self.database_alone(hooks, &drop, &cmd, now).await,
        };
        // A sold-out answer is the size's: the buyer learns which one.
        result.map_err(|error| match error {
            PurchaseError::SoldOut { remaining, .. } => PurchaseError::SoldOut { remaining, sku },
            other => other,
        })
    }
}

/// What a buyer asked for: units of a size of the drop, under a key.
struct Asked<'a> {
    user_id: UserId,
    sku: Option<&'a goods_domain::Sku>,
    quantity: Quantity,
    key: &'a IdempotencyKey,
}

/// The ledger's command for the buyer's units; `deadline` is the lease of the gate's
/// reservation, if the gate admitted them.
fn place_order(
    drop: &LimitedDrop,
    asked: Asked<'_>,
    now: OffsetDateTime,
    deadline: Option<OffsetDateTime>,
    default_window: goods_domain::PaymentWindow,
) -> PlaceOrder {
    PlaceOrder {
        window: drop.payment_window_or(default_window),
        drop_id: drop.id,
        product_id: drop.product_id,
        limited_quantity: drop.limited_quantity,
        per_user_limit: drop.per_user_limit,
        price: drop.price,
        user_id: asked.user_id,
        sku: asked.sku.cloned(),
        quantity: asked.quantity,
        key: asked.key.clone(),
        now,
        deadline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{DomainEvent, MockAdmissionGate, ReserveOutcome, StaleResolution};
    use goods_domain::{InfraError, OrderStatus};
    use time::Duration;

    /// The purchase over `m`'s ports alone (and `gate`, if any).
    fn purchases(m: Mocks, gate: Option<MockAdmissionGate>) -> Purchases {
        let drop_store: Arc<dyn DropRepository> = Arc::new(m.drops);
        let ledger: Arc<dyn PurchaseLedger> = Arc::new(m.ledger);
        let tasks = crate::Tasks::default();
        Purchases {
            drops: Arc::new(DropCache::new(Arc::clone(&drop_store))),
            access: GateAccess {
                gate: gate.map(|g| Arc::new(g) as Arc<dyn goods_domain::ports::AdmissionGate>),
                breaker: Arc::default(),
                flags: Arc::default(),
            },
            clock: Arc::new(m.clock),
            orders: Arc::new(m.orders),
            ledger: Arc::clone(&ledger),
            drop_store,
            stats: Arc::new(m.stats),
            events: Arc::new(m.events),
            buffer: crate::WriteBuffer::new(m.permits, std::time::Duration::from_millis(20)),
            committers: Arc::new(Committers::new(
                crate::mechanisms::group_commit::Orders(ledger),
                crate::GroupCommit::default(),
                tasks.clone(),
            )),
            seedings: Arc::default(),
            tasks,
            lease: Duration::seconds(8),
            payment_window: PaymentWindow::default(),
            fleet_bucket: None,
        }
    }

    /// `RATE_LIMIT_PER_BUYER`'s 20/s, in the fleet's store `fleet`.
    fn fleet_bucket(
        fleet: goods_domain::ports::MockRateLimiter,
    ) -> crate::rate_limits::FleetBucket {
        crate::rate_limits::FleetBucket::new(
            goods_domain::RateLimit::parse("20/s").unwrap().unwrap(),
            Arc::new(fleet),
        )
    }

    fn refusal() -> goods_domain::RateDecision {
        goods_domain::RateDecision {
            allowed: false,
            remaining: 0,
            retry_after: std::time::Duration::from_millis(40),
            reset: std::time::Duration::from_secs(1),
        }
    }

    /// A gate that keeps the buckets is given the buyer's with the reservation (and the fleet's
    /// limiter is not asked): one round trip for both. Its refusal is the buyer's 429, and
    /// nothing is committed.
    #[tokio::test]
    async fn a_gate_that_keeps_the_buckets_charges_the_buyers_in_its_reservation() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        let mut gate = gate_without_markers();
        gate.expect_keeps_buckets().return_const(true);
        gate.expect_reserve()
            .withf(|r| r.bucket == goods_domain::RateLimit::parse("20/s").unwrap())
            .times(1)
            .returning(|_| Ok(ReserveOutcome::RateLimited(refusal())));
        let mut fleet = goods_domain::ports::MockRateLimiter::new();
        fleet.expect_admit().times(0);
        let mut purchases = purchases(m, Some(gate));
        purchases.fleet_bucket = Some(fleet_bucket(fleet));
        let err = purchases.purchase(&hooks(), cmd(1)).await.unwrap_err();
        match err {
            PurchaseError::RateLimited(limited) => {
                assert_eq!(limited.key, goods_domain::RateKey::Buyer(buyer().user_id));
                assert_eq!(limited.decision, refusal());
            }
            other => panic!("{other:?}"),
        }
    }

    /// A gate that holds nothing yet is seeded and asked again: the second ask is the same
    /// request, so the bucket goes with the first alone (charged once).
    #[tokio::test]
    async fn the_bucket_goes_with_the_first_reservation_only() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_gate_seed()
            .returning(|drop| Ok(sold_out_seed(drop)));
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(|_| created_one());
        let mut gate = gate_without_markers();
        gate.expect_keeps_buckets().return_const(true);
        gate.expect_seed_if_absent().returning(|_| Ok(()));
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&asked);
        gate.expect_reserve().times(2).returning(move |r| {
            let mut seen = seen.lock().unwrap();
            seen.push(r.bucket.is_some());
            Ok(if seen.len() == 1 {
                ReserveOutcome::NotSeeded
            } else {
                ReserveOutcome::Admitted
            })
        });
        gate.expect_confirm_all().returning(|_| Ok(()));
        let mut purchases = purchases(m, Some(gate));
        purchases.fleet_bucket = Some(fleet_bucket(goods_domain::ports::MockRateLimiter::new()));
        purchases.purchase(&hooks(), cmd(1)).await.unwrap();
        assert_eq!(*asked.lock().unwrap(), [true, false]);
    }

    /// A gate that does not keep the buckets (a Redis Cluster's): the fleet's limiter charges
    /// the buyer first, in a round trip of its own; its refusal never reaches the gate. A
    /// purchase the gate answers from this instance's memory costs the fleet nothing.
    #[rstest::rstest]
    #[case::refused_by_the_fleet(false, 1, 0)]
    #[case::answered_here(true, 0, 1)]
    #[tokio::test]
    async fn elsewhere_the_fleets_limiter_charges_the_buyer_before_the_gate(
        #[case] answered_here: bool,
        #[case] fleet_asked: usize,
        #[case] reserved: usize,
    ) {
        let m = Mocks::at(OPEN);
        let mut gate = gate_without_markers();
        gate.expect_keeps_buckets().return_const(false);
        gate.expect_answers_locally().return_const(answered_here);
        gate.expect_reserve()
            .withf(|r| r.bucket.is_none())
            .times(reserved)
            .returning(|_| Ok(ReserveOutcome::SoldOut { remaining: 0 }));
        let mut fleet = goods_domain::ports::MockRateLimiter::new();
        fleet
            .expect_admit()
            .times(fleet_asked)
            .returning(|_, _| Ok(refusal()));
        let mut purchases = purchases(m, Some(gate));
        purchases.fleet_bucket = Some(fleet_bucket(fleet));
        let err = purchases.purchase(&hooks(), cmd(1)).await.unwrap_err();
        if answered_here {
            assert!(matches!(err, PurchaseError::SoldOut { .. }), "{err:?}");
        } else {
            assert!(matches!(err, PurchaseError::RateLimited(_)), "{err:?}");
        }
    }

    /// A gate that holds no finished attempt of any buyer's key (no done marker).
    fn gate_without_markers() -> MockAdmissionGate {
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate
    }

    /// Hooks that accept every call; a replayed order is as it was.
    fn hooks() -> MockPurchaseHooks {
        let mut hooks = MockPurchaseHooks::new();
        hooks.expect_as_it_is_now().returning(Ok);
        hooks.expect_gate_bypassed().returning(|_, _| ());
        hooks.expect_gate_is_back().returning(|| ());
        hooks.expect_resync_soon().returning(|_| ());
        hooks
    }

    async fn buy(
        m: Mocks,
        gate: Option<MockAdmissionGate>,
        hooks: MockPurchaseHooks,
        cmd: PurchaseCommand,
    ) -> Result<Purchased, PurchaseError> {
        purchases(m, gate).purchase(&hooks, cmd).await
    }

    #[tokio::test]
    async fn admitted_purchase_commits_the_order_and_confirms_the_gate() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(|_| created_one());
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        // Confirmed by the drop's committer with its batch, before the buyer is answered.
        gate.expect_confirm_all()
            .withf(|confirmed| {
                matches!(confirmed, [(r, id)] if *id == order_id() && r.user_id == cmd(1).user_id)
            })
            .times(1)
            .returning(|_| Ok(()));
        gate.expect_confirm().times(0);
        gate.expect_cancel().times(0);
        let bought = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap();
        assert_eq!((bought.order.id, bought.replayed), (order_id(), false));
    }

    #[tokio::test]
    async fn sold_out_at_the_gate_never_reaches_the_database() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        m.drops.expect_sold_quantity().times(0);
        let gate = gate_answering(ReserveOutcome::SoldOut { remaining: 0 });
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::SoldOut {
                remaining: 0,
                sku: None
            }
        ));
    }

    #[tokio::test]
    async fn per_user_limit_at_the_gate_never_reaches_the_database() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        let gate = gate_answering(ReserveOutcome::PerUserLimitExceeded { limit: 2 });
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::PerUserLimitExceeded { limit: 2 }
        ));
    }

    #[tokio::test]
    async fn before_open_at_neither_gate_nor_database_is_touched() {
        let mut m = Mocks::at(OPEN - Duration::milliseconds(1));
        m.ledger.expect_place_orders().times(0);
        let mut gate = gate_without_markers();
        gate.expect_reserve().times(0);
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(
            matches!(err, PurchaseError::Refused(PurchaseRejection::TooEarly { open_at }) if open_at == OPEN)
        );
    }

    #[tokio::test]
    async fn no_write_slot_in_time_is_throttled_and_the_units_go_back() {
        let mut m = Mocks::at(OPEN);
        m.permits = 0;
        m.ledger.expect_place_orders().times(0);
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(1).returning(|_| Ok(()));
        gate.expect_confirm().times(0);
        gate.expect_confirm_all().times(0);
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(err, PurchaseError::Throttled));
    }

    #[tokio::test]
    async fn an_unknown_database_outcome_leaves_the_reservation_to_its_lease() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(1).returning(|_| {
            Ok(vec![Err(PlaceOrderError::Infra(InfraError::msg(
                "connection reset",
            )))])
        });
        // The purchase may have committed: neither confirm nor cancel; the lease decides.
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(0);
        gate.expect_confirm().times(0);
        gate.expect_confirm_all().times(0);
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(
            matches!(&err, PurchaseError::Infra(e) if !e.is_unavailable()),
            "{err:?}"
        );
    }

    #[rstest::rstest]
    #[case(PlaceOrderError::LeaseExpired)]
    #[case(PlaceOrderError::Infra(InfraError::unavailable("pool exhausted")))]
    #[tokio::test]
    async fn a_database_past_its_bounds_is_unavailable(#[case] error: PlaceOrderError) {
        let mut m = Mocks::at(OPEN);
        let error = std::sync::Mutex::new(Some(error));
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(move |_| Ok(vec![Err(error.lock().unwrap().take().unwrap())]));
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(0);
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(
            matches!(&err, PurchaseError::Infra(e) if e.is_unavailable()),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn the_ledger_is_told_the_lease_of_the_reservation() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .withf(|b| matches!(b, [o] if o.deadline == Some(OPEN + Duration::seconds(8))))
            .times(1)
            .returning(|_| created_one());
        let mut gate = gate_without_markers();
        gate.expect_reserve()
            .withf(|r| r.deadline == OPEN + Duration::seconds(8))
            .returning(|_| Ok(ReserveOutcome::Admitted));
        gate.expect_confirm_all().returning(|_| Ok(()));
        buy(m, Some(gate), hooks(), cmd(1)).await.unwrap();
    }

    fn sized(quantity: i64) -> PurchaseCommand {
        PurchaseCommand {
            sku: Some("US-9".to_owned()),
            ..cmd(quantity)
        }
    }

    /// The mocks over [`sample_sized_drop`], at `now`.
    fn sized_mocks(now: OffsetDateTime) -> Mocks {
        let mut m = Mocks::at(now);
        m.drops = drops_serving(sample_sized_drop());
        m
    }

    #[tokio::test]
    async fn the_size_asked_for_reaches_the_gate_and_the_ledger() {
        let us9 = || sku("US-9");
        let mut m = sized_mocks(OPEN);
        m.ledger
            .expect_place_orders()
            .withf(move |b| matches!(b, [o] if o.sku == us9()))
            .times(1)
            .returning(|_| created_one());
        let mut gate = gate_without_markers();
        gate.expect_reserve()
            .withf(move |r| r.sku == us9())
            .times(1)
            .returning(|_| Ok(ReserveOutcome::Admitted));
        gate.expect_confirm_all().returning(|_| Ok(()));
        buy(m, Some(gate), hooks(), sized(1)).await.unwrap();
    }

    fn stale_first_attempt() -> ReserveOutcome {
        ReserveOutcome::InProgress {
            deadline: OPEN - Duration::seconds(1),
        }
    }

    #[tokio::test]
    async fn a_retry_past_the_lease_replays_the_order_the_first_attempt_committed() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        m.ledger
            .expect_resolve_stale()
            .withf(|_, _, deadline| *deadline == OPEN - Duration::seconds(1))
            .times(1)
            .returning(|_, _, _| {
                Ok(StaleResolution::Committed(sample_order(
                    OrderStatus::Pending,
                )))
            });
        let mut gate = gate_answering(stale_first_attempt());
        gate.expect_confirm()
            .withf(|r, id| *id == order_id() && r.deadline == OPEN - Duration::seconds(1))
            .times(1)
            .returning(|_, _| Ok(()));
        gate.expect_cancel().times(0);
        let bought = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap();
        assert_eq!((bought.order.id, bought.replayed), (order_id(), true));
    }

    #[tokio::test]
    async fn a_retry_past_the_lease_of_an_abandoned_attempt_starts_afresh() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_resolve_stale()
            .times(1)
            .returning(|_, _, _| Ok(StaleResolution::Abandoned));
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(|_| created_one());
        let mut gate = gate_without_markers();
        let mut answers = vec![ReserveOutcome::Admitted, stale_first_attempt()];
        gate.expect_reserve()
            .times(2)
            .returning(move |_| Ok(answers.pop().unwrap()));
        // The first attempt's units go back (its own lease, not the new one's).
        gate.expect_cancel()
            .withf(|r| r.deadline == OPEN - Duration::seconds(1))
            .times(1)
            .returning(|_| Ok(()));
        gate.expect_confirm_all().times(1).returning(|_| Ok(()));
        let bought = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap();
        assert!(!bought.replayed);
    }

    #[tokio::test]
    async fn a_lease_the_database_clock_has_not_passed_is_still_in_progress() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_resolve_stale()
            .times(1)
            .returning(|_, _, _| Ok(StaleResolution::Pending));
        let mut gate = gate_answering(stale_first_attempt());
        gate.expect_cancel().times(0);
        gate.expect_confirm().times(0);
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(err, PurchaseError::InProgress));
    }

    #[rstest::rstest]
    #[case::sold_out(PlaceOrderError::SoldOut { remaining: 0 })]
    #[case::per_user_limit(PlaceOrderError::PerUserLimitExceeded { limit: 2 })]
    #[tokio::test]
    async fn a_database_refusal_after_the_gate_admitted_resyncs_the_gate(
        #[case] refusal: PlaceOrderError,
    ) {
        let mut m = Mocks::at(OPEN);
        let refusal = std::sync::Mutex::new(Some(refusal));
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(move |_| Ok(vec![Err(refusal.lock().unwrap().take().unwrap())]));
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(1).returning(|_| Ok(()));
        let mut hooks = MockPurchaseHooks::new();
        hooks
            .expect_resync_soon()
            .withf(|drop| drop.id == drop_id())
            .times(1)
            .returning(|_| ());
        let err = buy(m, Some(gate), hooks, cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::SoldOut { .. } | PurchaseError::PerUserLimitExceeded { .. }
        ));
    }

    #[tokio::test]
    async fn a_database_refusal_after_admission_gives_the_units_back() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().returning(|_| {
            Ok(vec![Err(PlaceOrderError::PerUserLimitExceeded {
                limit: 2,
            })])
        });
        let mut gate = gate_answering(ReserveOutcome::Admitted);
        gate.expect_cancel().times(1).returning(|_| Ok(()));
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::PerUserLimitExceeded { limit: 2 }
        ));
    }

    #[tokio::test]
    async fn a_replay_is_answered_from_the_marker_without_a_second_reservation() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        m.orders
            .expect_get()
            .times(1)
            .returning(|_| Ok(Some(sample_order(OrderStatus::Pending))));
        let mut gate = gate_answering(ReserveOutcome::Replay(order_id()));
        gate.expect_confirm().times(0);
        gate.expect_confirm_all().times(0);
        gate.expect_cancel().times(0);
        let bought = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap();
        assert!(bought.replayed);
    }

    /// A marker naming another buyer's order (a gate store someone else wrote to): that order is
    /// never shown; the database's own answer for this buyer and key is, and the drop is
    /// resynced.
    #[rstest::rstest]
    #[case::another_buyers_order(2, "k", Some(true), "replayed")]
    #[case::another_key(1, "other", Some(true), "replayed")]
    #[case::nothing_in_the_database(2, "k", None, "unavailable")]
    #[tokio::test]
    async fn a_marker_naming_an_order_that_is_not_this_requests_is_only_a_hint(
        #[case] owner: i64,
        #[case] their_key: &str,
        #[case] own_order: Option<bool>,
        #[case] expected: &str,
    ) {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        let mut theirs = sample_order(OrderStatus::Pending);
        theirs.id = goods_domain::OrderId::parse(999).unwrap();
        theirs.user_id = UserId::parse(owner + 100).unwrap();
        theirs.idempotency_key = IdempotencyKey::parse(their_key).unwrap();
        if owner == 1 {
            theirs.user_id = buyer().user_id;
        }
        m.orders
            .expect_get()
            .times(1)
            .returning(move |_| Ok(Some(theirs.clone())));
        m.orders
            .expect_find_by_key()
            .times(1)
            .returning(move |_, _| Ok(own_order.map(|_| sample_order(OrderStatus::Pending))));
        let gate = gate_answering(ReserveOutcome::Replay(
            goods_domain::OrderId::parse(999).unwrap(),
        ));
        let mut hooks = hooks();
        hooks.checkpoint();
        hooks.expect_as_it_is_now().returning(Ok);
        // The drop is resynced.
        hooks.expect_resync_soon().times(1).returning(|_| ());
        let result = buy(m, Some(gate), hooks, cmd(1)).await;
        match (expected, result) {
            ("replayed", Ok(bought)) => {
                assert!(bought.replayed);
                assert_eq!(
                    bought.order.id,
                    order_id(),
                    "the database's order, not the marker's"
                );
            }
            ("unavailable", Err(PurchaseError::Infra(e))) if e.is_unavailable() => {}
            (_, other) => panic!("{expected}: {other:?}"),
        }
    }

    #[rstest::rstest]
    #[case(ReserveOutcome::InProgress { deadline: CLOSE })]
    #[case(ReserveOutcome::KeyReused)]
    #[tokio::test]
    async fn key_conflicts_at_the_gate_never_reach_the_database(#[case] outcome: ReserveOutcome) {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().times(0);
        let err = buy(m, Some(gate_answering(outcome)), hooks(), cmd(1))
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::InProgress | PurchaseError::KeyReused
        ));
    }

    #[tokio::test]
    async fn an_unseeded_gate_is_seeded_from_the_database_once_and_asked_again() {
        let mut m = Mocks::at(OPEN);
        m.drops
            .expect_gate_seed()
            .times(1)
            .returning(|drop| Ok(sold_out_seed(drop)));
        let mut gate = gate_without_markers();
        let mut answers = vec![
            ReserveOutcome::SoldOut { remaining: 0 },
            ReserveOutcome::NotSeeded,
        ];
        gate.expect_reserve()
            .times(2)
            .returning(move |_| Ok(answers.pop().unwrap()));
        gate.expect_seed_if_absent().times(1).returning(|_| Ok(()));
        let err = buy(m, Some(gate), hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(err, PurchaseError::SoldOut { .. }));
    }

    #[tokio::test]
    async fn an_unreachable_gate_falls_back_to_the_database_and_raises_gate_degraded() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(|_| created_one());
        m.events
            .expect_publish()
            .withf(|e| matches!(e, DomainEvent::GateDegraded { .. }))
            .times(1)
            .returning(|_| Ok(()));
        // The drop's goods.gate.degraded, before the buyer is answered.
        let mut hooks = MockPurchaseHooks::new();
        hooks
            .expect_gate_bypassed()
            .withf(|drop, failing| (*drop, *failing) == (drop_id(), true))
            .times(1)
            .returning(|_, _| ());
        let mut gate = gate_without_markers();
        gate.expect_reserve()
            .returning(|_| Err(InfraError::msg("connection refused")));
        // The reserve's outcome was unknown, so the committed order is confirmed to the gate,
        // after the buyer has the answer: the gate that just failed is not waited for again.
        let steps = Arc::new(std::sync::Mutex::new(Vec::new()));
        let confirmed = Arc::clone(&steps);
        gate.expect_confirm()
            .withf(|_, id| *id == order_id())
            .times(1)
            .returning(move |_, _| {
                confirmed.lock().unwrap().push("confirmed");
                Err(InfraError::msg("connection refused"))
            });
        let bought = buy(m, Some(gate), hooks, cmd(1)).await.unwrap();
        steps.lock().unwrap().push("answered");
        assert!(!bought.replayed);
        tokio::task::yield_now().await;
        assert_eq!(*steps.lock().unwrap(), ["answered", "confirmed"]);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_gate_failure_purchases_skip_the_gate_until_the_cool_down_has_passed() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .times(3)
            .returning(|_| created_one());
        m.events.expect_publish().times(1).returning(|_| Ok(()));
        let mut gate = gate_without_markers();
        gate.expect_reserve()
            .times(2)
            .returning(|_| Err(InfraError::msg("timeout")));
        gate.expect_confirm()
            .returning(|_, _| Err(InfraError::msg("timeout")));
        // Three purchases bypass a failing gate, none of them tells the core it is back.
        let mut hooks = MockPurchaseHooks::new();
        hooks
            .expect_gate_bypassed()
            .withf(|_, failing| *failing)
            .times(3)
            .returning(|_, _| ());
        hooks.expect_gate_is_back().times(0);
        let (metrics, _guard) = local_metrics();
        let purchases = purchases(m, Some(gate));
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
        // Within the cool-down the gate is not asked at all.
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
        tokio::time::advance(crate::breaker::COOL_DOWN).await;
        // Then one purchase tries it again (and, failing, re-opens the breaker quietly).
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
        let counted = counters(&metrics);
        let count = |series: &str| counted.get(series).copied().unwrap_or(0);
        assert_eq!(
            (
                count("gate_fallbacks_total{reason=gate_failed}"),
                count("gate_fallbacks_total{reason=breaker_open}"),
            ),
            (2, 1),
            "{counted:?}"
        );
        // One outage, one gate_degraded event (as the one published event above).
        assert_eq!(count("gate_degraded_events_total{}"), 1, "{counted:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_that_answers_after_its_cool_down_is_reported_back_once() {
        let mut m = Mocks::at(OPEN);
        m.ledger.expect_place_orders().returning(|_| created_one());
        m.events.expect_publish().times(1).returning(|_| Ok(()));
        let mut gate = gate_without_markers();
        let mut answers = vec![
            Ok(ReserveOutcome::Admitted),
            Ok(ReserveOutcome::Admitted),
            Err(InfraError::msg("timeout")),
        ];
        gate.expect_reserve()
            .times(3)
            .returning(move |_| answers.pop().unwrap());
        gate.expect_confirm().returning(|_, _| Ok(()));
        gate.expect_confirm_all().returning(|_| Ok(()));
        let mut hooks = hooks();
        hooks.checkpoint();
        hooks.expect_gate_bypassed().times(1).returning(|_, _| ());
        hooks.expect_gate_is_back().times(1).returning(|| ());
        let purchases = purchases(m, Some(gate));
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
        tokio::time::advance(crate::breaker::COOL_DOWN).await;
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
        purchases.purchase(&hooks, cmd(1)).await.unwrap();
    }

    #[tokio::test]
    async fn without_a_gate_the_database_decides_alone() {
        let mut m = Mocks::at(OPEN);
        m.ledger
            .expect_place_orders()
            .times(1)
            .returning(|_| Ok(vec![Err(PlaceOrderError::SoldOut { remaining: 0 })]));
        // No gate at all: nothing to resync later.
        let mut hooks = hooks();
        hooks.checkpoint();
        hooks.expect_gate_bypassed().times(0);
        let err = buy(m, None, hooks, cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::SoldOut {
                remaining: 0,
                sku: None
            }
        ));
    }

    #[tokio::test]
    async fn a_closed_drop_still_replays_an_earlier_success() {
        // Paid before the close (a PENDING order this old would be expired by the replay).
        let mut m = Mocks::at(CLOSE);
        m.orders
            .expect_find_by_key()
            .returning(|_, _| Ok(Some(sample_order(OrderStatus::Paid))));
        let bought = buy(m, None, hooks(), cmd(1)).await.unwrap();
        assert!(bought.replayed);
        assert_eq!(bought.order.status, OrderStatus::Paid);
    }

    #[tokio::test]
    async fn a_closed_drop_refuses_a_new_request_as_closed() {
        let mut m = Mocks::at(CLOSE);
        m.orders.expect_find_by_key().returning(|_, _| Ok(None));
        m.ledger.expect_place_orders().times(0);
        let err = buy(m, None, hooks(), cmd(1)).await.unwrap_err();
        assert!(matches!(
            err,
            PurchaseError::Refused(PurchaseRejection::Closed)
        ));
    }

    #[tokio::test]
    async fn a_closed_drop_refuses_a_reused_key_with_a_different_body() {
        let mut m = Mocks::at(CLOSE);
        m.orders
            .expect_find_by_key()
            .returning(|_, _| Ok(Some(sample_order(OrderStatus::Pending))));
        let err = buy(m, None, hooks(), cmd(2)).await.unwrap_err();
        assert!(matches!(err, PurchaseError::KeyReused));
    }

    #[tokio::test]
    async fn a_closed_drop_refuses_the_same_key_for_another_size() {
        // The order was of US-10; the same key and units for US-9 is another request, and for
        // US-10 the same one.
        let buy_at_close = async |size: &str| {
            let mut m = sized_mocks(CLOSE);
            m.orders.expect_find_by_key().returning(|_, _| {
                Ok(Some(GoodsOrder {
                    sku: sku("US-10"),
                    ..sample_order(OrderStatus::Paid)
                }))
            });
            let cmd = PurchaseCommand {
                sku: Some(size.to_owned()),
                ..cmd(1)
            };
            buy(m, None, hooks(), cmd).await
        };
        assert!(matches!(
            buy_at_close("US-9").await,
            Err(PurchaseError::KeyReused)
        ));
        assert!(matches!(
            buy_at_close("US-10").await,
            Ok(Purchased { replayed: true, .. })
        ));
    }

    #[rstest::rstest]
    #[case::missing(true, None, SkuRejection::Missing)]
    #[case::unknown(true, Some("US-11"), SkuRejection::Unknown)]
    #[case::not_a_sku_at_all(true, Some("US 9"), SkuRejection::Unknown)]
    #[case::a_drop_without_sizes(false, Some("US-9"), SkuRejection::Unsized)]
    #[tokio::test]
    async fn a_size_that_is_not_one_of_the_drops_touches_neither_gate_nor_database(
        #[case] in_sizes: bool,
        #[case] size: Option<&str>,
        #[case] rejection: SkuRejection,
    ) {
        let mut m = if in_sizes {
            sized_mocks(OPEN)
        } else {
            Mocks::at(OPEN)
        };
        m.ledger.expect_place_orders().times(0);
        m.orders.expect_find_by_key().times(0);
        // An input error: counted nowhere, neither in the drop's stats nor under the sku.
        m.stats.checkpoint();
        m.stats.expect_record().never();
        let mut gate = MockAdmissionGate::new();
        gate.expect_reserve().times(0);
        let cmd = PurchaseCommand {
            sku: size.map(str::to_owned),
            ..cmd(1)
        };
        let err = buy(m, Some(gate), hooks(), cmd).await.unwrap_err();
        assert!(
            matches!(err, PurchaseError::Size(r) if r == rejection),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_sold_out_size_is_answered_with_its_sku_without_the_database() {
        let mut m = sized_mocks(OPEN);
        m.ledger.expect_place_orders().times(0);
        // Counted once, in the drop's stats and in the size's.
        m.stats.checkpoint();
        m.stats
            .expect_record()
            .withf(|_, size, outcome| {
                size.cloned() == sku("US-9") && *outcome == PurchaseOutcome::SoldOut
            })
            .times(1)
            .returning(|_, _, _| Ok(()));
        let gate = gate_answering(ReserveOutcome::SoldOut { remaining: 0 });
        let err = buy(m, Some(gate), hooks(), sized(1)).await.unwrap_err();
        assert!(
            matches!(&err, PurchaseError::SoldOut { remaining: 0, sku: s } if *s == sku("US-9")),
            "{err:?}"
        );
    }
}
