//! The events section (`EVENTS_*`): where the log is published (without `EVENTS_URL`, only in
//! the database, read at `/admin/events`) and how long it is kept.

use super::{ConfigError, bad, number};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    /// The broker, when one is configured.
    pub broker: Option<Broker>,
    /// How long events stay readable (`EVENTS_RETENTION_S`).
    pub retention: Duration,
}

/// A NATS JetStream broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    /// `nats://host:port` or `tls://host:port`, comma-separated for a cluster.
    pub url: String,
    pub stream: String,
    pub credentials_file: Option<PathBuf>,
    pub tls_ca_file: Option<PathBuf>,
}

impl EventsConfig {
    pub(super) fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let retention = Duration::from_secs(number(get, "EVENTS_RETENTION_S", 604_800_u64, 60)?);
        let stream = get("EVENTS_STREAM").unwrap_or_else(|| "GOODS_EVENTS".into());
        if stream.is_empty()
            || !stream
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(
                "EVENTS_STREAM",
                "must be letters, digits, '_' or '-' (a JetStream stream name)",
            ));
        }
        let credentials_file = get("EVENTS_CREDENTIALS_FILE").map(PathBuf::from);
        let tls_ca_file = get("EVENTS_TLS_CA_FILE").map(PathBuf::from);
        let Some(url) = get("EVENTS_URL") else {
            for (var, set) in [
                ("EVENTS_CREDENTIALS_FILE", credentials_file.is_some()),
                ("EVENTS_TLS_CA_FILE", tls_ca_file.is_some()),
            ] {
                if set {
                    return Err(bad(var, "needs EVENTS_URL"));
                }
            }
            return Ok(Self {
                broker: None,
                retention,
            });
        };
        super::needs_feature("EVENTS_URL", "nats", cfg!(feature = "nats"))?;
        let servers: Vec<&str> = url.split(',').map(str::trim).collect();
        if servers
            .iter()
            .any(|s| !(s.starts_with("nats://") || s.starts_with("tls://")) || s.len() < 8)
        {
            return Err(bad(
                "EVENTS_URL",
                "must be nats://host:port or tls://host:port (comma-separated for a cluster)",
            ));
        }
        if let Some(ca) = &tls_ca_file {
            if !servers.iter().all(|s| s.starts_with("tls://")) {
                return Err(bad("EVENTS_TLS_CA_FILE", "needs a tls:// EVENTS_URL"));
            }
            super::readable("EVENTS_TLS_CA_FILE", ca)?;
        }
        if let Some(creds) = &credentials_file {
            super::readable("EVENTS_CREDENTIALS_FILE", creds)?;
        }
        Ok(Self {
            broker: Some(Broker {
                url,
                stream,
                credentials_file,
                tls_ca_file,
            }),
            retention,
        })
    }
}
