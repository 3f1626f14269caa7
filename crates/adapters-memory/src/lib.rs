//! In-process adapters for one instance: the embedded mode's admission gate and the outcome
//! counters, and an event publisher that logs.

mod events;
mod gate;
mod stats;

pub use events::LogEventPublisher;
pub use gate::MemoryGate;
pub use stats::MemoryStats;
