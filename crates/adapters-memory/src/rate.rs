//! Token buckets in this process (`governor`'s keyed GCRA limiter): the buckets of one instance,
//! for a deployment without Redis, for what an instance serves alone, and while Redis fails.

use async_trait::async_trait;
use goods_domain::ports::RateLimiter;
use goods_domain::{InfraError, RateDecision, RateKey, RateLimit};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter as Governor};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

type Buckets<C> = Governor<RateKey, DefaultKeyedStateStore<RateKey>, C, StateInformationMiddleware>;

/// Admissions between two sweeps of the buckets that have all their tokens back (which hold
/// nothing a fresh one would not): memory stays bounded by the keys seen in about one window.
const SWEEP_EVERY: u64 = 8_192;

/// One keyed limiter per limit (in practice two: buyers and addresses), on the clock `C` (the
/// monotonic clock; tests move a fake one).
pub struct MemoryRateLimiter<C: Clock + Clone = DefaultClock> {
    limiters: RwLock<HashMap<RateLimit, Arc<Buckets<C>>>>,
    admitted: AtomicU64,
    clock: C,
}

impl MemoryRateLimiter {
    pub fn new() -> Self {
        Self::with_clock(DefaultClock::default())
    }
}

impl Default for MemoryRateLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock + Clone> MemoryRateLimiter<C> {
    pub fn with_clock(clock: C) -> Self {
        Self {
            limiters: RwLock::default(),
            admitted: AtomicU64::new(0),
            clock,
        }
    }

    fn buckets(&self, limit: RateLimit) -> Arc<Buckets<C>> {
        if let Some(found) = self
            .limiters
            .read()
            .ok()
            .and_then(|l| l.get(&limit).cloned())
        {
            return found;
        }
        let mut limiters = self
            .limiters
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(limiters.entry(limit).or_insert_with(|| {
            // A limit's interval is never zero (RateLimit refuses it), nor its burst.
            let quota = Quota::with_period(limit.interval())
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
                .allow_burst(NonZeroU32::new(limit.burst()).unwrap_or(NonZeroU32::MIN));
            Arc::new(Buckets::<C>::new(
                quota,
                DefaultKeyedStateStore::default(),
                self.clock.clone(),
            ))
        }))
    }

    /// Keys currently held, over every limit.
    pub fn len(&self) -> usize {
        self.limiters
            .read()
            .map(|l| l.values().map(|b| b.len()).sum())
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every bucket that has all its tokens back.
    pub fn sweep(&self) {
        if let Ok(limiters) = self.limiters.read() {
            for buckets in limiters.values() {
                buckets.retain_recent();
                buckets.shrink_to_fit();
            }
        }
    }
}

#[async_trait]
impl<C: Clock + Clone + Send + Sync + 'static> RateLimiter for MemoryRateLimiter<C>
where
    C::Instant: Send + Sync,
{
    async fn admit(&self, key: RateKey, limit: RateLimit) -> Result<RateDecision, InfraError> {
        Ok(self.decide(key, limit))
    }
}

impl<C: Clock + Clone> MemoryRateLimiter<C> {
    /// [`RateLimiter::admit`] without the future: the check is a few atomic operations.
    pub fn decide(&self, key: RateKey, limit: RateLimit) -> RateDecision {
        if self.admitted.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let buckets = self.buckets(limit);
        match buckets.check_key(&key) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                RateDecision {
                    allowed: true,
                    remaining,
                    retry_after: std::time::Duration::ZERO,
                    reset: limit.interval() * (limit.burst().saturating_sub(remaining)),
                }
            }
            Err(not_until) => RateDecision {
                allowed: false,
                remaining: 0,
                retry_after: not_until.wait_time_from(self.clock.now()),
                reset: limit.window(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::UserId;
    use std::time::Duration;

    fn buyer(id: i64) -> RateKey {
        RateKey::Buyer(UserId::parse(id).unwrap())
    }

    #[test]
    fn a_buyer_gets_the_burst_at_once_then_waits_an_interval_and_others_are_untouched() {
        // 1 a minute: nothing comes back while the test runs.
        let limit = RateLimit::parse("1/m").unwrap().unwrap();
        let limiter = MemoryRateLimiter::new();
        let remaining: Vec<u32> = (0..2)
            .map(|_| limiter.decide(buyer(7), limit).remaining)
            .collect();
        assert_eq!(remaining, [1, 0]);
        let refused = limiter.decide(buyer(7), limit);
        assert!(!refused.allowed);
        assert!(
            refused.retry_after > Duration::from_secs(59)
                && refused.retry_after <= Duration::from_secs(60),
            "{refused:?}"
        );
        assert_eq!(refused.retry_after_seconds(), 60);
        // Another buyer, and the same buyer under another limit, have buckets of their own.
        assert!(limiter.decide(buyer(8), limit).allowed);
        let other = RateLimit::parse("2/m").unwrap().unwrap();
        assert!(limiter.decide(buyer(7), other).allowed);
        assert_eq!(limiter.len(), 3);
    }

    #[test]
    fn buckets_with_all_their_tokens_back_are_forgotten() {
        let clock = governor::clock::FakeRelativeClock::default();
        let limit = RateLimit::parse("10/s").unwrap().unwrap();
        let limiter = MemoryRateLimiter::with_clock(clock.clone());
        for id in 1..=1_000 {
            assert!(limiter.decide(buyer(id), limit).allowed);
        }
        assert_eq!(limiter.len(), 1_000);
        // A request's token takes 100 ms to come back; governor forgets a bucket one interval
        // after that (a bucket with all its tokens is a fresh one): kept at 199 ms, not at 200.
        clock.advance(Duration::from_millis(199));
        limiter.sweep();
        assert_eq!(limiter.len(), 1_000);
        clock.advance(Duration::from_millis(1));
        limiter.sweep();
        assert_eq!(limiter.len(), 0);
    }
}
