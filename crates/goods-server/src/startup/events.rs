//! Publishing the event log: the broker `EVENTS_URL` names (NATS JetStream, with the `nats`
//! feature; the configuration refuses the URL without it) and the relay over it. Without a
//! broker the events stay in the database, read at `/admin/events`.

use crate::config::EventsConfig;
use goods_app::Relay;
use goods_domain::ports::{Clock, EventLog};
use std::sync::Arc;

/// The relay, when a broker is configured.
pub(super) async fn relay(
    config: &EventsConfig,
    log: Arc<dyn EventLog>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Option<Relay>> {
    let Some(broker) = &config.broker else {
        return Ok(None);
    };
    #[cfg(feature = "nats")]
    {
        let broker = adapters_nats::NatsBroker::connect(&adapters_nats::NatsConfig {
            url: broker.url.clone(),
            stream: broker.stream.clone(),
            credentials_file: broker.credentials_file.clone(),
            tls_ca_file: broker.tls_ca_file.clone(),
            ack_timeout: std::time::Duration::from_secs(2),
        })
        .await?;
        Ok(Some(Relay::new(log, Arc::new(broker), clock)))
    }
    #[cfg(not(feature = "nats"))]
    {
        let _ = (broker, log, clock);
        anyhow::bail!("this goods-server was built without the `nats` feature")
    }
}
