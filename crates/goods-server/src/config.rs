//! Configuration from the environment (docs/configuration.md), validated at start (a bad value
//! stops the server with one line naming it), one section per concern.

mod abuse;
mod auth;
mod database;
mod draws;
mod events;
mod observability;
mod purchases;
mod redis;
mod secret;
mod webhooks;

pub use auth::{Auth, payment_secret};
pub use database::{Database, DatabaseConfig, MysqlTls, TlsMode};
pub use events::{Broker, EventsConfig};
pub use observability::{DEFAULT_TRACES_FILTER, LogFormat, Observability, OtlpProtocol};
pub use purchases::Purchases;
pub use redis::{Gate, GateKind, RedisConfig};
use secrecy::SecretString;
use std::net::SocketAddr;
use std::time::Duration;

/// The whole configuration, by section.
#[derive(Debug, Clone)]
pub struct Config {
    /// The listeners and their shutdown.
    pub http: Http,
    pub database: DatabaseConfig,
    /// Redis, when `REDIS_URL` is set: shared by the fleet whichever gate is chosen.
    pub redis: Option<RedisConfig>,
    /// The admission gate (`GATE`).
    pub gate: Gate,
    /// The write buffer, group commit, fleet budget, lease and payment window.
    pub purchases: Purchases,
    /// Identity (`AUTH_*`).
    pub auth: Auth,
    /// Rate limits (`RATE_LIMIT_*`) and who may name the client.
    pub abuse: abuse::Abuse,
    /// The payment provider's signing secret (`PAYMENT_WEBHOOK_SECRET`); `None`: payments are
    /// not configured.
    pub payment_secret: Option<SecretString>,
    /// The healing pass and the cache refresh.
    pub background: Background,
    /// The seal key of draw seeds (`DRAW_SEAL_KEY`).
    pub draw_seal: draws::DrawSeal,
    pub observability: Observability,
    /// Where events are published, and how long they are kept.
    pub events: EventsConfig,
    /// The flags a database that never had them starts with (`FLAGS_AT_FIRST_START`): `off`
    /// ships the release dark until an admin turns `limited-drop.enabled` on.
    pub flags_at_first_start: bool,
    /// Sellers' webhooks (`WEBHOOK_*`).
    pub webhooks: webhooks::Webhooks,
}

#[derive(Debug, Clone)]
pub struct Http {
    /// The API (`BIND_ADDR`).
    pub bind_addr: SocketAddr,
    /// `/metrics` and the probes (`OPS_BIND_ADDR`).
    pub ops_addr: SocketAddr,
    /// Worker threads (`HTTP_WORKERS`, default: one per core).
    pub workers: usize,
    /// From SIGTERM to exit at most (`SHUTDOWN_GRACE_MS`): in-flight requests are answered
    /// first, then the committers, background work, counters and traces are flushed.
    pub shutdown_grace: Duration,
}

/// Work each instance does on its own clock.
#[derive(Debug, Clone)]
pub struct Background {
    /// Period of the reconciliation and healing pass; `None` disables it
    /// (`RECONCILE_INTERVAL_MS`).
    pub reconcile_interval: Option<Duration>,
    /// How often cached drops and flags are re-read, so a change made through another
    /// instance reaches this one (`DROP_REFRESH_MS`).
    pub drop_refresh: Duration,
}

/// A variable with a bad value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {var}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub reason: String,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

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

/// Refuses `var` when the binary was built without the cargo `feature` it needs (an
/// embedded-only build, `--no-default-features`), rather than failing at first use.
fn needs_feature(var: &'static str, feature: &str, built_with: bool) -> Result<(), ConfigError> {
    if built_with {
        Ok(())
    } else {
        Err(bad(
            var,
            format!(
                "this goods-server was built without the `{feature}` feature; build it with the \
                 default features (cargo build -p goods-server --release)"
            ),
        ))
    }
}

/// A file named by `var` that must be readable at start, not at the first connection.
fn readable(var: &'static str, path: &std::path::Path) -> Result<(), ConfigError> {
    std::fs::metadata(path)
        .map(drop)
        .map_err(|e| bad(var, format!("cannot read {}: {e}", path.display())))
}

fn address(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: &str,
) -> Result<SocketAddr, ConfigError> {
    get(var)
        .unwrap_or_else(|| default.into())
        .parse()
        .map_err(|e| bad(var, format!("not a socket address: {e}")))
}

impl Http {
    fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let bind_addr = address(get, "BIND_ADDR", "127.0.0.1:8080")?;
        let ops_addr = address(get, "OPS_BIND_ADDR", "127.0.0.1:9464")?;
        if ops_addr == bind_addr && ops_addr.port() != 0 {
            return Err(bad("OPS_BIND_ADDR", "must differ from BIND_ADDR"));
        }
        Ok(Self {
            bind_addr,
            ops_addr,
            workers: number(
                get,
                "HTTP_WORKERS",
                std::thread::available_parallelism().map_or(2, usize::from),
                1,
            )?,
            shutdown_grace: Duration::from_millis(number(get, "SHUTDOWN_GRACE_MS", 10_000_u64, 1)?),
        })
    }
}

impl Background {
    fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let interval = number(get, "RECONCILE_INTERVAL_MS", 5000_u64, 0)?;
        Ok(Self {
            reconcile_interval: (interval > 0).then(|| Duration::from_millis(interval)),
            drop_refresh: Duration::from_millis(number(get, "DROP_REFRESH_MS", 500_u64, 10)?),
        })
    }
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
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads configuration through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let database = database::source(&get)?;
        Ok(Self {
            database_tls: database::tls(&get, &database)?,
            database,
            log_filter: get("RUST_LOG").unwrap_or_else(|| "info".into()),
            log_format: observability::log_format(&get)?,
        })
    }
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// The embedded mode: SQLite on a loopback `BIND_ADDR`.
    pub fn embedded(&self) -> bool {
        self.http.bind_addr.ip().is_loopback()
            && matches!(self.database.source, Database::Sqlite(_))
    }

    /// Reads configuration through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let http = Http::read(&get)?;
        let database = DatabaseConfig::read(&get)?;
        let redis = RedisConfig::read(&get)?;
        let gate = Gate::read(&get, redis.as_ref())?;
        let purchases = Purchases::read(&get, &database, redis.is_some())?;
        let loopback = http.bind_addr.ip().is_loopback();
        let embedded = loopback && matches!(database.source, Database::Sqlite(_));
        let embedded_db = match (&database.source, embedded) {
            (Database::Sqlite(url), true) => Some(url.as_str()),
            _ => None,
        };
        let draw_seal = draws::DrawSeal::read(&get, embedded_db)?;
        let auth = Auth::read(&get, loopback, embedded)?;
        Ok(Self {
            draw_seal,
            abuse: abuse::Abuse::read(&get, &auth)?,
            auth,
            payment_secret: payment_secret(&get)?,
            background: Background::read(&get)?,
            observability: Observability::read(&get)?,
            events: EventsConfig::read(&get)?,
            webhooks: webhooks::Webhooks::read(&get)?,
            flags_at_first_start: match get("FLAGS_AT_FIRST_START").as_deref() {
                None | Some("on") => true,
                Some("off") => false,
                Some(_) => return Err(bad("FLAGS_AT_FIRST_START", "must be on or off")),
            },
            http,
            database,
            redis,
            gate,
            purchases,
        })
    }
}

/// What a binary built without a client refuses (`--no-default-features`); CI runs this in
/// both builds, so both answers below are checked.
#[cfg(test)]
mod features {
    use super::*;

    #[test]
    fn a_setting_whose_client_is_not_built_in_is_refused_naming_its_feature() {
        let cases = [
            (
                "DATABASE_URL",
                "mysql://root@db:3306/goods",
                "mysql",
                cfg!(feature = "mysql"),
            ),
            (
                "REDIS_URL",
                "redis://cache:6379",
                "redis",
                cfg!(feature = "redis"),
            ),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://collector:4317",
                "otlp",
                cfg!(feature = "otlp"),
            ),
            (
                "EVENTS_URL",
                "nats://broker:4222",
                "nats",
                cfg!(feature = "nats"),
            ),
        ];
        for (var, value, feature, built) in cases {
            // Trusted-header identity, so a production URL is accepted where it is built in.
            let vars = [(var, value), ("AUTH_MODE", "trusted-header")];
            let read = Config::from_lookup(|name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            });
            match read {
                Ok(_) => assert!(built, "{var} accepted without the {feature} feature"),
                Err(e) => {
                    assert!(!built, "{var} refused with the {feature} feature: {e}");
                    assert_eq!(e.var, var);
                    assert!(e.reason.contains(&format!("`{feature}` feature")), "{e}");
                }
            }
        }
    }
}

// These read the production settings, so they need every client built in.
#[cfg(all(
    test,
    feature = "mysql",
    feature = "redis",
    feature = "otlp",
    feature = "nats"
))]
mod tests {
    use super::*;
    use goods_app::GroupCommit;
    use secrecy::ExposeSecret as _;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn flags_start_on_unless_shipped_dark() {
        assert!(config(&[]).unwrap().flags_at_first_start);
        assert!(
            !config(&[("FLAGS_AT_FIRST_START", "off")])
                .unwrap()
                .flags_at_first_start
        );
        assert_eq!(
            config(&[("FLAGS_AT_FIRST_START", "false")])
                .unwrap_err()
                .var,
            "FLAGS_AT_FIRST_START"
        );
    }

    #[test]
    fn no_variables_at_all_is_the_embedded_default() {
        let c = config(&[]).unwrap();
        assert_eq!(c.http.bind_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(
            c.database.source,
            Database::Sqlite("sqlite://data/goods.db".into())
        );
        assert!(c.redis.is_none());
        assert_eq!(c.gate, Gate::Memory);
        assert!(
            matches!(&c.auth, Auth::TrustedHeader { proxies } if *proxies == auth::loopback_nets()),
            "{:?}",
            c.auth
        );
        assert_eq!(
            (c.database.pool_size, c.purchases.write_permits),
            (16, 16 * 64)
        );
        assert_eq!(c.purchases.write_wait, Duration::from_millis(2000));
        assert_eq!(
            c.background.reconcile_interval,
            Some(Duration::from_millis(5000))
        );
        assert_eq!(c.background.drop_refresh, Duration::from_millis(500));
        assert_eq!(
            (
                c.database.acquire_timeout,
                c.database.tx_timeout,
                c.purchases.lease
            ),
            (
                Duration::from_millis(1000),
                Duration::from_millis(3000),
                Duration::from_millis(8000)
            )
        );
        assert!(c.database.migrate, "the embedded file migrates at start");
        let mysql = config(&[
            ("DATABASE_URL", "mysql://u@db:3306/goods"),
            ("AUTH_MODE", "trusted-header"),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !mysql.database.migrate,
            "a MySQL fleet migrates with `goods-server migrate`"
        );
        assert_eq!(
            c.purchases.group_commit,
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
            (
                c.observability.otlp_protocol,
                c.observability.log_format,
                c.observability.traces_filter.as_str()
            ),
            (OtlpProtocol::Grpc, LogFormat::Text, DEFAULT_TRACES_FILTER)
        );
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("LOG_FORMAT", "json"),
            ("OTEL_TRACES_FILTER", "warn"),
        ])
        .unwrap();
        assert_eq!(
            (
                c.observability.otlp_protocol,
                c.observability.log_format,
                c.observability.traces_filter.as_str()
            ),
            (OtlpProtocol::HttpProtobuf, LogFormat::Json, "warn")
        );
    }

    #[test]
    fn a_tls_parameter_in_database_url_is_refused_not_ignored() {
        for url in [
            "mysql://goods@db:3306/goods?require_ssl=true",
            "mysql://goods@db:3306/goods?ssl-mode=REQUIRED",
            "mysql://goods@db:3306/goods?sslmode=verify-full",
            "mysql://goods@db:3306/goods?prefer_socket=false&ssl_ca=/ca.pem",
            "mysql://goods@db:3306/goods?verify_identity=false",
            "mysql://goods@db:3306/goods?built_in_roots=false",
            "mysql://goods@db:3306/goods?TLS=true",
        ] {
            let err = config(&[("DATABASE_URL", url)]).unwrap_err();
            assert_eq!(err.var, "DATABASE_URL", "{url}");
            assert!(err.reason.contains("DATABASE_TLS"), "{url}: {err}");
        }
        // Other parameters are the driver's.
        let driver_parameter = config(&[
            (
                "DATABASE_URL",
                "mysql://goods@db:3306/goods?prefer_socket=false",
            ),
            ("AUTH_MODE", "trusted-header"),
        ]);
        assert!(driver_parameter.is_ok(), "{driver_parameter:?}");
    }

    #[test]
    fn several_hosts_in_database_url_keep_their_order_and_take_the_password_file() {
        let dir = std::env::temp_dir().join(format!("goods-db-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "s3cret\n").unwrap();
        let read = config(&[
            (
                "DATABASE_URL",
                "mysql://goods@n1:3306,n2:3307,n3:3308/goods?prefer_socket=false",
            ),
            ("DATABASE_PASSWORD_FILE", file.to_str().unwrap()),
            ("AUTH_MODE", "trusted-header"),
        ])
        .unwrap();
        let Database::Mysql(url) = &read.database.source else {
            panic!("{:?}", read.database.source);
        };
        assert_eq!(
            url.expose_secret(),
            "mysql://goods:s3cret@n1:3306,n2:3307,n3:3308/goods?prefer_socket=false"
        );
        for (url, names) in [
            (
                "mysql://goods@n1:3306,n2:3306/goods?sslmode=require",
                "DATABASE_TLS",
            ),
            ("mysql://goods@n1:3306,,n2:3306/goods", "empty host"),
        ] {
            let err = config(&[("DATABASE_URL", url)]).unwrap_err();
            assert_eq!(err.var, "DATABASE_URL", "{url}");
            assert!(err.reason.contains(names), "{url}: {err}");
        }
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
            c.purchases.group_commit,
            GroupCommit {
                max_batch: 1,
                linger: Duration::from_millis(2),
                in_flight: 4,
            }
        );
    }

    #[test]
    fn a_redis_url_selects_the_redis_gate_unless_another_is_named() {
        let c = config(&[("REDIS_URL", "redis://127.0.0.1:6379/0")]).unwrap();
        assert_eq!((c.gate, c.gate.kind()), (Gate::Redis, GateKind::Shared));
        let redis = c.redis.unwrap();
        assert_eq!(
            (redis.url.expose_secret(), redis.prefix.as_str()),
            ("redis://127.0.0.1:6379/0", "goods:")
        );
        // Redis stays configured for the fleet's notices and budget whatever the gate.
        let c = config(&[("REDIS_URL", "redis://x"), ("GATE", "off")]).unwrap();
        assert_eq!((c.gate, c.gate.kind()), (Gate::Off, GateKind::Shared));
        assert!(c.redis.is_some());
        let c = config(&[("REDIS_URL", "redis://x"), ("GATE", "memory")]).unwrap();
        assert_eq!((c.gate, c.gate.kind()), (Gate::Memory, GateKind::Local));
        assert_eq!(
            config(&[("REDIS_URL", "redis://x"), ("DB_WRITE_PERMITS_GLOBAL", "8")])
                .unwrap()
                .purchases
                .write_permits_global,
            Some(8)
        );
        assert_eq!(
            config(&[
                ("REDIS_URL", "redis://x"),
                ("GATE", "off"),
                ("DB_WRITE_PERMITS_GLOBAL", "8")
            ])
            .unwrap()
            .purchases
            .write_permits_global,
            Some(8),
            "the budget needs Redis, not the Redis gate"
        );
        assert_eq!(
            config(&[("DB_WRITE_PERMITS_GLOBAL", "8")]).unwrap_err().var,
            "DB_WRITE_PERMITS_GLOBAL",
            "the budget lives in Redis"
        );
        let cluster = "redis-cluster://10.0.0.1:7000?node=10.0.0.2:7000&node=10.0.0.3:7000";
        let c = config(&[("REDIS_URL", cluster)]).unwrap();
        assert_eq!(c.gate, Gate::Redis);
        assert_eq!(c.redis.unwrap().url.expose_secret(), cluster);
    }

    #[test]
    fn shutdown_grace_defaults_to_ten_seconds() {
        assert_eq!(
            config(&[]).unwrap().http.shutdown_grace,
            Duration::from_secs(10)
        );
        assert_eq!(
            config(&[("SHUTDOWN_GRACE_MS", "1500")])
                .unwrap()
                .http
                .shutdown_grace,
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn write_permits_default_to_full_batches_on_every_pooled_connection() {
        let permits = |vars: &[(&str, &str)]| config(vars).unwrap().purchases.write_permits;
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

    /// A `*_FILE` is read and then checked like the variable: a placeholder or a keyboard walk
    /// in a mounted secret stops the start as it would in the environment.
    #[test]
    fn a_weak_secret_is_refused_from_its_file_as_from_its_variable() {
        let dir = tempfile::tempdir().unwrap();
        for weak in [
            "change-me-change-me-change-me-change-me",
            "qwertyuiopasdfghjklzxcvbnm1234567890",
        ] {
            let path = dir.path().join("secret");
            std::fs::write(&path, format!("{weak}\n")).unwrap();
            let file = path.display().to_string();
            for (var, file_var, extra) in [
                (
                    "AUTH_JWT_SECRET",
                    "AUTH_JWT_SECRET_FILE",
                    ("AUTH_MODE", "jwt"),
                ),
                (
                    "PAYMENT_WEBHOOK_SECRET",
                    "PAYMENT_WEBHOOK_SECRET_FILE",
                    ("RUST_LOG", "info"),
                ),
            ] {
                let from_var = config(&[(var, weak), extra]).unwrap_err();
                let from_file = config(&[(file_var, &file), extra]).unwrap_err();
                assert_eq!(from_var.var, var, "{weak}");
                assert_eq!(
                    (from_file.var, from_file.to_string()),
                    (from_var.var, from_var.to_string()),
                    "{file_var} with {weak}"
                );
            }
        }
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
                .background
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
            (
                &[
                    ("AUTH_MODE", "trusted-header"),
                    ("AUTH_TRUSTED_PROXIES", "10.0.0.0/8, 0.0.0.0/0"),
                ],
                "AUTH_TRUSTED_PROXIES",
            ),
            (
                &[
                    ("AUTH_MODE", "trusted-header"),
                    ("AUTH_TRUSTED_PROXIES", "::/0"),
                ],
                "AUTH_TRUSTED_PROXIES",
            ),
            (
                &[
                    ("AUTH_MODE", "jwt"),
                    ("AUTH_JWT_SECRET", "s3cr3t9Vq3xT7mK2pL8nR4cW6yB1fH5jD0gZ"),
                    ("AUTH_JWT_MAX_TTL_S", "30"),
                ],
                "AUTH_JWT_MAX_TTL_S",
            ),
            (&[("RATE_LIMIT_PER_BUYER", "20")], "RATE_LIMIT_PER_BUYER"),
            (&[("RATE_LIMIT_PER_IP", "0/s")], "RATE_LIMIT_PER_IP"),
            (&[("AUTH_MODE", "basic")], "AUTH_MODE"),
            (&[("RECONCILE_INTERVAL_MS", "1.5")], "RECONCILE_INTERVAL_MS"),
            (&[("DROP_REFRESH_MS", "0")], "DROP_REFRESH_MS"),
            (&[("DB_ACQUIRE_TIMEOUT_MS", "0")], "DB_ACQUIRE_TIMEOUT_MS"),
            (&[("DB_TX_TIMEOUT_MS", "x")], "DB_TX_TIMEOUT_MS"),
            (&[("RESERVATION_LEASE_MS", "6000")], "RESERVATION_LEASE_MS"),
            (&[("SHUTDOWN_GRACE_MS", "0")], "SHUTDOWN_GRACE_MS"),
            (
                &[
                    ("REDIS_URL", "redis://x"),
                    ("GATE", "memory"),
                    ("REDIS_KEY_PREFIX", "a b"),
                ],
                "REDIS_KEY_PREFIX",
            ),
            (
                &[("REDIS_TLS_CA_FILE", "/etc/ssl/certs/ca-certificates.crt")],
                "REDIS_TLS_CA_FILE",
            ),
            (&[("EVENTS_URL", "redis://x:1")], "EVENTS_URL"),
            (
                &[("EVENTS_URL", "nats://x:1"), ("EVENTS_STREAM", "a.b")],
                "EVENTS_STREAM",
            ),
            (&[("EVENTS_RETENTION_S", "59")], "EVENTS_RETENTION_S"),
            (
                &[("EVENTS_CREDENTIALS_FILE", "/etc/hostname")],
                "EVENTS_CREDENTIALS_FILE",
            ),
            (
                &[
                    ("EVENTS_URL", "nats://x:1"),
                    ("EVENTS_TLS_CA_FILE", "/etc/hostname"),
                ],
                "EVENTS_TLS_CA_FILE",
            ),
            (
                &[
                    ("EVENTS_URL", "nats://x:1"),
                    ("EVENTS_CREDENTIALS_FILE", "/nonexistent"),
                ],
                "EVENTS_CREDENTIALS_FILE",
            ),
        ];
        for (vars, var) in cases {
            let err = config(vars).expect_err(&format!("{vars:?} is accepted"));
            assert_eq!(err.var, *var, "{vars:?}");
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid configuration: {var}:"))
            );
        }
    }
}
