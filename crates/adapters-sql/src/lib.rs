//! The SQL source of truth, written once for every diesel backend.
//!
//! [`schema`] and [`rows`] are plain diesel code shared by the backends. The queries and the
//! transactions are in [`impl_goods_store!`], which each backend crate instantiates for its own
//! connection type: diesel-async's query traits are resolved per concrete connection, and
//! spelling their bounds generically for every query costs more than it clarifies. The macro
//! keeps one copy of each query; the backend crates only add pools, migrations and the
//! classification of their server errors.

mod events;
mod instrument;
mod pooled;
pub mod rows;
pub mod schema;
mod store;
mod tx;

pub use events::{decode_event, encode_event};
pub use instrument::count_statements;
pub use pooled::PooledConn;
pub use tx::{Bounds, MAX_ATTEMPTS, TxError, bounded, db_failure, infra, with_retries};

#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use diesel;
    pub use diesel_async;
    pub use goods_domain;
    pub use time;
    pub use tracing;
}
