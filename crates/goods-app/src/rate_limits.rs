//! Rate limits (`RATE_LIMIT_PER_BUYER`, `RATE_LIMIT_PER_IP`), the design's token bucket in two
//! layers: this instance's buckets first (a few atomics), then the fleet's (Redis) only for what
//! reaches a shared store. A purchase pays the fleet's bucket once it reaches one: in the gate's
//! own reservation when the gate keeps the buckets (no round trip of its own), else in one
//! round trip ([`FleetBucket`]). A failing fleet store is skipped.

use crate::drops::cache::DropCache;
use crate::{GoodsApp, telemetry};
use goods_domain::ports::{Clock, RateLimiter};
use goods_domain::{DropId, PurchaseRejection, RateDecision, RateKey, RateLimit, Sku, UserId};
use std::net::IpAddr;
use std::sync::Arc;

/// The limits and the buckets that keep them.
#[derive(Clone)]
pub struct RateLimits {
    buyer: Option<RateLimit>,
    address: Option<RateLimit>,
    local: Arc<dyn RateLimiter>,
    fleet: Option<Arc<dyn RateLimiter>>,
}

impl RateLimits {
    /// `buyer` and `address` limits (`None`: off), counted in `local` and, for the fleet, in
    /// `fleet`.
    pub fn new(
        buyer: Option<RateLimit>,
        address: Option<RateLimit>,
        local: Arc<dyn RateLimiter>,
        fleet: Option<Arc<dyn RateLimiter>>,
    ) -> Self {
        Self {
            buyer,
            address,
            local,
            fleet,
        }
    }
}

/// A request refused by a bucket, with what the answer tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    /// The limit that refused it (the `RateLimit-Policy` header).
    pub limit: RateLimit,
    pub key: RateKey,
    pub decision: RateDecision,
}

/// Where a bucket's answer came from, for the metric.
fn refused(
    layer: &'static str,
    key: RateKey,
    limit: RateLimit,
    decision: RateDecision,
) -> RateLimited {
    metrics::counter!(telemetry::RATE_LIMITED, "policy" => key.policy(), "layer" => layer)
        .increment(1);
    RateLimited {
        limit,
        key,
        decision,
    }
}

/// The rate limits at work: the limits, and what tells a purchase the gate answers here or the
/// sale-start gate refuses from the drop cache. Built once with the limits.
#[derive(Clone)]
pub(crate) struct Limiter {
    limits: RateLimits,
    cache: Arc<DropCache>,
    clock: Arc<dyn Clock>,
}

/// The buyers' fleet-wide bucket as a purchase pays it, where it reaches a shared store.
#[derive(Clone)]
pub(crate) struct FleetBucket {
    pub(crate) limit: RateLimit,
    fleet: Arc<dyn RateLimiter>,
}

impl FleetBucket {
    pub(crate) fn new(limit: RateLimit, fleet: Arc<dyn RateLimiter>) -> Self {
        Self { limit, fleet }
    }

    /// Charges `buyer`'s bucket in the fleet's store, in a round trip of its own; a failing
    /// store leaves the instance's decision (counted).
    pub(crate) async fn charge(&self, buyer: UserId) -> Result<(), RateLimited> {
        fleet(self.fleet.as_ref(), RateKey::Buyer(buyer), self.limit).await
    }

    /// The refusal of `buyer` by the bucket, as the gate answered it.
    pub(crate) fn refused(&self, buyer: UserId, decision: RateDecision) -> RateLimited {
        refused("fleet", RateKey::Buyer(buyer), self.limit, decision)
    }
}

impl GoodsApp {
    /// Sets the rate limits (`RATE_LIMIT_PER_BUYER`, `RATE_LIMIT_PER_IP`); without it nothing
    /// is limited.
    #[must_use]
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.purchases.fleet_bucket = limits
            .buyer
            .zip(limits.fleet.clone())
            .map(|(limit, fleet)| FleetBucket::new(limit, fleet));
        self.rate_limits = Some(Limiter {
            limits,
            cache: Arc::clone(&self.drops),
            clock: Arc::clone(&self.ports.clock),
        });
        self
    }

    /// Counts a request without an identity from `address` (`RATE_LIMIT_PER_IP`), in this
    /// instance's buckets: such requests are answered from its memory.
    pub async fn limit_address(&self, address: IpAddr) -> Result<(), RateLimited> {
        match &self.rate_limits {
            Some(limiter) => limiter.address(address).await,
            None => Ok(()),
        }
    }

    /// Counts a verified caller's read (`RATE_LIMIT_PER_IP`, per caller rather than per
    /// address), in this instance's buckets, as an address's requests are.
    pub async fn limit_reader(&self, reader: UserId) -> Result<(), RateLimited> {
        match &self.rate_limits {
            Some(limiter) => limiter.reader(reader).await,
            None => Ok(()),
        }
    }

    /// Counts a buyer's purchase (of `drop`'s size, when it says one) here, unless the
    /// sale-start gate refuses it (the purchase pays the fleet's bucket where it reaches a
    /// shared store); an entry or a cancel (`drop`: `None`) here, then in the fleet's buckets.
    pub async fn limit_buyer(
        &self,
        buyer: UserId,
        drop: Option<(DropId, Option<&Sku>)>,
    ) -> Result<(), RateLimited> {
        match &self.rate_limits {
            Some(limiter) => limiter.buyer(buyer, drop).await,
            None => Ok(()),
        }
    }
}

impl Limiter {
    async fn address(&self, address: IpAddr) -> Result<(), RateLimited> {
        match self.limits.address {
            Some(limit) => local(&self.limits, RateKey::Address(address), limit).await,
            None => Ok(()),
        }
    }

    async fn reader(&self, reader: UserId) -> Result<(), RateLimited> {
        match self.limits.address {
            Some(limit) => local(&self.limits, RateKey::Reader(reader), limit).await,
            None => Ok(()),
        }
    }

    /// A purchase here (before `openAt` not at all, as the 425 touches no store); an entry or
    /// a cancel here, then in the fleet.
    async fn buyer(
        &self,
        buyer: UserId,
        drop: Option<(DropId, Option<&Sku>)>,
    ) -> Result<(), RateLimited> {
        let Some(limit) = self.limits.buyer else {
            return Ok(());
        };
        if let Some((drop, _)) = drop
            && self.before_open(drop).await
        {
            return Ok(());
        }
        let key = RateKey::Buyer(buyer);
        local(&self.limits, key, limit).await?;
        match (&self.limits.fleet, drop) {
            (Some(store), None) => fleet(store.as_ref(), key, limit).await,
            // A purchase pays the fleet's bucket in its use case (`FleetBucket`).
            _ => Ok(()),
        }
    }

    /// Whether a purchase of `drop` now meets the sale-start gate (the drop's own rule). A drop
    /// this instance cannot read is not: the purchase is counted, and answered by its use case.
    async fn before_open(&self, drop: DropId) -> bool {
        let now = self.clock.now();
        matches!(
            self.cache.load(drop).await,
            Ok(Some(drop)) if matches!(
                drop.check_on_sale(now),
                Err(PurchaseRejection::TooEarly { .. })
            )
        )
    }
}

/// `key`'s bucket in the fleet's store; a failing store leaves the instance's decision.
async fn fleet(store: &dyn RateLimiter, key: RateKey, limit: RateLimit) -> Result<(), RateLimited> {
    match store.admit(key, limit).await {
        Ok(decision) if decision.allowed => Ok(()),
        Ok(decision) => Err(refused("fleet", key, limit, decision)),
        Err(error) => {
            // The instance's bucket already counted this request: it stands alone.
            metrics::counter!(telemetry::RATE_LIMIT_FALLBACKS).increment(1);
            tracing::debug!(error = %error, "fleet rate limit unavailable; this instance's applies");
            Ok(())
        }
    }
}

async fn local(limits: &RateLimits, key: RateKey, limit: RateLimit) -> Result<(), RateLimited> {
    match limits.local.admit(key, limit).await {
        Ok(decision) if decision.allowed => Ok(()),
        Ok(decision) => Err(refused("instance", key, limit, decision)),
        // The in-process buckets do not fail; if one did, the request is not refused for it.
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::InfraError;
    use goods_domain::ports::MockRateLimiter;
    use std::time::Duration;

    fn limit() -> RateLimit {
        RateLimit::parse("20/s").unwrap().unwrap()
    }

    fn decision(allowed: bool) -> RateDecision {
        RateDecision {
            allowed,
            remaining: 0,
            retry_after: if allowed {
                Duration::ZERO
            } else {
                Duration::from_millis(50)
            },
            reset: Duration::from_secs(2),
        }
    }

    fn answering(allowed: bool, times: usize) -> MockRateLimiter {
        let mut limiter = MockRateLimiter::new();
        limiter
            .expect_admit()
            .times(times)
            .returning(move |_, _| Ok(decision(allowed)));
        limiter
    }

    /// A buyer limit over `local` and `fleet` buckets, at `now`, the sample drop (opening at
    /// [`OPEN`]) in the cache.
    fn limiter_at(
        now: time::OffsetDateTime,
        local: MockRateLimiter,
        fleet: MockRateLimiter,
    ) -> Limiter {
        let mut clock = goods_domain::ports::MockClock::new();
        clock.expect_now().return_const(now);
        Limiter {
            limits: RateLimits::new(Some(limit()), None, Arc::new(local), Some(Arc::new(fleet))),
            cache: Arc::new(DropCache::new(Arc::new(drops_serving(sample_drop(100, 2))))),
            clock: Arc::new(clock),
        }
    }

    fn limited_app(local: MockRateLimiter, fleet: MockRateLimiter) -> Limiter {
        limiter_at(OPEN, local, fleet)
    }

    #[tokio::test]
    async fn a_buyer_refused_here_never_costs_the_fleet_a_round_trip() {
        let app = limited_app(answering(false, 1), answering(true, 0));
        let refused = app
            .buyer(buyer().user_id, Some((drop_id(), None)))
            .await
            .unwrap_err();
        assert_eq!(refused.key, RateKey::Buyer(buyer().user_id));
        assert_eq!(refused.decision.retry_after_seconds(), 1);
    }

    /// A purchase is counted here; it pays the fleet's bucket in its use case, where it
    /// reaches a shared store (in the gate's own reservation where the gate keeps the buckets).
    #[tokio::test]
    async fn a_purchase_is_counted_here_and_an_entry_here_and_in_the_fleet() {
        let app = limited_app(answering(true, 2), answering(false, 1));
        assert!(
            app.buyer(buyer().user_id, Some((drop_id(), None)))
                .await
                .is_ok()
        );
        // An entry or a cancel always reaches the database: the fleet's bucket counts it.
        assert!(app.buyer(buyer().user_id, None).await.is_err());
    }

    #[tokio::test]
    async fn the_fleets_refusal_stands_and_its_failure_leaves_the_instances_decision() {
        let app = limited_app(answering(true, 1), answering(false, 1));
        assert!(app.buyer(buyer().user_id, None).await.is_err());
        let mut failing = MockRateLimiter::new();
        failing
            .expect_admit()
            .times(1)
            .returning(|_, _| Err(InfraError::msg("redis down")));
        let app = limited_app(answering(true, 1), failing);
        assert!(app.buyer(buyer().user_id, None).await.is_ok());
    }

    /// The sale-start gate answers 425 before anything else: such a purchase spends neither
    /// bucket, an entry or a cancel at the same moment still does.
    #[tokio::test]
    async fn a_purchase_before_open_at_is_counted_nowhere() {
        let app = limiter_at(
            OPEN - time::Duration::seconds(1),
            answering(true, 1),
            answering(true, 1),
        );
        for _ in 0..3 {
            assert!(
                app.buyer(buyer().user_id, Some((drop_id(), None)))
                    .await
                    .is_ok()
            );
        }
        assert!(app.buyer(buyer().user_id, None).await.is_ok());
    }

    #[tokio::test]
    async fn without_limits_nothing_is_counted() {
        let app = Mocks::at(OPEN).app(None);
        assert!(app.limit_buyer(buyer().user_id, None).await.is_ok());
        assert!(app.limit_address("10.0.0.1".parse().unwrap()).await.is_ok());
    }
}
