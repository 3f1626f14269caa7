//! The source of truth: which database, how it is reached, and its time bounds.

#[cfg(feature = "mysql")]
use super::secret;
use super::{ConfigError, bad, number};
pub use adapters_sql::{MysqlTls, TlsMode};
use secrecy::{ExposeSecret as _, SecretString};
use std::time::Duration;

/// Which source of truth.
#[derive(Debug, Clone)]
pub enum Database {
    /// `sqlite://path`: the embedded file.
    Sqlite(String),
    /// `mysql://...`: MySQL 8 or MariaDB. Secret: the URL may hold the password.
    Mysql(SecretString),
}

impl PartialEq for Database {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Sqlite(a), Self::Sqlite(b)) => a == b,
            (Self::Mysql(a), Self::Mysql(b)) => a.expose_secret() == b.expose_secret(),
            _ => false,
        }
    }
}

/// The database section: `DATABASE_*` and the bounds of its transactions.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// `DATABASE_URL`.
    pub source: Database,
    /// TLS to a MySQL source of truth (`DATABASE_TLS`, `DATABASE_TLS_CA_FILE`).
    pub tls: MysqlTls,
    /// Apply migrations at start (`DATABASE_MIGRATE`): by default only the embedded file is
    /// migrated by the server; a MySQL fleet migrates once with `goods-server migrate`.
    pub migrate: bool,
    /// Connections (`DATABASE_POOL_SIZE`).
    pub pool_size: usize,
    /// Wait for a pooled connection before 503 (`DB_ACQUIRE_TIMEOUT_MS`).
    pub acquire_timeout: Duration,
    /// Time limit of one ledger transaction, retries included, before 503 (`DB_TX_TIMEOUT_MS`).
    pub tx_timeout: Duration,
}

impl DatabaseConfig {
    pub(super) fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let source = source(get)?;
        let migrate = match get("DATABASE_MIGRATE").as_deref() {
            None => matches!(source, Database::Sqlite(_)),
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(bad(
                    "DATABASE_MIGRATE",
                    format!("{other:?} is not true or false"),
                ));
            }
        };
        Ok(Self {
            tls: tls(get, &source)?,
            source,
            migrate,
            pool_size: number(get, "DATABASE_POOL_SIZE", 16_usize, 1)?,
            acquire_timeout: Duration::from_millis(number(
                get,
                "DB_ACQUIRE_TIMEOUT_MS",
                1000_u64,
                1,
            )?),
            tx_timeout: Duration::from_millis(number(get, "DB_TX_TIMEOUT_MS", 3000_u64, 1)?),
        })
    }

    /// The bounds every statement and transaction of the store runs under.
    pub fn bounds(&self) -> adapters_sql::Bounds {
        adapters_sql::Bounds {
            acquire: self.acquire_timeout,
            transaction: self.tx_timeout,
        }
    }
}

/// `DATABASE_URL`, with the password from `DATABASE_PASSWORD_FILE` when set.
pub(super) fn source(get: &impl Fn(&str) -> Option<String>) -> Result<Database, ConfigError> {
    let url = get("DATABASE_URL").unwrap_or_else(|| "sqlite://data/goods.db".into());
    if url.starts_with("mysql://") {
        super::needs_feature("DATABASE_URL", "mysql", cfg!(feature = "mysql"))?;
        return mysql_source(get, url);
    }
    if get("DATABASE_PASSWORD_FILE").is_some() {
        return Err(bad(
            "DATABASE_PASSWORD_FILE",
            "applies to a mysql:// DATABASE_URL only",
        ));
    }
    match url.strip_prefix("sqlite://") {
        Some("") => Err(bad("DATABASE_URL", "sqlite:// needs a file path")),
        Some(_) => Ok(Database::Sqlite(url)),
        None => Err(bad("DATABASE_URL", "must start with mysql:// or sqlite://")),
    }
}

/// A `mysql://` `DATABASE_URL` of one host or several (`h1:p1,h2:p2`), checked through its
/// first host's URL (a URL library reads one host), which also takes the password file.
#[cfg(feature = "mysql")]
fn mysql_source(
    get: &impl Fn(&str) -> Option<String>,
    url: String,
) -> Result<Database, ConfigError> {
    let hosts = adapters_mysql::HostList::parse(&url).map_err(|e| bad("DATABASE_URL", e))?;
    let first = hosts.url(0);
    refuse_tls_in_url(&first)?;
    let first = secret::with_password_file(get, "DATABASE_URL", first, "DATABASE_PASSWORD_FILE")?;
    let url = hosts
        .with_parts_of(&first)
        .map_err(|e| bad("DATABASE_URL", e))?
        .to_string();
    Ok(Database::Mysql(url.into()))
}

#[cfg(not(feature = "mysql"))]
fn mysql_source(_: &impl Fn(&str) -> Option<String>, _: String) -> Result<Database, ConfigError> {
    Err(bad("DATABASE_URL", "needs the `mysql` feature"))
}

/// Whether a `DATABASE_URL` query parameter is about TLS (`require_ssl`, `ssl-mode`, `sslmode`,
/// `ssl_ca`, `verify_identity`, `built_in_roots`, `tls`, ...). Such a parameter is refused at start:
/// the driver reads some of them and the connection setup overrides others, so a URL could look
/// encrypted and log in in plaintext. TLS is `DATABASE_TLS` and `DATABASE_TLS_CA_FILE` alone.
#[cfg(feature = "mysql")]
fn is_tls_parameter(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    key.starts_with("ssl")
        || key.starts_with("tls")
        || key.ends_with("_ssl")
        || matches!(
            key.as_str(),
            "verify_ca" | "verify_identity" | "built_in_roots" | "ca" | "cert" | "key"
        )
}

#[cfg(feature = "mysql")]
fn refuse_tls_in_url(url: &str) -> Result<(), ConfigError> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Err(bad("DATABASE_URL", "is not a URL"));
    };
    if let Some((key, _)) = parsed.query_pairs().find(|(key, _)| is_tls_parameter(key)) {
        return Err(bad(
            "DATABASE_URL",
            format!(
                "carries the TLS parameter {key:?}, which this service does not read from the URL: \
                 remove it and set DATABASE_TLS (required, verify-ca or verify-identity) and, for \
                 a private CA, DATABASE_TLS_CA_FILE"
            ),
        ));
    }
    Ok(())
}

/// `DATABASE_TLS` and `DATABASE_TLS_CA_FILE`, for a MySQL `database`.
pub(super) fn tls(
    get: &impl Fn(&str) -> Option<String>,
    database: &Database,
) -> Result<MysqlTls, ConfigError> {
    let mode = match get("DATABASE_TLS").as_deref() {
        None | Some("off") => TlsMode::Off,
        Some("required") => TlsMode::Required,
        Some("verify-ca") => TlsMode::VerifyCa,
        Some("verify-identity") => TlsMode::VerifyIdentity,
        Some(other) => {
            return Err(bad(
                "DATABASE_TLS",
                format!("{other:?} is not off, required, verify-ca or verify-identity"),
            ));
        }
    };
    let ca_file = get("DATABASE_TLS_CA_FILE").map(std::path::PathBuf::from);
    if mode != TlsMode::Off && matches!(database, Database::Sqlite(_)) {
        return Err(bad(
            "DATABASE_TLS",
            "applies to a mysql:// DATABASE_URL only",
        ));
    }
    if let Some(ca) = &ca_file {
        if !matches!(mode, TlsMode::VerifyCa | TlsMode::VerifyIdentity) {
            return Err(bad(
                "DATABASE_TLS_CA_FILE",
                "is used by DATABASE_TLS=verify-ca or verify-identity only",
            ));
        }
        super::readable("DATABASE_TLS_CA_FILE", ca)?;
    }
    Ok(MysqlTls { mode, ca_file })
}
