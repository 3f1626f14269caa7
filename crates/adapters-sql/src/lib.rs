//! The SQL source of truth, written once for every diesel backend: [`SqlStore`] over a
//! [`Backend`]. The backend crates (adapters-mysql, adapters-sqlite) add their pool, migrations,
//! dialect and the reading of their server errors.

mod backend;
mod event_data;
mod event_lines;
mod events;
mod exec;
mod instrument;
mod migrations;
mod pooled;
pub mod raw;
pub mod rows;
pub mod schema;
mod store;
mod tls;
mod tx;

pub use backend::{Backend, Dialect};
pub use exec::{Exec, Row};
pub use raw::{Bind, Sql};
pub use store::SqlStore;
pub use tls::{MysqlTls, TlsMode};

pub use events::{decode_event, encode_event};
pub use instrument::count_statements;
pub use migrations::{apply_migrations, version_of};
pub use pooled::{PooledConn, pool};
pub use tx::{
    Bounds, MAX_ATTEMPTS, METRIC_NAMES, PoolStatus, TxError, WRITER_MOVES, bounded, db_failure,
    describe as describe_metrics, infra, retry_when, with_retries,
};
