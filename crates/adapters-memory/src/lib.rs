//! In-process adapters for one instance: the embedded mode's admission gate and the outcome
//! counters, an event publisher that logs, and the draw seeds' vault.

mod events;
mod gate;
mod rate;
mod resolver;
mod seeds;
mod stats;

pub use events::LogEventPublisher;
pub use gate::MemoryGate;
pub use rate::MemoryRateLimiter;
pub use resolver::SystemResolver;
pub use seeds::{SealKey, SealingVault, parse_key as parse_seal_key};
pub use stats::MemoryStats;
