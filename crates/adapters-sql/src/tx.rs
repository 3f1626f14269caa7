//! Transaction plumbing shared by the backends: a transaction's error type and the bounded
//! retry of whole transactions on deadlocks and lock wait timeouts.

use goods_domain::InfraError;
use std::future::Future;
use std::time::Duration;

/// The bounds on every wait for the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How long a caller waits for a pooled connection (`DB_ACQUIRE_TIMEOUT_MS`).
    pub acquire: Duration,
    /// How long one ledger call may take, retries included (`DB_TX_TIMEOUT_MS`).
    pub transaction: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            acquire: Duration::from_secs(1),
            transaction: Duration::from_secs(3),
        }
    }
}

/// How many times one logical transaction is tried before its failure reaches the caller.
pub const MAX_ATTEMPTS: u32 = 5;

/// A transaction's failure: the database's, or a business refusal that rolls it back.
#[derive(Debug)]
pub enum TxError<R> {
    /// The database failed (possibly retryable).
    Db(diesel::result::Error),
    /// The transaction refused and rolled back.
    Refused(R),
    /// Something around the database failed (the pool, corrupt data).
    Infra(InfraError),
}

impl<R> From<InfraError> for TxError<R> {
    fn from(error: InfraError) -> Self {
        Self::Infra(error)
    }
}

impl<R> TxError<R> {
    /// The port error this failure becomes; `context` describes a database failure, which
    /// `unavailable` tells apart from a fault (see [`db_failure`]).
    pub fn resolve<E>(
        self,
        context: &'static str,
        unavailable: fn(&diesel::result::Error) -> bool,
    ) -> E
    where
        E: From<InfraError> + From<R>,
    {
        match self {
            Self::Db(error) => db_failure(context, error, unavailable).into(),
            Self::Infra(error) => error.into(),
            Self::Refused(refusal) => refusal.into(),
        }
    }
}

/// A database error as a port error: [`InfraError::unavailable`] when `unavailable` says the
/// server did not answer in its bound (connection lost, statement or lock wait time limit),
/// so the caller answers 503 and the outcome of a write is unknown; a fault otherwise.
pub fn db_failure(
    context: &'static str,
    error: diesel::result::Error,
    unavailable: fn(&diesel::result::Error) -> bool,
) -> InfraError {
    if unavailable(&error) {
        InfraError::unavailable(format!("{context}: {error}"))
    } else {
        InfraError::new(context, error)
    }
}

impl<R> From<diesel::result::Error> for TxError<R> {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error)
    }
}

/// Wraps a diesel error with context for a port.
pub fn infra(context: &'static str) -> impl FnOnce(diesel::result::Error) -> InfraError {
    move |e| InfraError::new(context, e)
}

/// The pause before each retry of a transaction: exponential from 2 ms up to 50 ms, with
/// jitter, so transactions that deadlocked each other do not collide again in step; at most
/// [`MAX_ATTEMPTS`] attempts in all.
fn backoff() -> backon::ExponentialBuilder {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(50))
        .with_max_times(MAX_ATTEMPTS as usize - 1)
        .with_jitter()
}

/// Runs `attempt` until it succeeds, refuses, fails with a database error `retryable` rejects,
/// or [`MAX_ATTEMPTS`] are used, pausing with jittered backoff in between. Each attempt must be
/// a whole, fresh transaction.
pub async fn with_retries<T, R, F, Fut>(
    retryable: fn(&diesel::result::Error) -> bool,
    attempt: F,
) -> Result<T, TxError<R>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TxError<R>>>,
{
    retry_when(
        |error: &TxError<R>| matches!(error, TxError::Db(e) if retryable(e)),
        attempt,
    )
    .await
}

/// [`with_retries`] with any test of the failure, for transactions that also roll back on
/// purpose to be tried again (a conditional update that lost a race).
pub async fn retry_when<T, R, F, Fut>(
    retryable: impl FnMut(&TxError<R>) -> bool,
    attempt: F,
) -> Result<T, TxError<R>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TxError<R>>>,
{
    use backon::Retryable;
    let mut attempt = attempt;
    let counted = move || {
        metrics::counter!(TRANSACTIONS).increment(1);
        attempt()
    };
    counted
        .retry(backoff())
        .when(retryable)
        .notify(|error, pause| {
            let reason = retry_reason(error);
            metrics::counter!(RETRIES, "reason" => reason).increment(1);
            tracing::debug!(reason, pause_ms = pause.as_millis(), "transaction retried");
        })
        .await
}

/// Transactions begun by the ledger's retried calls, retries included.
pub const TRANSACTIONS: &str = "db_transactions_total";
/// Transactions tried again, by `reason`: `deadlock`, `lock_wait`, `duplicate_key` (a
/// concurrent request with the same key committed first), `busy` (SQLite's lock),
/// `contended` (a batch's conditional write lost a race), `other`.
pub const RETRIES: &str = "db_transaction_retries_total";

/// The connection pool at the last scrape, by `state`: `in_use` (lent out), `idle` (open,
/// waiting to be lent).
pub const POOL_CONNECTIONS: &str = "db_pool_connections";
/// The pool's size bound (`DATABASE_POOL_SIZE`).
pub const POOL_MAX: &str = "db_pool_max_connections";
/// Callers waiting for a pooled connection at the last scrape.
pub const POOL_WAITING: &str = "db_pool_waiting";
/// The host of `DATABASE_URL`'s list new connections go to (0: the first) at the last scrape.
pub const WRITER_HOST: &str = "db_writer_host";
/// Moves of new connections to another host of `DATABASE_URL`'s list: past a failed host, or
/// back to the first at SIGHUP.
pub const WRITER_MOVES: &str = "db_writer_moves_total";

/// Every database metric name.
pub const METRIC_NAMES: &[&str] = &[
    TRANSACTIONS,
    RETRIES,
    crate::instrument::STATEMENTS,
    POOL_CONNECTIONS,
    POOL_MAX,
    POOL_WAITING,
    WRITER_HOST,
    WRITER_MOVES,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    pub max: usize,
    /// Connections open (lent out or idle).
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
    /// The host new connections go to (0 for a store with one).
    pub writer: usize,
}

impl PoolStatus {
    /// Sets the pool gauges to this state (called at each scrape).
    pub fn record(self) {
        let in_use = self.open.saturating_sub(self.idle);
        metrics::gauge!(POOL_CONNECTIONS, "state" => "in_use").set(in_use as f64);
        metrics::gauge!(POOL_CONNECTIONS, "state" => "idle").set(self.idle as f64);
        metrics::gauge!(POOL_MAX).set(self.max as f64);
        metrics::gauge!(POOL_WAITING).set(self.waiting as f64);
        metrics::gauge!(WRITER_HOST).set(self.writer as f64);
    }
}

/// The help texts of the database metrics, for the exposition.
pub fn describe() {
    metrics::describe_counter!(
        TRANSACTIONS,
        "Ledger transactions begun (purchase batches, cancels, resolutions, drop creations), retries included."
    );
    metrics::describe_counter!(
        RETRIES,
        "Ledger transactions tried again, by reason (deadlock, lock_wait, duplicate_key, busy, contended, other)."
    );
    metrics::describe_counter!(
        crate::instrument::STATEMENTS,
        "Statements this instance sent to the database."
    );
    metrics::describe_gauge!(
        POOL_CONNECTIONS,
        "Pooled database connections at the last scrape, by state (in_use, idle)."
    );
    metrics::describe_gauge!(POOL_MAX, "The database pool's size bound.");
    metrics::describe_gauge!(
        POOL_WAITING,
        "Callers waiting for a pooled database connection at the last scrape."
    );
    metrics::describe_gauge!(
        WRITER_HOST,
        "The host of DATABASE_URL's list new database connections go to (0: the first) at the last scrape."
    );
    metrics::describe_counter!(
        WRITER_MOVES,
        "Moves of new database connections to another host of DATABASE_URL's list (past a failed host, or back to the first at SIGHUP)."
    );
}

/// Why a failed transaction is tried again, as the [`RETRIES`] label.
fn retry_reason<R>(error: &TxError<R>) -> &'static str {
    use diesel::result::{DatabaseErrorKind, Error};
    match error {
        TxError::Refused(_) => "contended",
        TxError::Db(Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => "duplicate_key",
        TxError::Db(Error::DatabaseError(_, info)) => {
            let message = info.message();
            if message.contains("Deadlock") {
                "deadlock"
            } else if message.contains("Lock wait timeout") {
                "lock_wait"
            } else if message.contains("locked") || message.contains("busy") {
                "busy"
            } else {
                "other"
            }
        }
        _ => "other",
    }
}

/// Runs `work` within `limit`; past it the work is dropped (a transaction in it rolls back:
/// see [`PooledConn`](crate::PooledConn)) and the answer is [`InfraError::unavailable`]. When
/// the limit ran out during COMMIT the outcome is unknown, which is what "unavailable" means to
/// the caller: it must not report success, and may retry with the same idempotency key.
pub async fn bounded<T, E, F>(limit: Duration, what: &'static str, work: F) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<InfraError>,
{
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(InfraError::unavailable(format!(
            "{what}: no answer within {} ms",
            limit.as_millis()
        ))
        .into()),
    }
}
