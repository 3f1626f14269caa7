//! The production admission gate and outcome counters, on Redis through fred.
//!
//! Redis is shared by every instance, so the gate and the counters are global; it is never the
//! source of truth. Every key of a drop carries the drop's hash tag (`drop:{42}:...`), so each
//! script touches one slot and runs on Redis Cluster too. Every key expires (the gate's an hour
//! after the drop's `closeAt`, the counters 30 days after their last change).
//!
//! The scripts are in `lua/`, one file each, with a header naming KEYS, ARGV and replies.

mod budget;
mod changes;
mod connection;
mod gate;
mod keys;
mod rate;
mod scripts;
mod sold_out;
mod stats;

pub use budget::RedisWriteBudget;
pub use changes::RedisChanges;
pub use connection::{RedisConfig, RedisConnection};
pub use gate::RedisGate;
pub use rate::RedisRateLimiter;
pub use stats::RedisStats;

/// Every metric this crate records.
pub const METRIC_NAMES: &[&str] = &[sold_out::FLAG_CHANGES];

/// The help texts of this crate's metrics, for the exposition.
pub fn describe() {
    metrics::describe_counter!(
        sold_out::FLAG_CHANGES,
        "Sold-out flags raised (the instance answers SOLD_OUT alone) and lowered early by a restock, by change."
    );
}
