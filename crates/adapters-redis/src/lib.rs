//! The production admission gate and outcome counters on Redis (fred): global, never the
//! truth. A drop's keys share its hash tag (`drop:{42}:...`), so each script touches one slot
//! (Redis Cluster too); every key expires. The scripts are in `lua/`, each with a header.

mod budget;
mod changes;
mod connection;
mod gate;
mod keys;
mod rate;
mod reserving;
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
