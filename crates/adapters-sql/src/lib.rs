//! The SQL source of truth, written once for every diesel backend.
//!
//! [`schema`] and [`rows`] are plain diesel code shared by the backends. The queries and the
//! transactions are in `src/store.rs`, which is not a module of this crate: each backend crate
//! compiles it as its own `store` module against its concrete connection type and its SQL
//! dialect (diesel-async resolves queries per concrete connection, and spelling their bounds
//! generically for every query would cost more than it clarifies). So each query exists once,
//! as plain Rust that rustfmt formats and clippy lints; the backend crates add pools,
//! migrations and the classification of their server errors.

mod events;
mod instrument;
mod migrations;
mod pooled;
pub mod raw;
pub mod rows;
pub mod schema;
mod tx;

pub use events::{decode_event, encode_event};
pub use instrument::count_statements;
pub use migrations::{apply_migrations, version_of};
pub use pooled::PooledConn;
pub use tx::{
    Bounds, MAX_ATTEMPTS, METRIC_NAMES, TxError, bounded, db_failure, describe as describe_metrics,
    infra, retry_when, with_retries,
};
