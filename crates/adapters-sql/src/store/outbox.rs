//! Durable events (the outbox), each recorded once by its key.

use super::event_log::append;
use super::queries::begin_write;
use super::{SqlStore, duplicate_key};
use crate::rows::{OutboxRow, to_db};
use crate::{Backend, Bind, Exec, Sql, decode_event, encode_event};
use async_trait::async_trait;
use goods_domain::ports::{DomainEvent, EventOutbox, OutboxEntry};
use goods_domain::{Fact, InfraError};
use std::convert::Infallible;
use time::OffsetDateTime;

#[async_trait]
impl<B: Backend> EventOutbox for SqlStore<B> {
    async fn record_once(
        &self,
        key: &str,
        event: &DomainEvent,
        facts: &[Fact],
        at: OffsetDateTime,
    ) -> Result<bool, InfraError> {
        let (kind, payload) = encode_event(event)?;
        let insert =
            Sql::new("INSERT INTO outbox_events (event_key, kind, payload, created_at) VALUES (")
                .bind(Bind::Text(key.to_owned()))
                .sql(", ")
                .bind(Bind::Text(kind.to_owned()))
                .sql(", ")
                .bind(Bind::Text(payload))
                .sql(", ")
                .bind(Bind::Timestamp(to_db(at)));
        self.write_tx::<_, Infallible, InfraError, _>(
            "record event",
            |_| false,
            |c, _| {
                let insert = insert.clone().sql(")");
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    match c.run(insert).await {
                        Ok(_) => {}
                        // Another caller's transaction recorded it (and its facts) first.
                        Err(e) if duplicate_key(&e) => return Ok(false),
                        Err(e) => return Err(e.into()),
                    }
                    append::<B>(c, facts, at).await?;
                    Ok(true)
                })
            },
        )
        .await
    }

    async fn unpublished(&self, limit: u32) -> Result<Vec<OutboxEntry>, InfraError> {
        let rows: Vec<OutboxRow> = self
            .read(
                "unpublished events",
                Sql::new(
                    "SELECT id, kind, payload FROM outbox_events WHERE published_at IS NULL \
                     ORDER BY id LIMIT ",
                )
                .bind(Bind::BigInt(i64::from(limit))),
            )
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(OutboxEntry {
                    id: row.id,
                    event: decode_event(&row.kind, &row.payload)?,
                })
            })
            .collect()
    }

    async fn mark_published(&self, id: i64, at: OffsetDateTime) -> Result<(), InfraError> {
        self.write(
            "mark event published",
            Sql::new("UPDATE outbox_events SET published_at = ")
                .bind(Bind::OptTimestamp(Some(to_db(at))))
                .sql(" WHERE id = ")
                .bind(Bind::BigInt(id))
                .sql(" AND published_at IS NULL"),
        )
        .await
        .map(drop)
    }
}
