//! A clock tests move by hand: time-driven behaviour (payment windows, a drop's opening and
//! closing) is tested by moving time, not by sleeping.

use goods_domain::ports::Clock;
use std::sync::Mutex;
use time::OffsetDateTime;

/// A [`Clock`] that stands still until told to move.
#[derive(Debug)]
pub struct ManualClock(Mutex<OffsetDateTime>);

impl ManualClock {
    /// A clock reading `at`.
    pub fn at(at: OffsetDateTime) -> Self {
        Self(Mutex::new(at))
    }

    /// A clock reading the system's time now, to the millisecond.
    pub fn now_utc() -> Self {
        let now = OffsetDateTime::now_utc();
        Self::at(now.replace_millisecond(now.millisecond()).unwrap_or(now))
    }

    /// Moves the clock by `by` (forward when positive).
    pub fn advance(&self, by: time::Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }

    /// Sets the clock to `at`.
    pub fn set(&self, at: OffsetDateTime) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
