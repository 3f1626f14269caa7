//! In-process adapters for one instance: the embedded mode's admission gate and the outcome
//! counters, an event publisher that logs, and draw seeds from the operating system.

mod events;
mod gate;
mod seeds;
mod stats;

pub use events::LogEventPublisher;
pub use gate::MemoryGate;
pub use seeds::OsSeeds;
pub use stats::MemoryStats;
