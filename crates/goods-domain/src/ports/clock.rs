//! Time, as a port, so the sale-start gate can be tested at the millisecond.

use time::OffsetDateTime;

#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Clock: Send + Sync + 'static {
    /// Now, in UTC.
    fn now(&self) -> OffsetDateTime;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}
