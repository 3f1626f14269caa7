//! The embedded source of truth: a SQLite file, no server to install. The pool holds one
//! connection, so transactions run alone in arrival order (SQLite's own serialisation) rather
//! than in "database is locked" storms.

use adapters_sql::{Backend, Bounds, Dialect, PooledConn, SqlStore, count_statements};
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

/// The SQLite store: every SQL-backed port.
pub type SqliteStore = SqlStore<Sqlite>;

/// The SQLite backend: its one connection and bounds.
pub struct Sqlite {
    pool: Pool<Conn>,
    statements: Arc<AtomicU64>,
    bounds: Bounds,
}

impl Sqlite {
    /// Opens (creating) the database at `sqlite://path`, migrating it when `migrate` is set;
    /// on a multi-threaded runtime.
    pub async fn open(url: &str, migrate: bool) -> anyhow::Result<SqliteStore> {
        Self::open_with(url, migrate, Bounds::default()).await
    }

    /// [`open`](Self::open) with explicit bounds on every wait for the database.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(
        url: &str,
        migrate: bool,
        bounds: Bounds,
    ) -> anyhow::Result<SqliteStore> {
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
        let pool = adapters_sql::pool(manager, 1).context("building the SQLite pool")?;
        Ok(SqlStore::new(Self {
            pool,
            statements,
            bounds,
        }))
    }
}

/// SQLite's SQL where the dialects differ.
static DIALECT: Dialect = Dialect {
    last_insert_id: "last_insert_rowid()",
    locking_read: "",
    exclusive_read: "",
    ensure_holdings_head: "INSERT OR IGNORE INTO drop_holdings (drop_id, user_id, quantity) VALUES",
    ensure_holdings_tail: "",
    begin_write: "UPDATE stocks SET version = version WHERE 0",
    insert_ignore: "INSERT OR IGNORE INTO",
    db_now_ms: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    concat_open: "(",
    concat_sep: " || ",
    concat_close: ")",
};

impl Backend for Sqlite {
    type Conn = Conn;
    type Pooled = PooledConn<AsyncDieselConnectionManager<Conn>>;
    const DIALECT: &'static Dialect = &DIALECT;

    async fn conn(&self) -> Result<Self::Pooled, InfraError> {
        PooledConn::get(&self.pool, self.bounds.acquire, "sqlite connection").await
    }

    fn bounds(&self) -> Bounds {
        self.bounds
    }

    fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    fn pool_status(&self) -> adapters_sql::PoolStatus {
        let status = self.pool.status();
        adapters_sql::PoolStatus {
            max: status.max_size,
            open: status.size,
            idle: status.available,
            waiting: status.waiting,
            writer: 0,
        }
    }

    /// With one connection there is no concurrent writer, so nothing is worth retrying.
    fn retryable(_: &diesel::result::Error) -> bool {
        false
    }

    /// A database file that stays locked past `busy_timeout` (another process writing).
    fn unavailable(error: &diesel::result::Error) -> bool {
        matches!(error, diesel::result::Error::DatabaseError(_, info) if info.message().contains("database is locked"))
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

/// Applies this release's pending migrations to the file at `url` (creating it), all or up to
/// `to`; returns those applied.
pub async fn migrate_database(url: &str, to: Option<&str>) -> anyhow::Result<Vec<String>> {
    let path = file_of(url)?;
    let conn = establish(&path)
        .await
        .with_context(|| format!("opening {path}"))?;
    let mut harness = AsyncMigrationHarness::new(conn);
    adapters_sql::apply_migrations(&mut harness, &MIGRATIONS, to)
        .context("applying SQLite migrations")
}
