//! Configuration from the environment (docs/configuration.md), validated at start: a bad value
//! stops the server with one line naming the variable.

mod secret;

pub use adapters_mysql::{MysqlTls, TlsMode};
use goods_app::GroupCommit;
use goods_domain::PaymentWindow;
use ipnet::IpNet;
use secrecy::{ExposeSecret as _, SecretString};
use std::net::SocketAddr;
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

/// Which admission gate.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Redis at this URL (shared by every instance). Secret: it may hold the password.
    Redis(SecretString),
    /// In-process (one instance only).
    Memory,
    /// No gate: the database's conditional updates alone (strategy B).
    Off,
}

impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Redis(a), Self::Redis(b)) => a.expose_secret() == b.expose_secret(),
            (Self::Memory, Self::Memory) | (Self::Off, Self::Off) => true,
            _ => false,
        }
    }
}

/// How callers are identified.
#[derive(Debug, Clone)]
pub enum Auth {
    /// HS256 JWTs (`AUTH_JWT_SECRET`, `AUTH_JWT_ISSUER`, `AUTH_JWT_AUDIENCE`).
    Jwt {
        /// The signing secret: at least 32 bytes, never a placeholder.
        secret: SecretString,
        /// The required `iss`, when set.
        issuer: Option<String>,
        /// The required `aud`, when set.
        audience: Option<String>,
    },
    /// Identity headers from a gateway at one of these addresses (`AUTH_TRUSTED_PROXIES`).
    TrustedHeader {
        /// Peers whose identity headers count.
        proxies: Vec<IpNet>,
    },
}

/// Loopback, the trusted peers of a loopback-bound trusted-header server by default.
fn loopback_nets() -> Vec<IpNet> {
    ["127.0.0.0/8", "::1/128"]
        .iter()
        .filter_map(|net| net.parse().ok())
        .collect()
}

/// `AUTH_TRUSTED_PROXIES`: comma-separated CIDRs or single addresses.
fn proxies(raw: &str) -> Result<Vec<IpNet>, ConfigError> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    bad(
                        "AUTH_TRUSTED_PROXIES",
                        format!("{s:?} is not a CIDR or an address"),
                    )
                })
        })
        .collect()
}

/// The whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address (`BIND_ADDR`).
    pub bind_addr: SocketAddr,
    /// The ops listener's address: `/metrics` and the probes (`OPS_BIND_ADDR`).
    pub ops_addr: SocketAddr,
    /// Source of truth (`DATABASE_URL`).
    pub database: Database,
    /// TLS to a MySQL source of truth (`DATABASE_TLS`, `DATABASE_TLS_CA_FILE`).
    pub database_tls: MysqlTls,
    /// Apply migrations at start (`DATABASE_MIGRATE`).
    pub migrate: bool,
    /// Database connections (`DATABASE_POOL_SIZE`).
    pub pool_size: usize,
    /// Admission gate (`GATE`, `REDIS_URL`).
    pub gate: Gate,
    /// Prefix of every Redis key and channel (`REDIS_KEY_PREFIX`).
    pub redis_prefix: String,
    /// The CA a `rediss://` server is verified with (`REDIS_TLS_CA_FILE`); `None`: the system's.
    pub redis_tls_ca_file: Option<std::path::PathBuf>,
    /// The payment provider's signing secret (`PAYMENT_WEBHOOK_SECRET`); `None`: payments are
    /// not configured.
    pub payment_secret: Option<SecretString>,
    /// Concurrent database writes for admitted purchases (`DB_WRITE_PERMITS`).
    pub write_permits: usize,
    /// Wait for a write slot before 429 (`DB_WRITE_WAIT_MS`).
    pub write_wait: Duration,
    /// Concurrent purchase transactions across the whole fleet, shared through Redis
    /// (`DB_WRITE_PERMITS_GLOBAL`); `None`: only the per-instance bound.
    pub write_permits_global: Option<u32>,
    /// Identity (`AUTH_MODE`, `AUTH_JWT_SECRET`).
    pub auth: Auth,
    /// Wait for a pooled database connection before 503 (`DB_ACQUIRE_TIMEOUT_MS`).
    pub acquire_timeout: Duration,
    /// Time limit of one ledger transaction, retries included, before 503
    /// (`DB_TX_TIMEOUT_MS`).
    pub tx_timeout: Duration,
    /// How long an admitted reservation stays in progress before it is resolved against the
    /// database (`RESERVATION_LEASE_MS`).
    pub lease: Duration,
    /// How each drop's admitted purchases are batched into transactions
    /// (`GROUP_COMMIT_MAX_BATCH`, `GROUP_COMMIT_LINGER_MS`).
    pub group_commit: GroupCommit,
    /// Period of the reconciliation and healing pass; `None` disables it
    /// (`RECONCILE_INTERVAL_MS`).
    pub reconcile_interval: Option<Duration>,
    /// How often cached drops are re-read, so a pause, resume or close made through another
    /// instance reaches this one (`DROP_REFRESH_MS`).
    pub drop_refresh: Duration,
    /// OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_endpoint: Option<String>,
    /// OTLP transport (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub otlp_protocol: OtlpProtocol,
    /// Which spans are exported over OTLP (`OTEL_TRACES_FILTER`), apart from the console's
    /// `RUST_LOG`: by default the adapters' debug spans too.
    pub traces_filter: String,
    /// Log filter (`RUST_LOG`).
    pub log_filter: String,
    /// Console log format (`LOG_FORMAT`).
    pub log_format: LogFormat,
    /// HTTP worker threads (`HTTP_WORKERS`, default: one per core).
    pub http_workers: usize,
    /// How long a PENDING order holds its units before it expires (`PAYMENT_WINDOW_S`).
    pub payment_window: PaymentWindow,
}

/// How spans reach the collector (`OTEL_EXPORTER_OTLP_PROTOCOL`, the OpenTelemetry standard
/// variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `grpc` (port 4317 by convention).
    Grpc,
    /// `http/protobuf` (port 4318, path `/v1/traces`).
    HttpProtobuf,
}

/// Console log lines (`LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the span's fields.
    Json,
}

/// The spans exported over OTLP unless `OTEL_TRACES_FILTER` says otherwise: the request, use
/// case, gate and database spans (several at debug level), whatever the console shows.
pub const DEFAULT_TRACES_FILTER: &str = "info,api_actix=debug,goods_app=debug,adapters_sql=debug,adapters_mysql=debug,adapters_sqlite=debug,adapters_redis=debug";

/// A variable with a bad value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {var}: {reason}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// What is wrong.
    pub reason: String,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

/// The longest payment window: a week. Units held longer than that are not a flash sale's.
const MAX_PAYMENT_WINDOW_S: u32 = 7 * 24 * 3600;

/// The largest batch: one INSERT of this many orders stays far below the servers' limits on
/// bound parameters (SQLite: 32,766; MySQL: 65,535).
const MAX_BATCH: usize = 1000;

/// The most batches of one drop in the database at once: more only queue on the drop's row.
const MAX_IN_FLIGHT: usize = 16;

/// The longest linger: a committer waiting longer than this would slow every buyer of a busy
/// drop for little gain.
const MAX_LINGER_MS: u64 = 100;

fn number<T>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
    min: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match get(var) {
        None => Ok(default),
        Some(raw) => match raw.trim().parse::<T>() {
            Ok(v) if v >= min => Ok(v),
            _ => Err(bad(var, format!("{raw:?} is not a whole number >= {min}"))),
        },
    }
}

/// `url` with the password read from `file_var` (a container secret), when that is set; a URL
/// that carries a password of its own and a password file is an error.
fn with_password_file(
    get: &impl Fn(&str) -> Option<String>,
    url_var: &'static str,
    url: String,
    file_var: &'static str,
) -> Result<String, ConfigError> {
    let Some(path) = get(file_var) else {
        return Ok(url);
    };
    let mut parsed = url::Url::parse(&url).map_err(|e| bad(url_var, format!("not a URL: {e}")))?;
    if parsed.password().is_some() {
        return Err(bad(
            file_var,
            format!("{url_var} has a password of its own: set one or the other"),
        ));
    }
    let password = std::fs::read_to_string(&path)
        .map_err(|e| bad(file_var, format!("cannot read {path}: {e}")))?;
    parsed
        .set_password(Some(password.trim_end_matches(['\n', '\r'])))
        .map_err(|()| bad(url_var, "cannot carry a password (no host)"))?;
    Ok(parsed.into())
}

fn database(get: &impl Fn(&str) -> Option<String>) -> Result<Database, ConfigError> {
    let url = get("DATABASE_URL").unwrap_or_else(|| "sqlite://data/goods.db".into());
    let database = if url.starts_with("mysql://") {
        Database::Mysql(
            with_password_file(get, "DATABASE_URL", url, "DATABASE_PASSWORD_FILE")?.into(),
        )
    } else if get("DATABASE_PASSWORD_FILE").is_some() {
        return Err(bad(
            "DATABASE_PASSWORD_FILE",
            "applies to a mysql:// DATABASE_URL only",
        ));
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        if path.is_empty() {
            return Err(bad("DATABASE_URL", "sqlite:// needs a file path"));
        }
        Database::Sqlite(url)
    } else {
        return Err(bad("DATABASE_URL", "must start with mysql:// or sqlite://"));
    };
    Ok(database)
}

/// `DATABASE_TLS` and `DATABASE_TLS_CA_FILE`, for a MySQL `database`.
fn database_tls(
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
        std::fs::metadata(ca).map_err(|e| {
            bad(
                "DATABASE_TLS_CA_FILE",
                format!("cannot read {}: {e}", ca.display()),
            )
        })?;
    }
    Ok(MysqlTls { mode, ca_file })
}

fn log_format(get: &impl Fn(&str) -> Option<String>) -> Result<LogFormat, ConfigError> {
    match get("LOG_FORMAT").as_deref() {
        None | Some("text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(other) => Err(bad("LOG_FORMAT", format!("{other:?} is not text or json"))),
    }
}

/// `PAYMENT_WEBHOOK_SECRET` (or `_FILE`), checked for strength; `None` when unset.
///
/// # Errors
/// [`ConfigError`] when it is unreadable or too weak.
pub fn payment_secret(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<SecretString>, ConfigError> {
    let secret = secret::read(get, "PAYMENT_WEBHOOK_SECRET", "PAYMENT_WEBHOOK_SECRET_FILE")?;
    if let Some(secret) = &secret {
        secret::check_strength("PAYMENT_WEBHOOK_SECRET", secret.expose_secret())?;
    }
    Ok(secret)
}

/// What `goods-server migrate` reads: the database and the console logs, nothing else (the
/// migration job of a fleet has no identity or gate settings to give).
#[derive(Debug, Clone)]
pub struct MigrateConfig {
    /// The database to migrate (`DATABASE_URL`).
    pub database: Database,
    /// TLS to it (`DATABASE_TLS`, `DATABASE_TLS_CA_FILE`).
    pub database_tls: MysqlTls,
    /// Log filter (`RUST_LOG`).
    pub log_filter: String,
    /// Console log format (`LOG_FORMAT`).
    pub log_format: LogFormat,
}

impl MigrateConfig {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable with a bad value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads configuration through `get` (tests pass a map).
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable with a bad value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let database = database(&get)?;
        Ok(Self {
            database_tls: database_tls(&get, &database)?,
            database,
            log_filter: get("RUST_LOG").unwrap_or_else(|| "info".into()),
            log_format: log_format(&get)?,
        })
    }
}

impl Config {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable with a bad value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads configuration through `get` (tests pass a map).
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable with a bad value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let bind_addr: SocketAddr = get("BIND_ADDR")
            .unwrap_or_else(|| "127.0.0.1:8080".into())
            .parse()
            .map_err(|e| bad("BIND_ADDR", format!("not a socket address: {e}")))?;
        let ops_addr: SocketAddr = get("OPS_BIND_ADDR")
            .unwrap_or_else(|| "127.0.0.1:9464".into())
            .parse()
            .map_err(|e| bad("OPS_BIND_ADDR", format!("not a socket address: {e}")))?;
        if ops_addr == bind_addr && ops_addr.port() != 0 {
            return Err(bad("OPS_BIND_ADDR", "must differ from BIND_ADDR"));
        }
        let database = database(&get)?;
        let database_tls = database_tls(&get, &database)?;
        // Embedded: the one instance migrates its file at start. MySQL: a fleet migrates once,
        // with `goods-server migrate`, before the new code rolls out (docs/migrations.md).
        let migrate = match get("DATABASE_MIGRATE").as_deref() {
            None => matches!(database, Database::Sqlite(_)),
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(bad(
                    "DATABASE_MIGRATE",
                    format!("{other:?} is not true or false"),
                ));
            }
        };
        let pool_size = number(&get, "DATABASE_POOL_SIZE", 16_usize, 1)?;
        let redis = get("REDIS_URL")
            .map(|url| with_password_file(&get, "REDIS_URL", url, "REDIS_PASSWORD_FILE"))
            .transpose()?;
        let gate = match (get("GATE").as_deref(), redis) {
            (Some("redis") | None, Some(url)) => {
                // fred's forms: one server, or a cluster named by its seed nodes
                // (`redis-cluster://host:port?node=host:port&node=host:port`).
                if ![
                    "redis://",
                    "rediss://",
                    "redis-cluster://",
                    "rediss-cluster://",
                ]
                .iter()
                .any(|scheme| url.starts_with(scheme))
                {
                    return Err(bad(
                        "REDIS_URL",
                        "must start with redis://, rediss://, redis-cluster:// or rediss-cluster://",
                    ));
                }
                Gate::Redis(url.into())
            }
            (Some("redis"), None) => return Err(bad("GATE", "redis needs REDIS_URL")),
            (Some("memory") | None, _) => Gate::Memory,
            (Some("off"), _) => Gate::Off,
            (Some(other), _) => {
                return Err(bad(
                    "GATE",
                    format!("{other:?} is not redis, memory or off"),
                ));
            }
        };
        let redis_tls_ca_file = get("REDIS_TLS_CA_FILE").map(std::path::PathBuf::from);
        if let Some(ca) = &redis_tls_ca_file {
            let tls =
                matches!(&gate, Gate::Redis(url) if url.expose_secret().starts_with("rediss"));
            if !tls {
                return Err(bad(
                    "REDIS_TLS_CA_FILE",
                    "needs a rediss:// (or rediss-cluster://) REDIS_URL",
                ));
            }
            std::fs::metadata(ca).map_err(|e| {
                bad(
                    "REDIS_TLS_CA_FILE",
                    format!("cannot read {}: {e}", ca.display()),
                )
            })?;
        }
        let redis_prefix = get("REDIS_KEY_PREFIX").unwrap_or_else(|| "goods:".into());
        if redis_prefix.contains(['{', '}', ' ']) {
            return Err(bad("REDIS_KEY_PREFIX", "must not contain braces or spaces"));
        }
        let max_batch = number(&get, "GROUP_COMMIT_MAX_BATCH", 64_usize, 1)?;
        if max_batch > MAX_BATCH {
            return Err(bad(
                "GROUP_COMMIT_MAX_BATCH",
                format!("{max_batch} is over {MAX_BATCH}"),
            ));
        }
        let linger = number(&get, "GROUP_COMMIT_LINGER_MS", 0_u64, 0)?;
        if linger > MAX_LINGER_MS {
            return Err(bad(
                "GROUP_COMMIT_LINGER_MS",
                format!("{linger} is over {MAX_LINGER_MS}"),
            ));
        }
        let in_flight = number(&get, "GROUP_COMMIT_IN_FLIGHT", 1_usize, 1)?;
        if in_flight > MAX_IN_FLIGHT {
            return Err(bad(
                "GROUP_COMMIT_IN_FLIGHT",
                format!("{in_flight} is over {MAX_IN_FLIGHT}"),
            ));
        }
        let group_commit = GroupCommit {
            max_batch,
            linger: Duration::from_millis(linger),
            in_flight,
        };
        // A write slot is one purchase waiting for its drop's committer; the pool's connections
        // carry full batches, so the default lets that many purchases wait.
        let write_permits = number(
            &get,
            "DB_WRITE_PERMITS",
            pool_size.saturating_mul(group_commit.max_batch),
            1,
        )?;
        let write_wait = Duration::from_millis(number(&get, "DB_WRITE_WAIT_MS", 2000_u64, 0)?);
        let write_permits_global = match get("DB_WRITE_PERMITS_GLOBAL") {
            None => None,
            Some(_) if !matches!(gate, Gate::Redis(_)) => {
                return Err(bad(
                    "DB_WRITE_PERMITS_GLOBAL",
                    "the fleet's budget is kept in Redis: it needs GATE=redis and REDIS_URL",
                ));
            }
            Some(_) => Some(number(&get, "DB_WRITE_PERMITS_GLOBAL", 1_u32, 1)?),
        };
        let loopback = bind_addr.ip().is_loopback();
        let embedded = loopback && matches!(database, Database::Sqlite(_));
        let trusted_header = || match get("AUTH_TRUSTED_PROXIES") {
            Some(raw) => Ok(Auth::TrustedHeader {
                proxies: proxies(&raw)?,
            }),
            None if loopback => Ok(Auth::TrustedHeader {
                proxies: loopback_nets(),
            }),
            None => Err(bad(
                "AUTH_TRUSTED_PROXIES",
                "required with AUTH_MODE=trusted-header when BIND_ADDR is not loopback",
            )),
        };
        let jwt_secret = secret::read(&get, "AUTH_JWT_SECRET", "AUTH_JWT_SECRET_FILE")?;
        let auth = match get("AUTH_MODE").as_deref() {
            Some("jwt") => match jwt_secret {
                Some(secret) => {
                    secret::check_strength("AUTH_JWT_SECRET", secret.expose_secret())?;
                    Auth::Jwt {
                        secret,
                        issuer: get("AUTH_JWT_ISSUER"),
                        audience: get("AUTH_JWT_AUDIENCE"),
                    }
                }
                None => return Err(bad("AUTH_JWT_SECRET", "required when AUTH_MODE=jwt")),
            },
            Some("trusted-header") => trusted_header()?,
            // Trusting headers by default is only safe where nothing but this machine can call.
            None if embedded => trusted_header()?,
            None => {
                return Err(bad(
                    "AUTH_MODE",
                    "required outside the embedded mode (SQLite on a loopback BIND_ADDR): choose jwt or trusted-header",
                ));
            }
            Some(other) => {
                return Err(bad(
                    "AUTH_MODE",
                    format!("{other:?} is not jwt or trusted-header"),
                ));
            }
        };
        let payment_secret = payment_secret(&get)?;
        let interval = number(&get, "RECONCILE_INTERVAL_MS", 5000_u64, 0)?;
        let drop_refresh = Duration::from_millis(number(&get, "DROP_REFRESH_MS", 500_u64, 10)?);
        let acquire_timeout =
            Duration::from_millis(number(&get, "DB_ACQUIRE_TIMEOUT_MS", 1000_u64, 1)?);
        let tx_timeout = Duration::from_millis(number(&get, "DB_TX_TIMEOUT_MS", 3000_u64, 1)?);
        // The longest an admitted purchase can take before it commits or gives up.
        let longest = write_wait + acquire_timeout + tx_timeout;
        let default_lease = longest + Duration::from_secs(2);
        let lease = Duration::from_millis(number(
            &get,
            "RESERVATION_LEASE_MS",
            u64::try_from(default_lease.as_millis()).unwrap_or(u64::MAX),
            1,
        )?);
        if lease <= longest {
            return Err(bad(
                "RESERVATION_LEASE_MS",
                format!(
                    "must exceed DB_WRITE_WAIT_MS + DB_ACQUIRE_TIMEOUT_MS + DB_TX_TIMEOUT_MS ({} ms)",
                    longest.as_millis()
                ),
            ));
        }
        let payment_window = number(&get, "PAYMENT_WINDOW_S", 600_u32, 1)?;
        if payment_window > MAX_PAYMENT_WINDOW_S {
            return Err(bad(
                "PAYMENT_WINDOW_S",
                format!("{payment_window} is over {MAX_PAYMENT_WINDOW_S} (7 days)"),
            ));
        }
        let http_workers = number(
            &get,
            "HTTP_WORKERS",
            std::thread::available_parallelism().map_or(2, usize::from),
            1,
        )?;
        Ok(Self {
            bind_addr,
            ops_addr,
            database,
            database_tls,
            migrate,
            pool_size,
            gate,
            redis_prefix,
            redis_tls_ca_file,
            payment_secret,
            write_permits,
            write_wait,
            write_permits_global,
            auth,
            acquire_timeout,
            tx_timeout,
            lease,
            group_commit,
            reconcile_interval: (interval > 0).then(|| Duration::from_millis(interval)),
            drop_refresh,
            otlp_endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            otlp_protocol: match get("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
                None | Some("grpc") => OtlpProtocol::Grpc,
                Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
                Some(other) => {
                    return Err(bad(
                        "OTEL_EXPORTER_OTLP_PROTOCOL",
                        format!("{other:?} is not grpc or http/protobuf"),
                    ));
                }
            },
            traces_filter: get("OTEL_TRACES_FILTER")
                .unwrap_or_else(|| DEFAULT_TRACES_FILTER.to_owned()),
            log_format: log_format(&get)?,
            log_filter: get("RUST_LOG").unwrap_or_else(|| "info".into()),
            http_workers,
            payment_window: PaymentWindow::seconds(payment_window),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn no_variables_at_all_is_the_embedded_default() {
        let c = config(&[]).unwrap();
        assert_eq!(c.bind_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(
            c.database,
            Database::Sqlite("sqlite://data/goods.db".into())
        );
        assert_eq!(c.gate, Gate::Memory);
        assert!(
            matches!(&c.auth, Auth::TrustedHeader { proxies } if *proxies == loopback_nets()),
            "{:?}",
            c.auth
        );
        assert_eq!((c.pool_size, c.write_permits), (16, 16 * 64));
        assert_eq!(c.write_wait, Duration::from_millis(2000));
        assert_eq!(c.reconcile_interval, Some(Duration::from_millis(5000)));
        assert_eq!(c.drop_refresh, Duration::from_millis(500));
        assert_eq!(
            (c.acquire_timeout, c.tx_timeout, c.lease),
            (
                Duration::from_millis(1000),
                Duration::from_millis(3000),
                Duration::from_millis(8000)
            )
        );
        assert!(c.migrate, "the embedded file migrates at start");
        let mysql = config(&[
            ("DATABASE_URL", "mysql://u@db:3306/goods"),
            ("AUTH_MODE", "trusted-header"),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !mysql.migrate,
            "a MySQL fleet migrates with `goods-server migrate`"
        );
        assert_eq!(
            c.group_commit,
            GroupCommit {
                max_batch: 64,
                linger: Duration::ZERO,
                in_flight: 1,
            }
        );
    }

    #[test]
    fn telemetry_settings_follow_the_standard_variables() {
        let c = config(&[]).unwrap();
        assert_eq!(
            (c.otlp_protocol, c.log_format, c.traces_filter.as_str()),
            (OtlpProtocol::Grpc, LogFormat::Text, DEFAULT_TRACES_FILTER)
        );
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("LOG_FORMAT", "json"),
            ("OTEL_TRACES_FILTER", "warn"),
        ])
        .unwrap();
        assert_eq!(
            (c.otlp_protocol, c.log_format, c.traces_filter.as_str()),
            (OtlpProtocol::HttpProtobuf, LogFormat::Json, "warn")
        );
    }

    #[test]
    fn group_commit_is_configurable() {
        let c = config(&[
            ("GROUP_COMMIT_MAX_BATCH", "1"),
            ("GROUP_COMMIT_LINGER_MS", "2"),
            ("GROUP_COMMIT_IN_FLIGHT", "4"),
        ])
        .unwrap();
        assert_eq!(
            c.group_commit,
            GroupCommit {
                max_batch: 1,
                linger: Duration::from_millis(2),
                in_flight: 4,
            }
        );
    }

    #[test]
    fn a_redis_url_selects_the_redis_gate_unless_another_is_named() {
        assert_eq!(
            config(&[("REDIS_URL", "redis://127.0.0.1:6379/0")])
                .unwrap()
                .gate,
            Gate::Redis(SecretString::from("redis://127.0.0.1:6379/0"))
        );
        assert_eq!(
            config(&[("REDIS_URL", "redis://x"), ("GATE", "off")])
                .unwrap()
                .gate,
            Gate::Off
        );
        assert_eq!(
            config(&[("REDIS_URL", "redis://x"), ("DB_WRITE_PERMITS_GLOBAL", "8")])
                .unwrap()
                .write_permits_global,
            Some(8)
        );
        assert_eq!(
            config(&[("DB_WRITE_PERMITS_GLOBAL", "8")]).unwrap_err().var,
            "DB_WRITE_PERMITS_GLOBAL",
            "the budget lives in Redis"
        );
        let cluster = "redis-cluster://10.0.0.1:7000?node=10.0.0.2:7000&node=10.0.0.3:7000";
        assert_eq!(
            config(&[("REDIS_URL", cluster)]).unwrap().gate,
            Gate::Redis(SecretString::from(cluster))
        );
    }

    #[test]
    fn write_permits_default_to_full_batches_on_every_pooled_connection() {
        let permits = |vars: &[(&str, &str)]| config(vars).unwrap().write_permits;
        assert_eq!(permits(&[("DATABASE_POOL_SIZE", "8")]), 8 * 64);
        assert_eq!(
            permits(&[("DATABASE_POOL_SIZE", "8"), ("GROUP_COMMIT_MAX_BATCH", "1")]),
            8
        );
        assert_eq!(permits(&[("DB_WRITE_PERMITS", "3")]), 3);
    }

    #[test]
    fn production_settings_choose_identity_explicitly_and_keep_secrets_out_of_debug() {
        let c = config(&[
            ("DATABASE_URL", "mysql://goods:hunter2@db:3306/goods"),
            ("REDIS_URL", "redis://:hunter3@cache:6379"),
            ("AUTH_MODE", "jwt"),
            ("AUTH_JWT_SECRET", "s3cr3t9Vq3xT7mK2pL8nR4cW6yB1fH5jD0gZ"),
            ("AUTH_JWT_ISSUER", "https://id.example"),
        ])
        .unwrap();
        assert!(
            matches!(&c.auth, Auth::Jwt { issuer: Some(i), audience: None, .. } if i == "https://id.example")
        );
        let printed = format!("{c:?}");
        for secret in ["hunter2", "hunter3", "s3cr3t"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        let c = config(&[
            ("BIND_ADDR", "0.0.0.0:8080"),
            ("AUTH_MODE", "trusted-header"),
            ("AUTH_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.7"),
        ])
        .unwrap();
        assert!(matches!(&c.auth, Auth::TrustedHeader { proxies } if proxies.len() == 2));
    }

    #[test]
    fn a_public_bind_address_requires_an_auth_mode() {
        assert_eq!(
            config(&[("BIND_ADDR", "0.0.0.0:8080")]).unwrap_err().var,
            "AUTH_MODE"
        );
    }

    #[test]
    fn zero_disables_reconciliation() {
        assert_eq!(
            config(&[("RECONCILE_INTERVAL_MS", "0")])
                .unwrap()
                .reconcile_interval,
            None
        );
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("BIND_ADDR", "nope")], "BIND_ADDR"),
            (&[("DATABASE_URL", "postgres://x")], "DATABASE_URL"),
            (&[("DATABASE_URL", "sqlite://")], "DATABASE_URL"),
            (&[("DATABASE_MIGRATE", "yes")], "DATABASE_MIGRATE"),
            (&[("DATABASE_POOL_SIZE", "0")], "DATABASE_POOL_SIZE"),
            (&[("GATE", "redis")], "GATE"),
            (&[("GATE", "fast")], "GATE"),
            (&[("REDIS_URL", "localhost:6379")], "REDIS_URL"),
            (&[("REDIS_KEY_PREFIX", "a{b}")], "REDIS_KEY_PREFIX"),
            (&[("DB_WRITE_PERMITS", "-1")], "DB_WRITE_PERMITS"),
            (&[("DB_WRITE_WAIT_MS", "soon")], "DB_WRITE_WAIT_MS"),
            (&[("GROUP_COMMIT_MAX_BATCH", "0")], "GROUP_COMMIT_MAX_BATCH"),
            (
                &[("GROUP_COMMIT_MAX_BATCH", "1001")],
                "GROUP_COMMIT_MAX_BATCH",
            ),
            (
                &[("GROUP_COMMIT_LINGER_MS", "101")],
                "GROUP_COMMIT_LINGER_MS",
            ),
            (
                &[("GROUP_COMMIT_LINGER_MS", "-1")],
                "GROUP_COMMIT_LINGER_MS",
            ),
            (&[("AUTH_MODE", "jwt")], "AUTH_JWT_SECRET"),
            (
                &[("AUTH_MODE", "jwt"), ("AUTH_JWT_SECRET", "short")],
                "AUTH_JWT_SECRET",
            ),
            (
                &[
                    ("AUTH_MODE", "jwt"),
                    ("AUTH_JWT_SECRET", "0123456789abcdef0123456789abcde"),
                ],
                "AUTH_JWT_SECRET",
            ),
            (
                &[
                    ("AUTH_MODE", "jwt"),
                    ("AUTH_JWT_SECRET", "CHANGE-ME-to-at-least-32-random-bytes"),
                ],
                "AUTH_JWT_SECRET",
            ),
            (
                &[("DATABASE_URL", "mysql://root@db:3306/goods")],
                "AUTH_MODE",
            ),
            (
                &[
                    ("BIND_ADDR", "0.0.0.0:8080"),
                    ("AUTH_MODE", "trusted-header"),
                ],
                "AUTH_TRUSTED_PROXIES",
            ),
            (
                &[
                    ("AUTH_MODE", "trusted-header"),
                    ("AUTH_TRUSTED_PROXIES", "10.0.0.0/33"),
                ],
                "AUTH_TRUSTED_PROXIES",
            ),
            (&[("AUTH_MODE", "basic")], "AUTH_MODE"),
            (&[("RECONCILE_INTERVAL_MS", "1.5")], "RECONCILE_INTERVAL_MS"),
            (&[("DROP_REFRESH_MS", "0")], "DROP_REFRESH_MS"),
            (&[("DB_ACQUIRE_TIMEOUT_MS", "0")], "DB_ACQUIRE_TIMEOUT_MS"),
            (&[("DB_TX_TIMEOUT_MS", "x")], "DB_TX_TIMEOUT_MS"),
            (&[("RESERVATION_LEASE_MS", "6000")], "RESERVATION_LEASE_MS"),
        ];
        for (vars, var) in cases {
            let err = config(vars).unwrap_err();
            assert_eq!(err.var, *var, "{vars:?}");
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid configuration: {var}:"))
            );
        }
    }
}
