//! Sellers' webhook endpoints: created under the seller's quota row, read and changed only by
//! their seller, secrets kept sealed (hex of the sealed bytes, and the key's id).

use super::queries::last_insert_id;
use super::{SqlStore, duplicate_key};
use crate::rows::{EndpointRow, NumberRow, from_db, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use goods_domain::ports::{
    CreateEndpointError, Endpoint, EndpointChange, NewEndpoint, SealedSecret, WebhookStore,
};
use goods_domain::webhook::EventTypes;
use goods_domain::{EndpointId, InfraError, SealError, UserId};
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
}
