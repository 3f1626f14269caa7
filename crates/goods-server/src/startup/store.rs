//! Opening the source of truth the configuration names: the embedded SQLite file, or MySQL /
//! MariaDB when the binary has the `mysql` feature (the configuration refuses a `mysql://` URL
//! without it, so the arm below that says so is never reached from a valid configuration).

use crate::config::{Database, DatabaseConfig};
use adapters_sql::MysqlTls;
use futures::FutureExt as _;
use goods_domain::ports::SourceOfTruth;
use std::sync::Arc;

/// The SQL store, plus its health check.
pub(super) struct SqlPorts {
    pub store: Arc<dyn SourceOfTruth>,
    pub probe: api_actix::Probe,
    /// The pool's state, read at each scrape.
    pub pool: Arc<dyn Fn() -> adapters_sql::PoolStatus + Send + Sync>,
    /// Sends new connections back to the first host of a `DATABASE_URL` that names several
    /// (SIGHUP); none for a store with one.
    pub reset_writer: Option<Arc<dyn Fn() + Send + Sync>>,
}

fn sql_ports<B: adapters_sql::Backend>(store: adapters_sql::SqlStore<B>) -> SqlPorts
where
    adapters_sql::SqlStore<B>: SourceOfTruth + Clone,
{
    let (probe_store, pool_store) = (store.clone(), store.clone());
    SqlPorts {
        store: Arc::new(store),
        probe: Arc::new(move || {
            let store = probe_store.clone();
            async move { store.ping().await.map_err(|e| e.to_string()) }.boxed()
        }),
        pool: Arc::new(move || pool_store.pool_status()),
        reset_writer: None,
    }
}

/// Opens the store (migrating it when configured); its ports and the database's identity.
pub(super) async fn open(db: &DatabaseConfig) -> anyhow::Result<(SqlPorts, String)> {
    match &db.source {
        Database::Sqlite(url) => {
            let store = adapters_sqlite::Sqlite::open_with(url, db.migrate, db.bounds()).await?;
            let identity = store.identity().await?;
            Ok((sql_ports(store), identity))
        }
        #[cfg(feature = "mysql")]
        Database::Mysql(url) => {
            use secrecy::ExposeSecret as _;
            let store = adapters_mysql::Mysql::connect_with(
                url.expose_secret(),
                db.pool_size,
                db.migrate,
                db.bounds(),
                &db.tls,
            )
            .await?;
            let identity = store.identity().await?;
            let writer = std::sync::Arc::clone(store.backend().writer());
            let mut ports = sql_ports(store);
            ports.reset_writer = Some(Arc::new(move || writer.reset()));
            Ok((ports, identity))
        }
        #[cfg(not(feature = "mysql"))]
        Database::Mysql(_) => Err(without_mysql()),
    }
}

/// Applies the pending migrations to `database`, all of them or up to and including `to`, and
/// returns the ones applied (`goods-server migrate [--to VERSION]`).
///
/// # Errors
/// When the database cannot be opened, `to` names no migration, or a migration fails.
pub async fn migrate(
    database: &Database,
    tls: &MysqlTls,
    to: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    match database {
        Database::Sqlite(url) => {
            let _ = tls;
            adapters_sqlite::migrate_database(url, to).await
        }
        #[cfg(feature = "mysql")]
        Database::Mysql(url) => {
            use secrecy::ExposeSecret as _;
            adapters_mysql::migrate_database(url.expose_secret(), to, tls).await
        }
        #[cfg(not(feature = "mysql"))]
        Database::Mysql(_) => Err(without_mysql()),
    }
}

#[cfg(not(feature = "mysql"))]
fn without_mysql() -> anyhow::Error {
    anyhow::anyhow!("this goods-server was built without the `mysql` feature")
}
