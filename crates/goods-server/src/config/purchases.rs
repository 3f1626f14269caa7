//! How admitted purchases reach the database: the write buffer, the group commit, the fleet's
//! budget, the admission lease; and how long an unpaid order holds its units.

use super::database::DatabaseConfig;
use super::{ConfigError, bad, number};
use goods_app::GroupCommit;
use goods_domain::PaymentWindow;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Purchases {
    /// Admitted purchases that may wait for their drop's next group commit at once
    /// (`DB_WRITE_PERMITS`).
    pub write_permits: usize,
    /// Wait for a write slot before 429 (`DB_WRITE_WAIT_MS`).
    pub write_wait: Duration,
    /// Concurrent purchase transactions across the whole fleet, shared through Redis
    /// (`DB_WRITE_PERMITS_GLOBAL`); `None`: only the per-instance bound.
    pub write_permits_global: Option<u32>,
    /// How long an admitted reservation stays in progress before it is resolved against the
    /// database (`RESERVATION_LEASE_MS`).
    pub lease: Duration,
    /// How each drop's admitted purchases are batched into transactions
    /// (`GROUP_COMMIT_MAX_BATCH`, `GROUP_COMMIT_LINGER_MS`, `GROUP_COMMIT_IN_FLIGHT`).
    pub group_commit: GroupCommit,
    /// How long a PENDING order holds its units before it expires (`PAYMENT_WINDOW_S`).
    pub payment_window: PaymentWindow,
}

/// The longest payment window: a week. Units held longer than that are not a flash sale's.
const MAX_PAYMENT_WINDOW_S: u32 = 7 * 24 * 3600;

/// The largest batch: one INSERT of this many orders stays far below the servers' limits on
/// bound parameters (SQLite: 32,766; MySQL: 65,535).
const MAX_BATCH: usize = 1000;

/// The most batches of one drop in the database at once: more only queue on the drop's row.
const MAX_IN_FLIGHT: usize = 16;

/// The longest linger: a committer waiting longer than this would slow every buyer of a busy
/// drop for little gain.
const MAX_LINGER_MS: u64 = 100;

/// `var`, at most `max`.
fn bounded<T>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
    min: T,
    max: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let value = number(get, var, default, min)?;
    if value > max {
        return Err(bad(var, format!("{value} is over {max}")));
    }
    Ok(value)
}

impl Purchases {
    /// `has_redis`: whether the Redis section is set (the fleet's budget lives there).
    pub(super) fn read(
        get: &impl Fn(&str) -> Option<String>,
        database: &DatabaseConfig,
        has_redis: bool,
    ) -> Result<Self, ConfigError> {
        let group_commit = GroupCommit {
            max_batch: bounded(get, "GROUP_COMMIT_MAX_BATCH", 64_usize, 1, MAX_BATCH)?,
            linger: Duration::from_millis(bounded(
                get,
                "GROUP_COMMIT_LINGER_MS",
                0_u64,
                0,
                MAX_LINGER_MS,
            )?),
            in_flight: bounded(get, "GROUP_COMMIT_IN_FLIGHT", 1_usize, 1, MAX_IN_FLIGHT)?,
        };
        // A write slot is one purchase waiting for its drop's committer; the pool's connections
        // carry full batches, so the default lets that many purchases wait.
        let write_permits = number(
            get,
            "DB_WRITE_PERMITS",
            database.pool_size.saturating_mul(group_commit.max_batch),
            1,
        )?;
        let write_wait = Duration::from_millis(number(get, "DB_WRITE_WAIT_MS", 2000_u64, 0)?);
        let write_permits_global = match get("DB_WRITE_PERMITS_GLOBAL") {
            None => None,
            Some(_) if !has_redis => {
                return Err(bad(
                    "DB_WRITE_PERMITS_GLOBAL",
                    "the fleet's budget is kept in Redis: it needs REDIS_URL",
                ));
            }
            Some(_) => Some(number(get, "DB_WRITE_PERMITS_GLOBAL", 1_u32, 1)?),
        };
        // The longest an admitted purchase can take before it commits or gives up.
        let longest = write_wait + database.acquire_timeout + database.tx_timeout;
        let default_lease = longest + Duration::from_secs(2);
        let lease = Duration::from_millis(number(
            get,
            "RESERVATION_LEASE_MS",
            u64::try_from(default_lease.as_millis()).unwrap_or(u64::MAX),
            1,
        )?);
        if lease <= longest {
            return Err(bad(
                "RESERVATION_LEASE_MS",
                format!(
                    "must exceed DB_WRITE_WAIT_MS + DB_ACQUIRE_TIMEOUT_MS + DB_TX_TIMEOUT_MS ({} ms)",
                    longest.as_millis()
                ),
            ));
        }
        let payment_window = number(get, "PAYMENT_WINDOW_S", 600_u32, 1)?;
        if payment_window > MAX_PAYMENT_WINDOW_S {
            return Err(bad(
                "PAYMENT_WINDOW_S",
                format!("{payment_window} is over {MAX_PAYMENT_WINDOW_S} (7 days)"),
            ));
        }
        Ok(Self {
            write_permits,
            write_wait,
            write_permits_global,
            lease,
            group_commit,
            payment_window: PaymentWindow::seconds(payment_window),
        })
    }
}
