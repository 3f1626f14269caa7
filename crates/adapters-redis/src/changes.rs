//! Change notices over Redis pub/sub: an instance that changed a flag or a drop publishes one,
//! every instance re-reads the database when one arrives. The message carries nothing to
//! trust; the database stays the only source of the change.

use crate::connection::RedisConnection;
use crate::keys::changes_channel;
use async_trait::async_trait;
use fred::prelude::*;
use goods_domain::InfraError;
use goods_domain::ports::ChangeNotifier;

/// Publishes and hears change notices on the deployment's channel.
#[derive(Clone)]
pub struct RedisChanges {
    conn: RedisConnection,
    channel: String,
}

impl RedisChanges {
    /// Notices on `conn`'s prefix (`{prefix}ops:changed`).
    pub fn new(conn: RedisConnection) -> Self {
        let channel = changes_channel(&conn.prefix);
        Self { conn, channel }
    }

    /// Calls `on_change` for every notice from now on, this instance's own included.
    pub fn listen(&self, on_change: impl Fn() + Send + 'static) {
        self.conn
            .subscribe(self.channel.clone(), move |_| on_change());
    }
}

#[async_trait]
impl ChangeNotifier for RedisChanges {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn changed(&self) -> Result<(), InfraError> {
        let _: i64 = self
            .conn
            .pool
            .next()
            .publish(self.channel.as_str(), 1)
            .await
            .map_err(|e| InfraError::new("redis publish change", e))?;
        Ok(())
    }
}
