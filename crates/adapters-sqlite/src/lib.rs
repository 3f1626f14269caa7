//! The embedded source of truth: a SQLite file, so a newcomer runs the whole service with no
//! server to install, and data survives a restart.
//!
//! SQLite allows one writer at a time, and a transaction that reads before it writes cannot
//! upgrade its lock while another writer holds it. Rather than retrying "database is locked"
//! storms, the pool holds a single connection: every transaction runs alone, in arrival order,
//! which is also exactly the serialisation SQLite would impose.

use adapters_sql::{Bounds, PooledConn, count_statements};
use anyhow::Context as _;
use diesel::SqliteConnection;
use diesel_async::AsyncConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncMigrationHarness, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use goods_domain::InfraError;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The SQLite migrations, embedded in the binary.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");

type Conn = SyncConnectionWrapper<SqliteConnection>;

/// Durable, foreign-key-checked settings applied to every connection.
const PRAGMAS: &str = "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; \
                       PRAGMA synchronous = FULL;";

/// The SQLite store; implements every SQL-backed port.
#[derive(Clone)]
pub struct SqliteStore {
    pool: Pool<Conn>,
    statements: Arc<AtomicU64>,
    bounds: Bounds,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite://path`), and applies pending
    /// migrations when `migrate` is set. Must run on a multi-threaded runtime.
    ///
    /// # Errors
    /// When the file cannot be created or opened, or a migration fails.
    pub async fn open(url: &str, migrate: bool) -> anyhow::Result<Self> {
        let path = file_of(url)?;
        if migrate {
            migrate_database(url, None).await?;
        }
        let statements = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&statements);
        let mut config = ManagerConfig::default();
        config.custom_setup = Box::new(move |path| {
            let counter = Arc::clone(&counter);
            Box::pin(async move {
                let mut conn = establish(path).await?;
                conn.set_instrumentation(count_statements(counter));
                Ok(conn)
            })
        });
        let manager = AsyncDieselConnectionManager::<Conn>::new_with_config(path, config);
        let pool = Pool::builder(manager)
            .max_size(1)
            .build()
            .context("building the SQLite pool")?;
        Ok(Self {
            pool,
            statements,
            bounds: Bounds::default(),
        })
    }

    /// Statements sent since the store was opened.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    async fn conn(&self) -> Result<PooledConn<AsyncDieselConnectionManager<Conn>>, InfraError> {
        PooledConn::get(&self.pool, self.bounds.acquire, "sqlite connection").await
    }

    fn tx_timeout(&self) -> std::time::Duration {
        self.bounds.transaction
    }

    /// Replaces the bounds on waits for the database (the defaults are [`Bounds::default`]).
    #[must_use]
    pub fn with_bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// A database file that stays locked past `busy_timeout` (another process writing).
    fn unavailable(error: &diesel::result::Error) -> bool {
        matches!(error, diesel::result::Error::DatabaseError(_, info) if info.message().contains("database is locked"))
    }

    /// With one connection there is no concurrent writer, so nothing is worth retrying.
    fn retryable(_: &diesel::result::Error) -> bool {
        false
    }

    /// Whether the database answers.
    ///
    /// # Errors
    /// [`InfraError`] when it does not.
    pub async fn ping(&self) -> Result<(), InfraError> {
        let mut conn = self.conn().await?;
        conn.batch_execute("SELECT 1")
            .await
            .map_err(|e| InfraError::new("sqlite ping", e))
    }
}

async fn establish(path: impl AsRef<str>) -> diesel::ConnectionResult<Conn> {
    let mut conn = Conn::establish(path.as_ref()).await?;
    conn.batch_execute(PRAGMAS)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

/// The file behind `url` (`sqlite://path`), its directory created if needed.
fn file_of(url: &str) -> anyhow::Result<String> {
    let path = url
        .strip_prefix("sqlite://")
        .with_context(|| format!("not a sqlite:// URL: {url}"))?
        .to_owned();
    if let Some(dir) = Path::new(&path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    Ok(path)
}

/// Applies this release's pending migrations to the file at `url` (creating it), all of them
/// or up to and including `to`; returns the migrations applied.
///
/// # Errors
/// When the file cannot be opened, `to` names no migration, or a migration fails.
pub async fn migrate_database(url: &str, to: Option<&str>) -> anyhow::Result<Vec<String>> {
    let path = file_of(url)?;
    let conn = establish(&path)
        .await
        .with_context(|| format!("opening {path}"))?;
    let mut harness = AsyncMigrationHarness::new(conn);
    adapters_sql::apply_migrations(&mut harness, &MIGRATIONS, to)
        .context("applying SQLite migrations")
}

/// The SQL this backend speaks where the dialects differ.
mod dialect {
    /// The id the connection's last INSERT generated.
    pub const LAST_INSERT_ID: &str = "last_insert_rowid()";
    /// Makes a SELECT read the latest committed row, with a shared lock (empty where transactions run one at a time).
    pub const LOCKING_READ: &str = "";
    /// Makes a SELECT read the latest committed row and lock it exclusively until the transaction ends (empty where transactions run one at a time).
    pub const EXCLUSIVE_READ: &str = "";
    /// With `(?, ?, 0)` rows and [`ENSURE_HOLDINGS_TAIL`] after it: creates the buyers' holding rows that do not exist, locking every row exclusively where the backend has row locks (a shared lock here would deadlock two purchases of one buyer upgrading it).
    pub const ENSURE_HOLDINGS_HEAD: &str =
        "INSERT OR IGNORE INTO drop_holdings (drop_id, user_id, quantity) VALUES";
    /// See [`ENSURE_HOLDINGS_HEAD`].
    pub const ENSURE_HOLDINGS_TAIL: &str = "";
    /// Takes the database's write lock before a write transaction reads anything (empty where row locks make it unnecessary).
    pub const BEGIN_WRITE: &str = "UPDATE stocks SET version = version WHERE 0";
    /// The database's clock in unix milliseconds: the one clock admission leases are checked against.
    pub const DB_NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";
}

type Store = SqliteStore;

/// The queries and transactions, written once for every backend (see `adapters-sql`).
#[path = "../../adapters-sql/src/store.rs"]
mod store;
