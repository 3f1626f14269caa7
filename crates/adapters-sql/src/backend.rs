//! What a SQL backend gives the store it is written once for: its connections, the SQL it
//! speaks where the dialects differ, and how its errors read.

use crate::{Bounds, Exec};
use diesel::result::Error as DbError;
use diesel_async::AsyncConnection;
use goods_domain::InfraError;
use std::future::Future;
use std::ops::DerefMut;

/// The SQL the backends spell differently.
#[derive(Debug)]
pub struct Dialect {
    /// The id the connection's last INSERT generated.
    pub last_insert_id: &'static str,
    /// Makes a SELECT read the latest committed row with a shared lock (empty where
    /// transactions run one at a time).
    pub locking_read: &'static str,
    /// Makes a SELECT read the latest committed row and lock it exclusively until the
    /// transaction ends (empty where transactions run one at a time).
    pub exclusive_read: &'static str,
    /// With `(?, ?, 0)` rows and [`Dialect::ensure_holdings_tail`] after it: creates the
    /// buyers' holding rows that do not exist, locking each exclusively where the backend has
    /// row locks (a shared lock would deadlock two purchases of one buyer upgrading it).
    pub ensure_holdings_head: &'static str,
    /// See [`Dialect::ensure_holdings_head`].
    pub ensure_holdings_tail: &'static str,
    /// Takes the database's write lock before a write transaction reads anything (empty where
    /// row locks make it unnecessary).
    pub begin_write: &'static str,
    /// Starts an INSERT that skips the rows whose key exists (`INSERT IGNORE INTO`, `INSERT OR
    /// IGNORE INTO`).
    pub insert_ignore: &'static str,
    /// The database's clock in unix milliseconds: the one clock admission leases and the
    /// background lease are checked against.
    pub db_now_ms: &'static str,
    /// Text concatenation: `{concat_open}a{concat_sep}b{concat_close}` (`CONCAT(a, b)`,
    /// `(a || b)`).
    pub concat_open: &'static str,
    /// See [`Dialect::concat_open`].
    pub concat_sep: &'static str,
    /// See [`Dialect::concat_open`].
    pub concat_close: &'static str,
}

/// A SQL backend: MySQL/MariaDB or SQLite.
pub trait Backend: Send + Sync + 'static {
    type Conn: Exec + AsyncConnection + Send + 'static;

    /// A connection borrowed from its pool.
    type Pooled: DerefMut<Target = Self::Conn> + Send;

    const DIALECT: &'static Dialect;

    /// A connection from the pool, waiting at most the acquire bound.
    ///
    /// # Errors
    /// [`InfraError::unavailable`] when none frees up in time.
    fn conn(&self) -> impl Future<Output = Result<Self::Pooled, InfraError>> + Send;

    /// The bounds on every wait for the database.
    fn bounds(&self) -> Bounds;

    /// Statements sent since the store was opened.
    fn statements(&self) -> u64;

    fn pool_status(&self) -> crate::PoolStatus;

    /// Whether a fresh transaction may cure the failure (deadlocks, lock wait timeouts).
    fn retryable(error: &DbError) -> bool;

    /// Whether the server did not answer in a bound (the caller answers 503, and the outcome of
    /// a write is unknown).
    fn unavailable(error: &DbError) -> bool;
}
