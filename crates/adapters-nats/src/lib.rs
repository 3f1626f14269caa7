//! The event broker on NATS JetStream: each event a message on `goods.<dropId>.<type without
//! "goods.">`, its payload the CloudEvents JSON, `Nats-Msg-Id` its id (so the stream drops
//! repeats). The stream (`EVENTS_STREAM`, `goods.>`) is created when missing.
//!
//! A drop's events are sent and acknowledged in `dropseq` order, so what is reported published
//! is a prefix; a server that refuses one event and stores the next sees the refused one again
//! after it, so a consumer needing order sorts by `dropseq`.

use async_nats::jetstream::{self, stream};
use async_nats::{ConnectOptions, HeaderMap};
use async_trait::async_trait;
use goods_domain::InfraError;
use goods_domain::ports::{EventBroker, LoggedEvent, Publication};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::OnceCell;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsConfig {
    /// `nats://host:port` or `tls://host:port` (several, comma-separated, for a cluster).
    pub url: String,
    pub stream: String,
    /// A NATS credentials file (`EVENTS_CREDENTIALS_FILE`).
    pub credentials_file: Option<PathBuf>,
    /// The CA a `tls://` server is verified with (`EVENTS_TLS_CA_FILE`); `None`: the system's
    /// roots.
    pub tls_ca_file: Option<PathBuf>,
    /// How long one acknowledgement is waited for.
    pub ack_timeout: Duration,
}

/// The subjects the stream takes.
pub const SUBJECTS: &str = "goods.>";

/// A JetStream context and the stream, made sure of once.
pub struct NatsBroker {
    js: jetstream::Context,
    stream: String,
    ready: OnceCell<()>,
}

impl NatsBroker {
    /// Connects, retrying a server that is down in the background (events wait in the log), so
    /// the service starts without its broker; fails on a bad URL or credentials file.
    pub async fn connect(config: &NatsConfig) -> anyhow::Result<Self> {
        let mut options = ConnectOptions::new()
            .name("goods-server")
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(2))
            .request_timeout(Some(config.ack_timeout));
        if let Some(creds) = &config.credentials_file {
            options = options
                .credentials_file(creds)
                .await
                .map_err(|e| anyhow::anyhow!("EVENTS_CREDENTIALS_FILE {}: {e}", creds.display()))?;
        }
        if config
            .url
            .split(',')
            .any(|u| u.trim().starts_with("tls://"))
        {
            options = options.require_tls(true);
            if let Some(ca) = &config.tls_ca_file {
                options = options.add_root_certificates(ca.clone());
            }
        }
        let client = options
            .connect(config.url.as_str())
            .await
            .map_err(|e| anyhow::anyhow!("EVENTS_URL: {e}"))?;
        let mut js = jetstream::new(client);
        js.set_timeout(config.ack_timeout);
        Ok(Self {
            js,
            stream: config.stream.clone(),
            ready: OnceCell::new(),
        })
    }

    /// Creates the stream unless it exists (once per process, on the first publication).
    async fn stream(&self) -> Result<(), InfraError> {
        self.ready
            .get_or_try_init(|| async {
                self.js
                    .get_or_create_stream(stream::Config {
                        name: self.stream.clone(),
                        subjects: vec![SUBJECTS.to_owned()],
                        ..Default::default()
                    })
                    .await
                    .map(drop)
                    .map_err(|e| InfraError::unavailable(format!("stream {}: {e}", self.stream)))
            })
            .await
            .map(drop)
    }
}

impl NatsBroker {
    /// Whether the message the stream holds at `sequence` is `event`: its subject, its id and
    /// its payload. A repeat's acknowledgement names the sequence of the message stored first
    /// under the id, which anyone who may publish to the stream could have written.
    async fn holds(&self, sequence: u64, event: &LoggedEvent) -> Result<bool, String> {
        let stream = self
            .js
            .get_stream(&self.stream)
            .await
            .map_err(|e| e.to_string())?;
        let stored = stream
            .get_raw_message(sequence)
            .await
            .map_err(|e| e.to_string())?;
        Ok(stored.subject.as_str() == event.broker_subject()
            && stored
                .headers
                .get("Nats-Msg-Id")
                .is_some_and(|id| id.as_str() == event.id)
            && stored.payload.as_ref() == event.to_cloud_event().as_bytes())
    }
}

#[async_trait]
impl EventBroker for NatsBroker {
    async fn publish(&self, events: &[LoggedEvent]) -> Result<Publication, InfraError> {
        self.stream().await?;
        let mut acked = 0;
        for event in events {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", event.id.as_str());
            let ack = match self
                .js
                .publish_with_headers(
                    event.broker_subject(),
                    headers,
                    event.to_cloud_event().into(),
                )
                .await
            {
                Ok(ack) => ack,
                Err(e) if acked == 0 => {
                    return Err(InfraError::unavailable(format!(
                        "publish {}: {e}",
                        event.id
                    )));
                }
                Err(e) => {
                    tracing::warn!(error = %e, event.id = %event.id, "event not sent; the rest waits");
                    break;
                }
            };
            // Acknowledged before the next is sent: with several in flight, a reconnect can lose
            // one and store the one after it, and the retry then stores them out of order (the
            // broker test saw 1, 3, 2, 4).
            let ack = match ack.await {
                Ok(ack) => ack,
                Err(e) => {
                    tracing::warn!(error = %e, event.id = %event.id, "event not acknowledged; the rest waits");
                    break;
                }
            };
            if ack.duplicate {
                match self.holds(ack.sequence, event).await {
                    Ok(true) => {}
                    Ok(false) => {
                        return Ok(Publication {
                            acked,
                            impostor: Some(event.id.clone()),
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, event.id = %event.id, "a repeat's stored message not read; the rest waits");
                        break;
                    }
                }
            }
            acked += 1;
        }
        Ok(Publication::acked(acked))
    }
}
