//! Redis, and the admission gate. Redis is a section of its own: when `REDIS_URL` is set the
//! instances share it for change notices, outcome counters and the fleet's write budget,
//! whichever gate admits purchases; `GATE=redis` puts the gate in it too.

use super::{ConfigError, bad, secret};
use secrecy::SecretString;
use std::path::PathBuf;

/// The Redis section (`REDIS_URL`, `REDIS_PASSWORD_FILE`, `REDIS_KEY_PREFIX`,
/// `REDIS_TLS_CA_FILE`).
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// One server or a cluster's seed nodes. Secret: it may hold the password.
    pub url: SecretString,
    /// Prefix of every key and channel.
    pub prefix: String,
    /// The CA a `rediss://` server is verified with; `None`: the system's roots.
    pub tls_ca_file: Option<PathBuf>,
}

/// fred's forms: one server, or a cluster named by its seed nodes
/// (`redis-cluster://host:port?node=host:port&node=host:port`).
const SCHEMES: [&str; 4] = [
    "redis://",
    "rediss://",
    "redis-cluster://",
    "rediss-cluster://",
];

impl RedisConfig {
    /// `None` when `REDIS_URL` is unset. A bad `REDIS_*` value is an error either way.
    pub(super) fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let prefix = get("REDIS_KEY_PREFIX").unwrap_or_else(|| "goods:".into());
        if prefix.contains(['{', '}', ' ']) {
            return Err(bad("REDIS_KEY_PREFIX", "must not contain braces or spaces"));
        }
        let tls_ca_file = get("REDIS_TLS_CA_FILE").map(PathBuf::from);
        let Some(url) = get("REDIS_URL") else {
            if tls_ca_file.is_some() {
                return Err(bad(
                    "REDIS_TLS_CA_FILE",
                    "needs a rediss:// (or rediss-cluster://) REDIS_URL",
                ));
            }
            return Ok(None);
        };
        super::needs_feature("REDIS_URL", "redis", cfg!(feature = "redis"))?;
        let url = secret::with_password_file(get, "REDIS_URL", url, "REDIS_PASSWORD_FILE")?;
        if !SCHEMES.iter().any(|scheme| url.starts_with(scheme)) {
            return Err(bad(
                "REDIS_URL",
                "must start with redis://, rediss://, redis-cluster:// or rediss-cluster://",
            ));
        }
        if let Some(ca) = &tls_ca_file {
            if !url.starts_with("rediss") {
                return Err(bad(
                    "REDIS_TLS_CA_FILE",
                    "needs a rediss:// (or rediss-cluster://) REDIS_URL",
                ));
            }
            super::readable("REDIS_TLS_CA_FILE", ca)?;
        }
        Ok(Some(Self {
            url: url.into(),
            prefix,
            tls_ca_file,
        }))
    }

    /// What the adapter connects with.
    #[cfg(feature = "redis")]
    pub fn connection(&self) -> adapters_redis::RedisConfig {
        use secrecy::ExposeSecret as _;
        adapters_redis::RedisConfig {
            url: self.url.expose_secret().to_owned(),
            prefix: self.prefix.clone(),
            pool_size: 8,
            command_timeout: std::time::Duration::from_millis(500),
            tls_ca_file: self.tls_ca_file.clone(),
        }
    }
}

/// Which admission gate (`GATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// In Redis, shared by every instance (needs the Redis section).
    Redis,
    /// In-process (one instance only).
    Memory,
    /// No gate: the database's conditional updates alone (strategy B).
    Off,
}

/// Where the gate's state lives, which decides who runs the background work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    /// In this process: every instance heals its own gate.
    Local,
    /// Shared by the fleet (Redis, or only the database): one instance at a time, holding the
    /// background lease, heals for all.
    Shared,
}

impl Gate {
    pub(super) fn read(
        get: &impl Fn(&str) -> Option<String>,
        redis: Option<&RedisConfig>,
    ) -> Result<Self, ConfigError> {
        match (get("GATE").as_deref(), redis) {
            (Some("redis") | None, Some(_)) => Ok(Self::Redis),
            (Some("redis"), None) => Err(bad("GATE", "redis needs REDIS_URL")),
            (Some("memory") | None, _) => Ok(Self::Memory),
            (Some("off"), _) => Ok(Self::Off),
            (Some(other), _) => Err(bad(
                "GATE",
                format!("{other:?} is not redis, memory or off"),
            )),
        }
    }

    /// Where its state lives.
    pub fn kind(self) -> GateKind {
        match self {
            Self::Memory => GateKind::Local,
            Self::Redis | Self::Off => GateKind::Shared,
        }
    }

    /// Its name in `/health/ready`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Memory => "memory",
            Self::Off => "off",
        }
    }
}
