//! Leases: one instance of a fleet at a time holds a named lease, judged by the database's
//! clock.

use super::SqlStore;
use super::queries::number;
use crate::{Backend, Bind, Exec, Sql, db_failure};
use async_trait::async_trait;
use goods_domain::InfraError;
use goods_domain::ports::LeaseStore;

#[async_trait]
impl<B: Backend> LeaseStore for SqlStore<B> {
    #[tracing::instrument(level = "debug", skip_all, fields(lease = name))]
    async fn try_lead(
        &self,
        name: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, InfraError> {
        let now = B::DIALECT.db_now_ms;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let mut conn = self.conn().await?;
        let taken = conn
            .run(
                Sql::new("UPDATE leases SET holder = ")
                    .bind(Bind::Text(holder.to_owned()))
                    .sql(&format!(", expires_at_ms = {now} + "))
                    .bind(Bind::BigInt(ttl_ms))
                    .sql(" WHERE name = ")
                    .bind(Bind::Text(name.to_owned()))
                    .sql(" AND (holder = ")
                    .bind(Bind::Text(holder.to_owned()))
                    .sql(&format!(" OR expires_at_ms < {now})")),
            )
            .await
            .map_err(|e| db_failure("take lease", e, B::unavailable))?;
        if taken == 1 {
            return Ok(true);
        }
        // MySQL counts a row the UPDATE left as it was (a renewal within the same millisecond)
        // as not affected: the holder still holds it then.
        let held = number::<B>(
            &mut conn,
            Sql::new("SELECT COUNT(*) AS n FROM leases WHERE name = ")
                .bind(Bind::Text(name.to_owned()))
                .sql(" AND holder = ")
                .bind(Bind::Text(holder.to_owned()))
                .sql(&format!(" AND expires_at_ms >= {now}")),
        )
        .await
        .map_err(|e| db_failure("read lease", e, B::unavailable))?;
        Ok(held == 1)
    }
}
