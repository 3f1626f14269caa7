//! Sellers' webhook endpoints: created under the seller's quota row, read and changed only by
//! their seller, secrets kept sealed (hex of the sealed bytes, and the key's id).

use super::event_log::{EventRow, SELECT_EVENTS};
use super::queries::last_insert_id;
use super::{SqlStore, duplicate_key};
use crate::rows::{EndpointRow, NumberRow, from_db, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use diesel::QueryableByName;
use goods_domain::ports::{
    Attempt, CreateEndpointError, Delivery, DeliveryBacklog, DueDelivery, Endpoint, EndpointChange,
    FanOut, NewEndpoint, RetryOutcome, SealedSecret, WebhookStore,
};
use goods_domain::webhook::{AttemptOutcome, DeliveryStatus, EventTypes, delivers, due_to_disable};
use goods_domain::{EndpointId, InfraError, SealError, UserId};
use std::collections::HashMap;
use time::OffsetDateTime;

const ENDPOINT_COLUMNS: &str = "id, seller_id, url, types, description, enabled, secret_sealed, \
    secret_key_id, previous_sealed, previous_key_id, previous_until, failing_since, created_at";

fn select_endpoints(seller: UserId) -> Sql {
    Sql::new(&format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE seller_id = "
    ))
    .bind(Bind::BigInt(seller.get()))
}

fn types_column(types: &EventTypes) -> String {
    types.iter().collect::<Vec<_>>().join(" ")
}

fn sealed(
    hex_text: Option<String>,
    key_id: Option<String>,
) -> Result<Option<SealedSecret>, InfraError> {
    match (hex_text, key_id) {
        (Some(text), Some(key_id)) => Ok(Some(SealedSecret {
            key_id,
            sealed: hex::decode(text).map_err(|e| InfraError::new("corrupt sealed secret", e))?,
        })),
        _ => Ok(None),
    }
}

impl EndpointRow {
    fn into_domain(self) -> Result<Endpoint, InfraError> {
        let corrupt =
            |what: &str| InfraError::msg(format!("corrupt webhook endpoint {}: {what}", self.id));
        let names: Vec<&str> = self.types.split(' ').filter(|t| !t.is_empty()).collect();
        let types = EventTypes::parse(&names).map_err(|e| corrupt(&e.message))?;
        let secret = sealed(self.secret_sealed.clone(), self.secret_key_id.clone())?
            .ok_or_else(|| corrupt("no secret"))?;
        let previous = match (
            sealed(self.previous_sealed.clone(), self.previous_key_id.clone())?,
            self.previous_until,
        ) {
            (Some(secret), Some(until)) => Some((secret, from_db(until))),
            _ => None,
        };
        Ok(Endpoint {
            id: EndpointId::parse(self.id).map_err(|e| corrupt(&e.message))?,
            seller: UserId::parse(self.seller_id).map_err(|e| corrupt(&e.message))?,
            url: self.url,
            types,
            description: self.description,
            enabled: self.enabled,
            created_at: from_db(self.created_at),
            secret,
            previous_secret: previous,
            failing_since: self.failing_since.map(from_db),
        })
    }
}

fn endpoints(rows: Vec<EndpointRow>) -> Result<Vec<Endpoint>, InfraError> {
    rows.into_iter().map(EndpointRow::into_domain).collect()
}

/// Why a creation's transaction rolls back.
#[derive(Debug)]
enum Refused {
    Quota(u32),
    NotConfigured,
    Seal(InfraError),
}

impl From<Refused> for CreateEndpointError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Quota(limit) => Self::QuotaExceeded { limit },
            Refused::NotConfigured => Self::NotConfigured,
            Refused::Seal(e) => Self::Infra(e),
        }
    }
}

/// Takes a place among `seller`'s `max` endpoints on the seller's quota row (made by the first
/// creation; racing first creations meet on its key and are tried again).
async fn take_place<C: Exec>(c: &mut C, seller: i64, max: u32) -> Result<(), TxError<Refused>> {
    let max = i32::try_from(max).unwrap_or(i32::MAX);
    let taken = c
        .run(
            Sql::new("UPDATE webhook_sellers SET endpoints = endpoints + 1 WHERE seller_id = ")
                .bind(Bind::BigInt(seller))
                .sql(" AND endpoints < ")
                .bind(Bind::Integer(max)),
        )
        .await?;
    if taken == 1 {
        return Ok(());
    }
    let rows: Vec<NumberRow> = c
        .rows(
            Sql::new("SELECT endpoints AS n FROM webhook_sellers WHERE seller_id = ")
                .bind(Bind::BigInt(seller)),
        )
        .await?;
    if !rows.is_empty() || max < 1 {
        return Err(TxError::Refused(Refused::Quota(
            u32::try_from(max).unwrap_or(0),
        )));
    }
    c.run(
        Sql::new("INSERT INTO webhook_sellers (seller_id, endpoints) VALUES (")
            .bind(Bind::BigInt(seller))
            .sql(", 1)"),
    )
    .await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> WebhookStore for SqlStore<B> {
    async fn create_endpoint(
        &self,
        endpoint: &NewEndpoint,
        now: OffsetDateTime,
        max_per_seller: u32,
    ) -> Result<Endpoint, CreateEndpointError> {
        let seller = endpoint.seller.get();
        let now_db = to_db(now);
        let types = types_column(&endpoint.types);
        let id = self
            .write_tx::<_, Refused, CreateEndpointError, _>(
                "create webhook endpoint",
                |e| matches!(e, TxError::Db(db) if duplicate_key(db)),
                |c, _| {
                    let types = types.clone();
                    Box::pin(async move {
                        take_place(c, seller, max_per_seller).await?;
                        c.run(
                            Sql::new(
                                "INSERT INTO webhook_endpoints (seller_id, url, types, description, \
                                 enabled, created_at) VALUES (",
                            )
                            .bind(Bind::BigInt(seller))
                            .sql(", ")
                            .bind(Bind::Text(endpoint.url.as_str().to_owned()))
                            .sql(", ")
                            .bind(Bind::Text(types))
                            .sql(", ")
                            .bind(Bind::OptText(
                                endpoint.description.as_ref().map(|d| d.as_str().to_owned()),
                            ))
                            .sql(", ")
                            .bind(Bind::Bool(true))
                            .sql(", ")
                            .bind(Bind::Timestamp(now_db))
                            .sql(")"),
                        )
                        .await?;
                        let id = last_insert_id::<B>(c).await?;
                        let numbered =
                            EndpointId::parse(id).map_err(|e| InfraError::new("endpoint id", e))?;
                        // Sealed now that the endpoint has its id, which the seal binds.
                        let secret = endpoint.secret.seal(numbered).map_err(|e| {
                            TxError::Refused(match e {
                                SealError::NotConfigured => Refused::NotConfigured,
                                SealError::Infra(e) => Refused::Seal(e),
                            })
                        })?;
                        c.run(
                            Sql::new("UPDATE webhook_endpoints SET secret_sealed = ")
                                .bind(Bind::Text(hex::encode(&secret.sealed)))
                                .sql(", secret_key_id = ")
                                .bind(Bind::Text(secret.key_id))
                                .sql(" WHERE id = ")
                                .bind(Bind::BigInt(id)),
                        )
                        .await?;
                        Ok(numbered)
                    })
                },
            )
            .await?;
        self.endpoint_of(endpoint.seller, id)
            .await?
            .ok_or_else(|| InfraError::msg("a created webhook endpoint could not be read").into())
    }

    async fn endpoints_of(&self, seller: UserId) -> Result<Vec<Endpoint>, InfraError> {
        endpoints(
            self.read(
                "read webhook endpoints",
                select_endpoints(seller).sql(" ORDER BY id"),
            )
            .await?,
        )
    }

    async fn endpoint_of(
        &self,
        seller: UserId,
        id: EndpointId,
    ) -> Result<Option<Endpoint>, InfraError> {
        let rows = self
            .read(
                "read a webhook endpoint",
                select_endpoints(seller)
                    .sql(" AND id = ")
                    .bind(Bind::BigInt(id.get())),
            )
            .await?;
        Ok(endpoints(rows)?.into_iter().next())
    }

    async fn update_endpoint(
        &self,
        seller: UserId,
        id: EndpointId,
        change: &EndpointChange,
    ) -> Result<Option<Endpoint>, InfraError> {
        let mut q = Sql::new("UPDATE webhook_endpoints SET id = id");
        if let Some(url) = &change.url {
            q = q.sql(", url = ").bind(Bind::Text(url.as_str().to_owned()));
        }
        if let Some(types) = &change.types {
            q = q.sql(", types = ").bind(Bind::Text(types_column(types)));
        }
        if let Some(description) = &change.description {
            q = q.sql(", description = ").bind(Bind::OptText(
                description.as_ref().map(|d| d.as_str().to_owned()),
            ));
        }
        if let Some(enabled) = change.enabled {
            q = q.sql(", enabled = ").bind(Bind::Bool(enabled));
            if enabled {
                // Enabled again: its failures start afresh.
                q = q.sql(", failing_since = NULL");
            }
        }
        let q = q
            .sql(" WHERE id = ")
            .bind(Bind::BigInt(id.get()))
            .sql(" AND seller_id = ")
            .bind(Bind::BigInt(seller.get()));
        self.write("update a webhook endpoint", q).await?;
        self.endpoint_of(seller, id).await
    }

    async fn rotate_secret(
        &self,
        seller: UserId,
        id: EndpointId,
        secret: &SealedSecret,
        previous_until: OffsetDateTime,
    ) -> Result<bool, InfraError> {
        // One statement: the current secret becomes the previous one as the new one is
        // written (SET reads the row as it was before the statement, on both backends).
        let changed = self
            .write(
                "rotate a webhook secret",
                Sql::new(
                    "UPDATE webhook_endpoints SET previous_sealed = secret_sealed, \
                     previous_key_id = secret_key_id, previous_until = ",
                )
                .bind(Bind::Timestamp(to_db(previous_until)))
                .sql(", secret_sealed = ")
                .bind(Bind::Text(hex::encode(&secret.sealed)))
                .sql(", secret_key_id = ")
                .bind(Bind::Text(secret.key_id.clone()))
                .sql(" WHERE id = ")
                .bind(Bind::BigInt(id.get()))
                .sql(" AND seller_id = ")
                .bind(Bind::BigInt(seller.get())),
            )
            .await?;
        Ok(changed == 1)
    }

    async fn delete_endpoint(&self, seller: UserId, id: EndpointId) -> Result<bool, InfraError> {
        let (seller, id) = (seller.get(), id.get());
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "delete a webhook endpoint",
            |_| false,
            |c, _| {
                Box::pin(async move {
                    let deleted = c
                        .run(
                            Sql::new("DELETE FROM webhook_endpoints WHERE id = ")
                                .bind(Bind::BigInt(id))
                                .sql(" AND seller_id = ")
                                .bind(Bind::BigInt(seller)),
                        )
                        .await?;
                    if deleted == 1 {
                        // Its pending deliveries are dropped with it.
                        c.run(
                            Sql::new("DELETE FROM webhook_deliveries WHERE endpoint_id = ")
                                .bind(Bind::BigInt(id)),
                        )
                        .await?;
                        c.run(
                            Sql::new(
                                "UPDATE webhook_sellers SET endpoints = endpoints - 1 \
                                 WHERE endpoints > 0 AND seller_id = ",
                            )
                            .bind(Bind::BigInt(seller)),
                        )
                        .await?;
                    }
                    Ok(deleted == 1)
                })
            },
        )
        .await
    }

    async fn fan_out(&self, limit: u32, now: OffsetDateTime) -> Result<FanOut, InfraError> {
        // Events still in their decision's batch row are moved into `events` first, when one of
        // them may be delivered (the log's other readers move the rest).
        self.expand_batches_if_watched().await?;
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "fan webhook deliveries out",
            |e| matches!(e, TxError::Db(db) if duplicate_key(db)),
            move |c, _| Box::pin(async move { fan_out_in::<B>(c, limit, now).await }),
        )
        .await
    }

    async fn due_deliveries(
        &self,
        now: OffsetDateTime,
        limit: u32,
        except: &[EndpointId],
    ) -> Result<Vec<DueDelivery>, InfraError> {
        let mut q = Sql::for_rows(except.len());
        if !except.is_empty() {
            q = q
                .sql(" AND d.endpoint_id NOT IN (")
                .list(except, |q, id| q.bind(Bind::BigInt(id.get())))
                .sql(")");
        }
        let rows: Vec<DueRow> = self
            .read(
                "due webhook deliveries",
                Sql::new(
                    "SELECT d.id, d.endpoint_id, d.event_id, d.body, d.attempts \
                     FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
                     WHERE d.status = 'PENDING' AND e.enabled = ",
                )
                .bind(Bind::Bool(true))
                .sql(" AND d.next_attempt_at <= ")
                .bind(Bind::Timestamp(to_db(now)))
                .append(q)
                .sql(" ORDER BY d.next_attempt_at, d.id LIMIT ")
                .bind(Bind::BigInt(i64::from(limit))),
            )
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let endpoints: Vec<EndpointRow> = self
            .read(
                "endpoints of due webhook deliveries",
                Sql::for_rows(rows.len())
                    .sql(&format!(
                        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id IN ("
                    ))
                    .list(&rows, |q, row| q.bind(Bind::BigInt(row.endpoint_id)))
                    .sql(")"),
            )
            .await?;
        let endpoints: HashMap<i64, Endpoint> = endpoints
            .into_iter()
            .map(|row| row.into_domain().map(|e| (e.id.get(), e)))
            .collect::<Result<_, _>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                // An endpoint deleted in between has no deliveries left to make.
                Some(DueDelivery {
                    id: row.id,
                    endpoint: endpoints.get(&row.endpoint_id)?.clone(),
                    event_id: row.event_id,
                    body: row.body,
                    attempts: u32::try_from(row.attempts).unwrap_or(0),
                })
            })
            .collect())
    }

    async fn record_attempt(
        &self,
        id: i64,
        attempt: &Attempt,
        now: OffsetDateTime,
    ) -> Result<bool, InfraError> {
        let now_db = to_db(now);
        let delivered = attempt.outcome.delivered();
        let status = if delivered {
            DeliveryStatus::Delivered
        } else if attempt.next_attempt_at.is_some() {
            DeliveryStatus::Pending
        } else {
            DeliveryStatus::Failed
        };
        let (code, error) = match &attempt.outcome {
            AttemptOutcome::Answered(code) => (Some(i32::from(*code)), None),
            AttemptOutcome::NoAnswer(why) => {
                (None, Some(why.chars().take(255).collect::<String>()))
            }
        };
        let next = if delivered {
            None
        } else {
            attempt.next_attempt_at.map(to_db)
        };
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "record a webhook attempt",
            |_| false,
            move |c, _| {
                let error = error.clone();
                Box::pin(async move {
                    let mut q = Sql::new("UPDATE webhook_deliveries SET attempts = attempts + 1, status = ")
                        .bind(Bind::Text(status.as_str().to_owned()))
                        .sql(", next_attempt_at = ")
                        .bind(Bind::OptTimestamp(next))
                        .sql(", last_error = ")
                        .bind(Bind::OptText(error))
                        .sql(", last_status_code = ");
                    q = match code {
                        Some(code) => q.bind(Bind::Integer(code)),
                        None => q.sql("NULL"),
                    };
                    if delivered {
                        q = q.sql(", delivered_at = ").bind(Bind::Timestamp(now_db));
                    }
                    let recorded = c
                        .run(
                            q.sql(" WHERE status = 'PENDING' AND id = ")
                                .bind(Bind::BigInt(id)),
                        )
                        .await?;
                    if recorded == 0 {
                        // Recorded already (a lease that passed on), or its endpoint deleted.
                        return Ok(false);
                    }
                    let failing = if delivered {
                        Sql::new("UPDATE webhook_endpoints SET failing_since = NULL")
                    } else {
                        Sql::new("UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ")
                            .bind(Bind::Timestamp(now_db))
                            .sql(")")
                    };
                    c.run(
                        failing
                            .sql(" WHERE id = (SELECT endpoint_id FROM webhook_deliveries WHERE id = ")
                            .bind(Bind::BigInt(id))
                            .sql(")"),
                    )
                    .await?;
                    Ok(true)
                })
            },
        )
        .await
    }

    async fn deliveries_of(
        &self,
        seller: UserId,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Option<Vec<(i64, Delivery)>>, InfraError> {
        if self.endpoint_of(seller, endpoint).await?.is_none() {
            return Ok(None);
        }
        let mut q = Sql::new(
            "SELECT id, event_id, event_type, status, attempts, last_status_code, last_error, \
             next_attempt_at, delivered_at FROM webhook_deliveries WHERE endpoint_id = ",
        )
        .bind(Bind::BigInt(endpoint.get()));
        if let Some(status) = status {
            q = q
                .sql(" AND status = ")
                .bind(Bind::Text(status.as_str().to_owned()));
        }
        if let Some(before) = before {
            q = q.sql(" AND id < ").bind(Bind::BigInt(before));
        }
        let rows: Vec<DeliveryRow> = self
            .read(
                "read webhook deliveries",
                q.sql(" ORDER BY id DESC LIMIT ")
                    .bind(Bind::BigInt(i64::from(limit))),
            )
            .await?;
        rows.into_iter()
            .map(DeliveryRow::into_domain)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn retry_delivery(
        &self,
        seller: UserId,
        endpoint: EndpointId,
        event_id: &str,
        now: OffsetDateTime,
    ) -> Result<RetryOutcome, InfraError> {
        if self.endpoint_of(seller, endpoint).await?.is_none() {
            return Ok(RetryOutcome::EndpointNotFound);
        }
        let changed = self
            .write(
                "retry a webhook delivery",
                Sql::new("UPDATE webhook_deliveries SET status = 'PENDING', next_attempt_at = ")
                    .bind(Bind::Timestamp(to_db(now)))
                    .sql(" WHERE endpoint_id = ")
                    .bind(Bind::BigInt(endpoint.get()))
                    .sql(" AND event_id = ")
                    .bind(Bind::Text(event_id.to_owned())),
            )
            .await?;
        Ok(if changed == 1 {
            RetryOutcome::Scheduled
        } else {
            RetryOutcome::DeliveryNotFound
        })
    }

    async fn disable_failing(
        &self,
        now: OffsetDateTime,
        disable_after: time::Duration,
    ) -> Result<Vec<EndpointId>, InfraError> {
        let failing: Vec<EndpointRow> = self
            .read(
                "failing webhook endpoints",
                Sql::new(&format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE failing_since IS NOT NULL AND enabled = "
                ))
                .bind(Bind::Bool(true)),
            )
            .await?;
        let due: Vec<Endpoint> = endpoints(failing)?
            .into_iter()
            .filter(|e| due_to_disable(e.failing_since, now, disable_after))
            .collect();
        let mut disabled = Vec::new();
        for endpoint in due {
            // Only if it is still failing since then: a success in between keeps it.
            let changed = self
                .write(
                    "disable a failing webhook endpoint",
                    Sql::new("UPDATE webhook_endpoints SET enabled = ")
                        .bind(Bind::Bool(false))
                        .sql(" WHERE id = ")
                        .bind(Bind::BigInt(endpoint.id.get()))
                        .sql(" AND failing_since = ")
                        .bind(Bind::OptTimestamp(endpoint.failing_since.map(to_db))),
                )
                .await?;
            if changed == 1 {
                disabled.push(endpoint.id);
            }
        }
        Ok(disabled)
    }

    async fn delivery_backlog(
        &self,
        now: OffsetDateTime,
        up_to: u64,
    ) -> Result<DeliveryBacklog, InfraError> {
        // At most `up_to` entries of the (status, next_attempt_at) index are read.
        let pending: Vec<NumberRow> = self
            .read(
                "pending webhook deliveries",
                Sql::new(
                    "SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM webhook_deliveries \
                     WHERE status = 'PENDING' LIMIT ",
                )
                .bind(Bind::BigInt(i64::try_from(up_to).unwrap_or(i64::MAX)))
                .sql(") AS counted"),
            )
            .await?;
        let oldest: Vec<OldestRow> = self
            .read(
                "oldest due webhook delivery",
                Sql::new(
                    "SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d \
                     JOIN webhook_endpoints e ON e.id = d.endpoint_id \
                     WHERE d.status = 'PENDING' AND e.enabled = ",
                )
                .bind(Bind::Bool(true))
                .sql(" AND d.next_attempt_at <= ")
                .bind(Bind::Timestamp(to_db(now))),
            )
            .await?;
        Ok(DeliveryBacklog {
            pending: pending
                .first()
                .map_or(0, |r| u64::try_from(r.n).unwrap_or(0)),
            oldest_due: oldest.first().and_then(|r| r.at).map(from_db),
        })
    }
}

#[derive(Debug, QueryableByName)]
struct OldestRow {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    at: Option<time::PrimitiveDateTime>,
}

/// [`WebhookStore::fan_out`] in its transaction.
async fn fan_out_in<B: Backend>(
    c: &mut B::Conn,
    limit: u32,
    now: OffsetDateTime,
) -> Result<FanOut, TxError<std::convert::Infallible>> {
    let events: Vec<EventRow> = c
        .rows(
            Sql::new(&format!(
                "{SELECT_EVENTS} WHERE webhooks_at IS NULL ORDER BY id LIMIT "
            ))
            .bind(Bind::BigInt(i64::from(limit))),
        )
        .await?;
    if events.is_empty() {
        return Ok(FanOut::default());
    }
    let events = events
        .into_iter()
        .map(EventRow::into_domain)
        .collect::<Result<Vec<_>, _>>()?;
    let owners: Vec<OwnerRow> = c
        .rows(
            Sql::for_rows(events.len())
                .sql(
                    "SELECT d.id AS drop_id, p.owner_id FROM limited_drops d \
                     JOIN products p ON p.id = d.product_id WHERE d.id IN (",
                )
                .list(&events, |q, e| q.bind(Bind::BigInt(e.drop.get())))
                .sql(")"),
        )
        .await?;
    let owners: HashMap<i64, UserId> = owners
        .into_iter()
        .filter_map(|row| Some((row.drop_id, UserId::parse(row.owner_id?).ok()?)))
        .collect();
    let mut endpoints: Vec<Endpoint> = Vec::new();
    if !owners.is_empty() {
        let rows: Vec<EndpointRow> = c
            .rows(
                Sql::for_rows(owners.len())
                    .sql(&format!(
                        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE seller_id IN ("
                    ))
                    .list(owners.values(), |q, seller| {
                        q.bind(Bind::BigInt(seller.get()))
                    })
                    .sql(")"),
            )
            .await?;
        endpoints = self::endpoints(rows)?;
    }
    let now_db = to_db(now);
    let mut made = 0;
    for event in &events {
        let owner = owners.get(&event.drop.get()).copied();
        let takers: Vec<&Endpoint> = endpoints
            .iter()
            .filter(|e| {
                delivers(
                    e.seller,
                    &e.types,
                    e.created_at,
                    owner,
                    event.kind.as_str(),
                    event.time,
                )
            })
            .collect();
        if takers.is_empty() {
            continue;
        }
        let body = event.to_cloud_event();
        let insert = Sql::for_rows(takers.len())
            .sql(
                "INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, body, status, \
                 attempts, next_attempt_at, created_at) VALUES ",
            )
            .list(&takers, |q, e| {
                q.sql("(")
                    .bind(Bind::BigInt(e.id.get()))
                    .sql(", ")
                    .bind(Bind::Text(event.id.clone()))
                    .sql(", ")
                    .bind(Bind::Text(event.kind.as_str().to_owned()))
                    .sql(", ")
                    .bind(Bind::Text(body.clone()))
                    .sql(", 'PENDING', 0, ")
                    .bind(Bind::Timestamp(now_db))
                    .sql(", ")
                    .bind(Bind::Timestamp(now_db))
                    .sql(")")
            });
        made += c.run(insert).await?;
    }
    c.run(
        Sql::for_rows(events.len())
            .sql("UPDATE events SET webhooks_at = ")
            .bind(Bind::Timestamp(now_db))
            .sql(" WHERE webhooks_at IS NULL AND id IN (")
            .list(&events, |q, e| q.bind(Bind::BigInt(e.cursor)))
            .sql(")"),
    )
    .await?;
    Ok(FanOut {
        events: events.len(),
        deliveries: made,
    })
}

#[derive(Debug, QueryableByName)]
struct OwnerRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    owner_id: Option<i64>,
}

#[derive(Debug, QueryableByName)]
struct DueRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    endpoint_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    body: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
}

#[derive(Debug, QueryableByName)]
struct DeliveryRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    event_type: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    status: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Integer>)]
    last_status_code: Option<i32>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    next_attempt_at: Option<time::PrimitiveDateTime>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    delivered_at: Option<time::PrimitiveDateTime>,
}

impl DeliveryRow {
    fn into_domain(self) -> Result<(i64, Delivery), InfraError> {
        let status = DeliveryStatus::parse(&self.status).ok_or_else(|| {
            InfraError::msg(format!("corrupt webhook delivery {}: status", self.id))
        })?;
        Ok((
            self.id,
            Delivery {
                event_id: self.event_id,
                event_type: self.event_type,
                status,
                attempts: u32::try_from(self.attempts).unwrap_or(0),
                last_status_code: self.last_status_code.and_then(|c| u16::try_from(c).ok()),
                last_error: self.last_error,
                next_attempt_at: self.next_attempt_at.map(from_db),
                delivered_at: self.delivered_at.map(from_db),
            },
        ))
    }
}
