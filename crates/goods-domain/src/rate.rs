//! Rate limits: the design's token bucket as GCRA (one stored instant per key, its "theoretical
//! arrival time"); adapters keep the instants, the arithmetic is here.

use crate::UserId;
use std::net::IpAddr;
use std::time::Duration;

/// A limit: `rate` requests per `period` on average, bursts of `burst` at once (the contract's
/// burst is twice the rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    rate: u32,
    period: Duration,
    burst: u32,
}

impl RateLimit {
    /// `rate` per `period` (both non-zero), bursts of twice the rate.
    pub fn new(rate: u32, period: Duration) -> Result<Self, String> {
        if rate == 0 || period.is_zero() {
            return Err("a rate limit needs at least 1 request per period".into());
        }
        Ok(Self {
            rate,
            period,
            burst: rate.saturating_mul(2),
        })
    }

    /// Reads a setting: `N/s`, `N/m` (`N` from 1 to 1,000,000), or `off` (`None`).
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let bad =
            || format!("{text:?} is not a rate: write N/s or N/m (N from 1 to 1000000), or off");
        let (n, unit) = text.split_once('/').ok_or_else(bad)?;
        let period = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            _ => return Err(bad()),
        };
        let rate: u32 = n.trim().parse().map_err(|_| bad())?;
        if !(1..=1_000_000).contains(&rate) {
            return Err(bad());
        }
        Self::new(rate, period).map(Some)
    }

    /// Requests allowed at once, with nothing spent.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// The period the rate is counted over.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The time one request's token takes to come back (the period over the rate).
    pub fn interval(&self) -> Duration {
        self.period / self.rate
    }

    /// How long a spent bucket takes to fill up again: the `w` of `RateLimit-Policy`.
    pub fn window(&self) -> Duration {
        self.interval() * self.burst
    }
}

/// Whose requests a bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateKey {
    /// An identified buyer's purchases, entries and cancels.
    Buyer(UserId),
    /// Requests without a verified identity, by the client's address.
    Address(IpAddr),
    /// A verified caller's reads.
    Reader(UserId),
}

impl RateKey {
    /// The policy's name in the `RateLimit-Policy` and `RateLimit` headers.
    pub fn policy(&self) -> &'static str {
        match self {
            Self::Buyer(_) => "buyer",
            Self::Address(_) => "address",
            Self::Reader(_) => "reader",
        }
    }
}

/// What a bucket said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    /// Requests still allowed at once after this one.
    pub remaining: u32,
    /// When refused: how long until one request is allowed again; zero when allowed.
    pub retry_after: Duration,
    /// How long until the bucket is full again.
    pub reset: Duration,
}

impl RateDecision {
    /// `Retry-After`: whole seconds, rounded up (at least 1).
    pub fn retry_after_seconds(&self) -> u64 {
        ceil_seconds(self.retry_after).max(1)
    }

    /// The `RateLimit` header's `t`: whole seconds until the bucket is full, rounded up.
    pub fn reset_seconds(&self) -> u64 {
        ceil_seconds(self.reset)
    }
}

/// Whole seconds in `d`, rounded up.
pub fn ceil_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// GCRA in microseconds: the decision at `now` from the stored arrival time `tat` (`None`:
/// unseen), and what to store. Each request moves it one interval ahead, refused past `burst`
/// intervals ahead of `now`. The Redis script computes the same (a test compares them).
pub fn gcra(tat: Option<u64>, now: u64, limit: &RateLimit) -> (RateDecision, Option<u64>) {
    let interval = u64::try_from(limit.interval().as_micros()).unwrap_or(u64::MAX);
    let tolerance = interval.saturating_mul(u64::from(limit.burst));
    let tat = tat.unwrap_or(now).max(now);
    let next = tat.saturating_add(interval);
    let allowed_at = next.saturating_sub(tolerance);
    if now < allowed_at {
        return (
            RateDecision {
                allowed: false,
                remaining: 0,
                retry_after: Duration::from_micros(allowed_at - now),
                reset: Duration::from_micros(tat - now),
            },
            None,
        );
    }
    let left = (now + tolerance - next) / interval.max(1);
    (
        RateDecision {
            allowed: true,
            remaining: u32::try_from(left).unwrap_or(u32::MAX),
            retry_after: Duration::ZERO,
            reset: Duration::from_micros(next - now),
        },
        Some(next),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("20/s", Some((20, 1, 40)))]
    #[case(" 200/s ", Some((200, 1, 400)))]
    #[case("30/m", Some((30, 60, 60)))]
    #[case("off", None)]
    #[case("OFF", None)]
    fn a_setting_reads_as_a_rate_with_twice_its_burst(
        #[case] text: &str,
        #[case] expected: Option<(u32, u64, u32)>,
    ) {
        let limit = RateLimit::parse(text).unwrap();
        assert_eq!(
            limit.map(|l| (l.rate(), l.period().as_secs(), l.burst())),
            expected
        );
    }

    #[rstest]
    #[case("")]
    #[case("20")]
    #[case("0/s")]
    #[case("-1/s")]
    #[case("20/h")]
    #[case("1000001/s")]
    #[case("x/s")]
    fn anything_else_is_refused_naming_the_forms(#[case] text: &str) {
        let error = RateLimit::parse(text).unwrap_err();
        assert!(error.contains("N/s or N/m"), "{error}");
    }

    #[test]
    fn a_fresh_bucket_allows_its_burst_at_once_then_one_request_per_interval() {
        let limit = RateLimit::parse("20/s").unwrap().unwrap();
        let now = 1_000_000_000;
        let mut tat = None;
        let mut remaining = Vec::new();
        for _ in 0..40 {
            let (decision, next) = gcra(tat, now, &limit);
            assert!(decision.allowed);
            remaining.push(decision.remaining);
            tat = next;
        }
        assert_eq!(remaining.first(), Some(&39));
        assert_eq!(remaining.last(), Some(&0));
        // The 41st at the same instant: refused, one interval (50 ms) to wait, 2 s to refill.
        let (refused, next) = gcra(tat, now, &limit);
        assert_eq!(
            (refused.allowed, refused.retry_after, refused.reset, next),
            (
                false,
                Duration::from_millis(50),
                Duration::from_secs(2),
                None
            )
        );
        assert_eq!(
            (refused.retry_after_seconds(), refused.reset_seconds()),
            (1, 2)
        );
        // 50 ms later one more is allowed, and only one.
        let later = now + 50_000;
        let (decision, tat) = gcra(tat, later, &limit);
        assert!(decision.allowed);
        assert!(!gcra(tat, later, &limit).0.allowed);
        // A bucket left alone for its window is full again.
        let (full, _) = gcra(tat, later + 2_000_000, &limit);
        assert_eq!(full.remaining, 39);
    }

    #[test]
    fn a_steady_client_at_the_rate_is_never_refused_and_one_at_twice_it_half_the_time() {
        let limit = RateLimit::parse("10/s").unwrap().unwrap();
        let (mut at_rate, mut twice) = ((None, 0), (None, 0));
        for i in 0..1_000u64 {
            // 10/s: one request every 100 ms; 20/s: every 50 ms.
            let (d, t) = gcra(at_rate.0, i * 100_000, &limit);
            at_rate = (t.or(at_rate.0), at_rate.1 + u32::from(d.allowed));
            let (d, t) = gcra(twice.0, i * 50_000, &limit);
            twice = (t.or(twice.0), twice.1 + u32::from(d.allowed));
        }
        assert_eq!(at_rate.1, 1_000);
        // 1,000 requests over 50 s at twice the rate: the first 39 (the burst of 20, plus the
        // 19 tokens that came back in the 1.9 s they took), then every other one of the 961
        // left.
        assert_eq!(twice.1, 39 + 480);
    }
}
