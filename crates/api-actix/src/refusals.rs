//! Refusals an attacker can send at any rate (forged signatures, bad tokens) are logged at most
//! [`BURST`] at once and [`PER_SECOND`] after, and all counted (`refusals_total`,
//! `refusals_unlogged_total`): the log cannot be flooded, nothing goes unseen.

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::LazyLock;

/// Lines logged at once, before the rate applies.
pub const BURST: u32 = 20;
/// Lines logged a second, after the burst.
pub const PER_SECOND: u32 = 5;

/// The log's budget, on `C` (tests move a fake clock).
pub struct LogBudget<C: Clock + Clone = DefaultClock> {
    lines: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<C::Instant>>,
}

impl<C: Clock + Clone> LogBudget<C> {
    pub fn with_clock(clock: &C) -> Self {
        let quota = Quota::per_second(NonZeroU32::new(PER_SECOND).unwrap_or(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN));
        Self {
            lines: RateLimiter::direct_with_clock(quota, clock.clone()),
        }
    }

    /// Whether one more line may be written now.
    pub fn may_log(&self) -> bool {
        self.lines.check().is_ok()
    }
}

static BUDGET: LazyLock<LogBudget> =
    LazyLock::new(|| LogBudget::with_clock(&DefaultClock::default()));

/// Counts a refusal of `kind` and logs it as a warning with `reason` when the budget allows.
pub fn refused(kind: &'static str, reason: &dyn std::fmt::Display) {
    metrics::counter!("refusals_total", "kind" => kind).increment(1);
    if BUDGET.may_log() {
        tracing::warn!(kind, reason = %reason, "request refused");
    } else {
        metrics::counter!("refusals_unlogged_total", "kind" => kind).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;
    use std::time::Duration;

    #[test]
    fn a_flood_of_refusals_logs_the_burst_then_five_a_second() {
        let clock = FakeRelativeClock::default();
        let budget = LogBudget::with_clock(&clock);
        let logged = (0..1_000).filter(|_| budget.may_log()).count();
        assert_eq!(logged, 20);
        // A second later: five more lines, whatever the flood.
        clock.advance(Duration::from_secs(1));
        let logged = (0..1_000).filter(|_| budget.may_log()).count();
        assert_eq!(logged, 5);
    }
}
