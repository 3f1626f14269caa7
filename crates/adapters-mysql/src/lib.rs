//! The production source of truth: MySQL 8 or MariaDB, through diesel-async's pure-Rust
//! driver. The store is adapters-sql's [`SqlStore`] over this crate's [`Mysql`] backend: the
//! pool (TLS included), the migrations, the dialect and the reading of server errors.

use adapters_sql::{Backend, Bounds, Dialect, PooledConn, SqlStore, count_statements};
use anyhow::Context as _;
use diesel::result::{DatabaseErrorKind, Error as DbError};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{
    AsyncConnection, AsyncMigrationHarness, AsyncMysqlConnection, SimpleAsyncConnection,
};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use goods_domain::InfraError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The MySQL migrations (the repository's top-level `migrations/mysql`), embedded.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/mysql");

pub use adapters_sql::{MysqlTls, TlsMode};
pub use hosts::{HostList, Writer};

pub mod hosts;

/// The driver's TLS options for `tls`. A CA file replaces the public roots compiled into the
/// driver: only that CA is trusted, so a certificate from any public CA is refused.
fn ssl_opts(tls: &MysqlTls) -> Option<mysql_async::SslOpts> {
    let base = mysql_async::SslOpts::default()
        .with_root_certs(tls.ca_file.iter().map(|path| path.clone().into()).collect())
        .with_disable_built_in_roots(tls.ca_file.is_some());
    match tls.mode {
        TlsMode::Off => None,
        TlsMode::Required => Some(
            base.with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        TlsMode::VerifyCa => Some(base.with_danger_skip_domain_validation(true)),
        TlsMode::VerifyIdentity => Some(base),
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    #[test]
    fn a_ca_file_is_the_only_root_and_without_one_the_public_roots_stay() {
        let with = |mode, ca_file: Option<&str>| {
            ssl_opts(&MysqlTls {
                mode,
                ca_file: ca_file.map(Into::into),
            })
        };
        for mode in [TlsMode::VerifyCa, TlsMode::VerifyIdentity] {
            let own = with(mode, Some("/etc/goods/db-ca.pem")).unwrap();
            assert!(own.disable_built_in_roots(), "{mode:?}");
            assert_eq!(own.root_certs().len(), 1);
            let public = with(mode, None).unwrap();
            assert!(!public.disable_built_in_roots(), "{mode:?}");
            assert!(public.root_certs().is_empty());
        }
        assert!(with(TlsMode::Off, None).is_none());
    }
}

/// One connection to the host of `url` with `tls`, set up as diesel-async sets up its own (its
/// statement cache, found rows, UTC) plus the TLS options a URL cannot carry, and whether that
/// host may be written through ([`hosts::node_writable`]).
async fn open_node(url: String, tls: &MysqlTls) -> Result<(mysql_async::Conn, bool), String> {
    let opts = mysql_async::Opts::from_url(&url).map_err(|e| e.to_string())?;
    let opts = mysql_async::OptsBuilder::from_opts(opts)
        .stmt_cache_size(0)
        .client_found_rows(true)
        .ssl_opts(ssl_opts(tls));
    let mut conn = mysql_async::Conn::new(opts).await.map_err(|e| match tls.mode {
        TlsMode::Off => e.to_string(),
        mode => format!("{e} (DATABASE_TLS={mode:?}: the connection is refused rather than made in plaintext or with a certificate that does not verify)"),
    })?;
    let writable = hosts::node_writable(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    Ok((conn, writable))
}

/// One connection through `writer`'s host (see [`Writer::connect`]).
async fn establish_through(
    writer: &Writer,
    tls: &MysqlTls,
) -> diesel::ConnectionResult<AsyncMysqlConnection> {
    let conn = writer
        .connect(|url| open_node(url, tls))
        .await
        .map_err(diesel::ConnectionError::BadConnection)?;
    AsyncMysqlConnection::try_from(conn).await
}

/// One connection to the first writable host of `url` (one-off work: migrations).
async fn establish(url: &str, tls: &MysqlTls) -> diesel::ConnectionResult<AsyncMysqlConnection> {
    let hosts = HostList::parse(url).map_err(diesel::ConnectionError::InvalidConnectionUrl)?;
    establish_through(&Writer::new(hosts, CONNECT_WAIT), tls).await
}

/// How long one host may take to accept a connection and say whether it is writable, when no
/// bound is configured (migrations).
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The MySQL store: every SQL-backed port.
pub type MysqlStore = SqlStore<Mysql>;

/// The MySQL backend: its pool and bounds.
pub struct Mysql {
    pool: Pool<AsyncMysqlConnection>,
    statements: Arc<AtomicU64>,
    bounds: Bounds,
    /// Which host of `DATABASE_URL` new connections go to.
    writer: Arc<Writer>,
}

impl Mysql {
    /// Connects a pool of `pool_size` connections to `url` (`mysql://...`, one host or several:
    /// see [`Writer`]), applying pending migrations first when `migrate` is set. Must run on a
    /// multi-threaded runtime.
    ///
    /// # Errors
    /// When the server cannot be reached or a migration fails.
    pub async fn connect(url: &str, pool_size: usize, migrate: bool) -> anyhow::Result<MysqlStore> {
        Self::connect_with(
            url,
            pool_size,
            migrate,
            Bounds::default(),
            &MysqlTls::default(),
        )
        .await
    }

    /// [`connect`](Self::connect) with explicit bounds on every wait for the server. Each
    /// connection runs its transactions at READ COMMITTED, and gets `innodb_lock_wait_timeout` (whole seconds, at least 1) and, on
    /// MariaDB, `max_statement_time` from the transaction limit, so a stalled client holding a
    /// hot row, or a statement the server cannot finish, fails instead of queueing everyone.
    /// On MariaDB also `idle_transaction_timeout` (the limit rounded up to whole seconds): every
    /// transaction of this process ends within the limit (`SqlStore::write_tx`), so one left idle
    /// past it belongs to an instance that stopped mid-way (paused, swapped out, frozen by its
    /// host), and the server rolls it back and closes its connection, freeing its row locks for
    /// the rest of the fleet instead of holding them until that instance runs again.
    ///
    /// # Errors
    /// When the server cannot be reached or a migration fails.
    pub async fn connect_with(
        url: &str,
        pool_size: usize,
        migrate: bool,
        bounds: Bounds,
        tls: &MysqlTls,
    ) -> anyhow::Result<MysqlStore> {
        if migrate {
            migrate_database(url, None, tls).await?;
        } else {
            let pending = pending_migrations(url, tls).await?;
            anyhow::ensure!(
                pending.is_empty(),
                "the database schema is behind this release ({} pending migrations, first {}): \
                 run `goods-server migrate` first (or set DATABASE_MIGRATE=true)",
                pending.len(),
                pending.first().map_or("", String::as_str)
            );
        }
        let statements = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&statements);
        let mut config = ManagerConfig::default();
        let limit = bounds.transaction.as_secs_f64();
        let lock_wait = bounds.transaction.as_secs().max(1);
        let idle = bounds.transaction.as_millis().div_ceil(1000).max(1);
        let tls = tls.clone();
        let hosts = HostList::parse(url).map_err(|e| anyhow::anyhow!("DATABASE_URL {e}"))?;
        let first = hosts.url(0);
        // A host that hangs must leave time for the next within one caller's wait for a
        // connection, or no caller would ever get past it.
        let per_host = bounds.acquire / u32::try_from(hosts.len()).unwrap_or(u32::MAX);
        let writer = Arc::new(Writer::new(hosts, per_host));
        let writes_through = Arc::clone(&writer);
        config.custom_setup = Box::new(move |_| {
            let counter = Arc::clone(&counter);
            let writer = Arc::clone(&writes_through);
            let tls = tls.clone();
            Box::pin(async move {
                let mut conn = establish_through(&writer, &tls).await?;
                // READ COMMITTED: every read of a purchase sees what is committed when it runs,
                // not a snapshot from the transaction's first read, so what it reads after
                // locking the buyers' holdings is current (see `commit_batch`).
                conn.batch_execute(&format!(
                    "SET SESSION innodb_lock_wait_timeout = {lock_wait}; \
                     SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
                ))
                .await
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                // MariaDB only; MySQL 8 has neither variable (its statements are bounded by
                // the client's transaction limit alone, and a stalled client's transaction
                // lasts until its connection drops).
                if let Err(error) = conn
                    .batch_execute(&format!(
                        "SET SESSION max_statement_time = {limit}; \
                         SET SESSION idle_transaction_timeout = {idle}"
                    ))
                    .await
                {
                    tracing::debug!(error = %error, "max_statement_time or idle_transaction_timeout not supported");
                }
                conn.set_instrumentation(count_statements(counter));
                Ok(conn)
            })
        });
        let manager =
            AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(first, config);
        let pool = adapters_sql::pool(manager, pool_size).context("building the MySQL pool")?;
        let backend = Self {
            pool,
            statements,
            bounds,
            writer,
        };
        let store = SqlStore::new(backend);
        store.ping().await.context("connecting to MySQL")?;
        store.backend().warm().await;
        Ok(store)
    }

    /// Opens every connection of the pool now. deadpool opens them on demand, which would put
    /// up to `pool_size` connection setups (TCP, authentication, the session settings) in a
    /// drop's first second, while every buyer waits for one; a server that refuses some
    /// (`max_connections`) only leaves the pool smaller, as it would have been anyway.
    async fn warm(&self) {
        let size = self.pool.status().max_size;
        let mut held = Vec::with_capacity(size);
        while held.len() < size {
            match Backend::conn(self).await {
                Ok(conn) => held.push(conn),
                Err(error) => {
                    tracing::warn!(opened = held.len(), size, error = %error, "the connection pool could not be filled at start");
                    break;
                }
            }
        }
    }

    /// The host of `DATABASE_URL`'s list that new connections go to (0 is the first), shared
    /// with whoever may move it back ([`Writer::reset`]).
    pub fn writer(&self) -> &Arc<Writer> {
        &self.writer
    }

    /// How many connections the pool holds open (for tests of the warm-up).
    pub fn open_connections(&self) -> usize {
        self.pool.status().size
    }
}

/// MySQL's and MariaDB's SQL where the dialects differ.
static DIALECT: Dialect = Dialect {
    last_insert_id: "LAST_INSERT_ID()",
    locking_read: " LOCK IN SHARE MODE",
    exclusive_read: " FOR UPDATE",
    ensure_holdings_head: "INSERT INTO drop_holdings (drop_id, user_id, quantity) VALUES",
    ensure_holdings_tail: " ON DUPLICATE KEY UPDATE quantity = quantity",
    begin_write: "",
    insert_ignore: "INSERT IGNORE INTO",
    db_now_ms: "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)",
    concat_open: "CONCAT(",
    concat_sep: ", ",
    concat_close: ")",
};

impl Backend for Mysql {
    type Conn = AsyncMysqlConnection;
    type Pooled = PooledConn<AsyncDieselConnectionManager<AsyncMysqlConnection>>;
    const DIALECT: &'static Dialect = &DIALECT;

    /// A connection within the acquire bound; one the pool opened before the writer last moved
    /// leads to the node left behind, and is closed in favour of a fresh one.
    async fn conn(&self) -> Result<Self::Pooled, InfraError> {
        let Some(moved) = self.writer.moved_at() else {
            return PooledConn::get(&self.pool, self.bounds.acquire, "mysql connection").await;
        };
        let until = std::time::Instant::now() + self.bounds.acquire;
        loop {
            let wait = until.saturating_duration_since(std::time::Instant::now());
            let conn = PooledConn::get(&self.pool, wait, "mysql connection").await?;
            if conn.created() >= moved {
                return Ok(conn);
            }
            conn.discard();
        }
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
            writer: self.writer.current(),
        }
    }

    /// Deadlocks (1213) and lock wait timeouts (1205) roll the transaction back; a fresh one may
    /// succeed. diesel-async keeps only the server's message for these (their kind is
    /// `Unknown`), so they are recognised by the message both MySQL 8 and MariaDB send.
    fn retryable(error: &DbError) -> bool {
        match error {
            DbError::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => true,
            DbError::DatabaseError(DatabaseErrorKind::Unknown, info) => {
                let message = info.message();
                message.starts_with("Deadlock found")
                    || message.starts_with("Lock wait timeout exceeded")
            }
            _ => false,
        }
    }

    /// The server did not answer within a bound, or the connection to it was lost: the
    /// caller answers 503 and, for a write, the outcome is unknown (the admission lease
    /// resolves it). Lock wait timeouts reach here only once the retries are used up.
    fn unavailable(error: &DbError) -> bool {
        match error {
            DbError::DatabaseError(DatabaseErrorKind::Unknown, info) => {
                let message = info.message();
                [
                    "Input/output error",
                    "Connection to the server is closed",
                    "Lost connection",
                    "server has gone away",
                    "max_statement_time",
                    "Lock wait timeout exceeded",
                ]
                .iter()
                .any(|sign| message.contains(sign))
            }
            DbError::BrokenTransactionManager => true,
            _ => false,
        }
    }
}

/// Applies this release's pending migrations to the database at `url`, all of them or up to and
/// including `to` (`goods-server migrate [--to VERSION]`, or an instance's start with
/// `DATABASE_MIGRATE=true`); returns the migrations applied.
///
/// # Errors
/// When the server cannot be reached, `to` names no migration, or a migration fails.
pub async fn migrate_database(
    url: &str,
    to: Option<&str>,
    tls: &MysqlTls,
) -> anyhow::Result<Vec<String>> {
    use backon::Retryable as _;
    // On a live database a migration's DDL can lose a lock to the purchases being served (a
    // deadlock or a lock wait timeout). The failed statement changed nothing and diesel did
    // not record the migration, so it is run again; every migration here is one statement,
    // which keeps that safe.
    (|| migrate_once(url, to, tls, MIGRATION_LOCK_WAIT_S))
        .retry(
            backon::ExponentialBuilder::default()
                .with_min_delay(std::time::Duration::from_millis(50))
                .with_max_delay(std::time::Duration::from_secs(2))
                .with_max_times(10)
                .with_jitter(),
        )
        .when(lost_a_lock)
        .notify(|error, pause| {
            tracing::warn!(
                error = format!("{error:#}"),
                pause_ms = pause.as_millis(),
                "migration lost a lock; trying again"
            );
        })
        .await
}

/// Whether a migration failed on a lock held by the live traffic.
fn lost_a_lock(error: &anyhow::Error) -> bool {
    let text = format!("{error:#}");
    text.contains("Deadlock found") || text.contains("Lock wait timeout")
}

/// How long a migration run waits for another to finish before it gives up.
const MIGRATION_LOCK_WAIT_S: u32 = 120;

async fn migrate_once(
    url: &str,
    to: Option<&str>,
    tls: &MysqlTls,
    lock_wait_s: u32,
) -> anyhow::Result<Vec<String>> {
    let mut conn = establish(url, tls)
        .await
        .context("connecting to MySQL for migrations")?;
    // Instances starting at once on a fresh database would run the same DDL twice: each run
    // takes the database's named lock first, so they take turns and the later ones find the
    // migrations applied. A lock-less server (a Galera node refusing it) runs as before.
    let locked = migration_lock(&mut conn, "GET_LOCK", &format!(", {lock_wait_s}")).await;
    match &locked {
        Ok(Some(1)) => {}
        Ok(_) => anyhow::bail!(
            "another instance has been migrating this database for {lock_wait_s} s; try again"
        ),
        Err(error) => {
            tracing::warn!(error = %error, "migration lock not available; migrating without it");
        }
    }
    let mut harness = AsyncMigrationHarness::new(conn);
    let applied = adapters_sql::apply_migrations(&mut harness, &MIGRATIONS, to)
        .context("applying MySQL migrations");
    let mut conn = harness.into_inner();
    if matches!(locked, Ok(Some(1))) {
        let _ = migration_lock(&mut conn, "RELEASE_LOCK", "").await;
    }
    applied
}

/// `function` (`GET_LOCK`, `RELEASE_LOCK`) on the database's migration lock, named after the
/// database so two databases on one server do not wait for each other.
async fn migration_lock(
    conn: &mut AsyncMysqlConnection,
    function: &str,
    args: &str,
) -> Result<Option<i64>, DbError> {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Locked {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
        n: Option<i64>,
    }
    diesel::sql_query(format!(
        "SELECT CAST({function}(CONCAT('goods-server migrations ', DATABASE()){args}) AS SIGNED) AS n"
    ))
    .get_result::<Locked>(conn)
    .await
    .map(|row| row.n)
}

/// The versions of this release's migrations not applied to the database at `url` yet.
///
/// # Errors
/// When the server cannot be reached or its migration table not read.
pub async fn pending_migrations(url: &str, tls: &MysqlTls) -> anyhow::Result<Vec<String>> {
    let conn = establish(url, tls)
        .await
        .context("connecting to MySQL to check its migrations")?;
    let mut harness = AsyncMigrationHarness::new(conn);
    let pending = harness
        .pending_migrations(MIGRATIONS)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("reading the applied migrations")?;
    Ok(pending.iter().map(|m| m.name().to_string()).collect())
}

#[cfg(test)]
mod migration_tests {
    use super::lost_a_lock;

    #[test]
    fn only_lock_conflicts_make_a_migration_run_again() {
        let deadlock = anyhow::anyhow!(
            "Failed to run 2026-12-02-000001_products_owner_expand with: Deadlock found when trying to get lock; try restarting transaction"
        )
        .context("applying MySQL migrations");
        assert!(lost_a_lock(&deadlock));
        assert!(lost_a_lock(&anyhow::anyhow!(
            "Lock wait timeout exceeded; try restarting transaction"
        )));
        assert!(!lost_a_lock(&anyhow::anyhow!(
            "Duplicate column name 'owner_id'"
        )));
    }

    /// Needs MariaDB (`TEST_MYSQL_URL`): a run that finds the migration lock held past its wait
    /// gives up with a sentence saying so and applies nothing; once the lock is free, the next
    /// run applies every migration.
    mod needs_mysql {
        use super::super::{MysqlTls, migrate_once, pending_migrations};
        use diesel_async::{
            AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _,
        };

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_run_that_waits_past_its_bound_for_the_lock_applies_nothing() {
            let url = test_support::mysql::fresh_database().await;
            let tls = MysqlTls::default();
            let all = pending_migrations(&url, &tls).await.unwrap().len();
            let mut holder = AsyncMysqlConnection::establish(&url).await.unwrap();
            holder
                .batch_execute("DO GET_LOCK(CONCAT('goods-server migrations ', DATABASE()), 0)")
                .await
                .unwrap();
            let refused = migrate_once(&url, None, &tls, 1).await.unwrap_err();
            assert!(
                format!("{refused:#}")
                    .contains("another instance has been migrating this database for 1 s"),
                "{refused:#}"
            );
            assert_eq!(pending_migrations(&url, &tls).await.unwrap().len(), all);
            holder
                .batch_execute("DO RELEASE_LOCK(CONCAT('goods-server migrations ', DATABASE()))")
                .await
                .unwrap();
            let applied = migrate_once(&url, None, &tls, 1).await.unwrap();
            assert_eq!(applied.len(), all);
        }
    }
}
