//! The event log: a decision's events appended in its transaction, numbered per drop by
//! `limited_drops.event_seq` under the drop's lock (commit order, no gaps).
//!
//! A transaction writes one `event_batches` row (one row an event cost the sell-out 10%,
//! docs/benchmarks.md); readers and the pruning first move waiting rows into `events` oldest
//! first ([`SqlStore::expand_batches`]), which keeps each drop's events in `dropseq` order.

use super::SqlStore;
use crate::event_lines::{self, StoredEvent};
use crate::rows::{from_db, to_db};
use crate::{Backend, Bind, Exec, Sql};
use async_trait::async_trait;
use diesel::QueryResult;
use diesel::QueryableByName;
use goods_domain::ports::{Backlog, EventLog, EventQuery, LoggedEvent};
use goods_domain::{DropId, EventType, Fact, InfraError, event};
use time::{OffsetDateTime, PrimitiveDateTime};

/// The most batch rows one expansion's transaction moves.
const EXPAND_BATCHES: usize = 32;
/// The most transactions one call of [`SqlStore::expand_batches`] runs (2,048 batches: a
/// sell-out of 130,000 orders), so a reader waits a bounded time; the rest waits for the next.
const EXPAND_ROUNDS: usize = 64;
/// The most events one INSERT writes.
const INSERT_ROWS: usize = 500;

/// Appends `facts`, all of one drop, at `at`, in the caller's open transaction: numbers them
/// after the drop's last event (the update takes the drop row's lock until commit), then writes
/// them.
pub(super) async fn append<B: Backend>(
    c: &mut B::Conn,
    facts: &[Fact],
    at: OffsetDateTime,
) -> QueryResult<()> {
    let Some(drop) = facts.first().map(Fact::drop_id) else {
        return Ok(());
    };
    let n = i64::try_from(facts.len()).unwrap_or(i64::MAX);
    c.run(
        Sql::new("UPDATE limited_drops SET event_seq = event_seq + ")
            .bind(Bind::BigInt(n))
            .sql(" WHERE id = ")
            .bind(Bind::BigInt(drop.get())),
    )
    .await?;
    let last: Vec<crate::rows::NumberRow> = c
        .rows(
            Sql::new("SELECT event_seq AS n FROM limited_drops WHERE id = ")
                .bind(Bind::BigInt(drop.get())),
        )
        .await?;
    insert(c, drop, last.first().map_or(n, |row| row.n), facts, at).await
}

/// Writes `facts`, all of `drop`, numbered up to `last` (the drop's `event_seq`, which the
/// caller's transaction already advanced by as many), as one batch row.
pub(super) async fn insert(
    c: &mut impl Exec,
    drop: DropId,
    last: i64,
    facts: &[Fact],
    at: OffsetDateTime,
) -> QueryResult<()> {
    if facts.is_empty() {
        return Ok(());
    }
    debug_assert!(facts.iter().all(|fact| fact.drop_id() == drop));
    let count = i64::try_from(facts.len()).unwrap_or(i64::MAX);
    c.run(
        Sql::new(
            "INSERT INTO event_batches (drop_id, first_seq, event_count, occurred_at, events) \
             VALUES (",
        )
        .bind(Bind::BigInt(drop.get()))
        .sql(", ")
        .bind(Bind::BigInt(last - count + 1))
        .sql(", ")
        .bind(Bind::BigInt(count))
        .sql(", ")
        .bind(Bind::Timestamp(to_db(at)))
        .sql(", ")
        .bind(Bind::Text(event_lines::encode(facts)))
        .sql(")"),
    )
    .await?;
    Ok(())
}

#[derive(Debug, QueryableByName)]
struct BatchRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    first_seq: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    event_count: i64,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    occurred_at: PrimitiveDateTime,
    #[diesel(sql_type = diesel::sql_types::Text)]
    events: String,
}

/// Moves the oldest waiting batch rows (of `drop` alone, when given; at most
/// [`EXPAND_BATCHES`]) into `events`, one row an event numbered from the batch's first, in the
/// caller's write transaction, and deletes them: how many it moved. The rows are read with an
/// exclusive lock, so two expansions at once move each row once, in order.
pub(super) async fn expand_in<B: Backend>(
    c: &mut B::Conn,
    drop: Option<DropId>,
) -> QueryResult<usize> {
    let mut q = Sql::new(
        "SELECT id, drop_id, first_seq, event_count, occurred_at, events FROM event_batches",
    );
    if let Some(drop) = drop {
        q = q.sql(" WHERE drop_id = ").bind(Bind::BigInt(drop.get()));
    }
    let batches: Vec<BatchRow> = c
        .rows(
            q.sql(" ORDER BY id LIMIT ")
                .bind(Bind::BigInt(EXPAND_BATCHES as i64))
                .sql(B::DIALECT.exclusive_read),
        )
        .await?;
    for batch in &batches {
        let count = usize::try_from(batch.event_count).unwrap_or(0);
        let corrupt = || {
            diesel::result::Error::DeserializationError(
                format!("event batch {} does not read back", batch.id).into(),
            )
        };
        let mut events = event_lines::decode(&batch.events, count).ok_or_else(corrupt)?;
        if !render_placed::<B>(c, &mut events).await? {
            return Err(corrupt());
        }
        let drop = batch.drop_id;
        for (chunk, rows) in events.chunks(INSERT_ROWS).enumerate() {
            let first = batch.first_seq + i64::try_from(chunk * INSERT_ROWS).unwrap_or(0);
            insert_rows(c, drop, first, rows, batch.occurred_at).await?;
        }
    }
    if !batches.is_empty() {
        c.run(
            Sql::for_rows(batches.len())
                .sql("DELETE FROM event_batches WHERE id IN (")
                .list(&batches, |q, batch| q.bind(Bind::BigInt(batch.id)))
                .sql(")"),
        )
        .await?;
    }
    Ok(batches.len())
}

/// Renders the data of the `goods.order.placed` lines that left it to their orders' rows, from
/// those rows as placed; `false` when one of the orders is missing.
async fn render_placed<B: Backend>(
    c: &mut B::Conn,
    events: &mut [StoredEvent],
) -> QueryResult<bool> {
    let ids: Vec<i64> = events
        .iter()
        .filter_map(StoredEvent::order_to_render)
        .collect();
    if ids.is_empty() {
        return Ok(true);
    }
    let mut orders = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(INSERT_ROWS) {
        let rows: Vec<crate::rows::OrderRow> = c
            .rows(
                Sql::for_rows(chunk.len())
                    .sql(&format!(
                        "SELECT {} FROM orders WHERE id IN (",
                        super::queries::ORDER_COLUMNS
                    ))
                    .list(chunk, |q, id| q.bind(Bind::BigInt(*id)))
                    .sql(")"),
            )
            .await?;
        for row in rows {
            let order = row.into_domain().map_err(|error| {
                diesel::result::Error::DeserializationError(error.to_string().into())
            })?;
            orders.insert(order.id.get(), order);
        }
    }
    for event in events.iter_mut() {
        if let Some(id) = event.order_to_render() {
            let Some(order) = orders.get(&id) else {
                return Ok(false);
            };
            event.data = crate::event_data::render(&Fact::OrderPlaced(order.clone().as_placed()));
        }
    }
    Ok(true)
}

/// One INSERT of `events` of `drop`, numbered from `first`.
async fn insert_rows(
    c: &mut impl Exec,
    drop: i64,
    first: i64,
    events: &[StoredEvent],
    occurred: PrimitiveDateTime,
) -> QueryResult<()> {
    let drop_id = DropId::parse(drop).map_err(|_| {
        diesel::result::Error::DeserializationError(format!("event batch drop {drop}").into())
    })?;
    c.run(
        Sql::for_rows(events.len())
            .sql(
                "INSERT INTO events (event_id, drop_id, dropseq, type, subject, occurred_at, \
                 data) VALUES ",
            )
            .each(events.iter().enumerate(), |q, (i, e)| {
                let seq = first + i64::try_from(i).unwrap_or(i64::MAX);
                q.sql(if i == 0 { "(" } else { ", (" })
                    .bind(Bind::Text(event_id(drop_id, seq)))
                    .sql(", ")
                    .bind(Bind::BigInt(drop))
                    .sql(", ")
                    .bind(Bind::BigInt(seq))
                    .sql(", ")
                    .bind(Bind::Text(e.kind.clone()))
                    .sql(", ")
                    .bind(Bind::Text(e.subject.clone()))
                    .sql(", ")
                    .bind(Bind::Timestamp(occurred))
                    .sql(", ")
                    .bind(Bind::Text(e.data.clone()))
                    .sql(")")
            }),
    )
    .await?;
    Ok(())
}

/// The CloudEvents `id` of a drop's event `seq`: unique (a drop's numbers are), stable across
/// deliveries, and made by the service alone.
fn event_id(drop: DropId, seq: i64) -> String {
    format!("goods-{drop}-{seq}")
}

#[derive(Debug, QueryableByName)]
struct KindRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    kind: String,
}

#[derive(Debug, QueryableByName)]
pub(super) struct EventRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    event_id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    drop_id: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    dropseq: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    subject: String,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    occurred_at: PrimitiveDateTime,
    #[diesel(sql_type = diesel::sql_types::Text)]
    data: String,
}

impl EventRow {
    pub(super) fn into_domain(self) -> Result<LoggedEvent, InfraError> {
        let corrupt = |what: &str| InfraError::msg(format!("corrupt event {}: {what}", self.id));
        Ok(LoggedEvent {
            cursor: self.id,
            kind: EventType::parse(&self.kind).ok_or_else(|| corrupt("type"))?,
            drop: DropId::parse(self.drop_id).map_err(|_| corrupt("drop"))?,
            dropseq: u64::try_from(self.dropseq).map_err(|_| corrupt("dropseq"))?,
            id: self.event_id,
            subject: self.subject,
            time: from_db(self.occurred_at),
            data: self.data,
        })
    }
}

#[async_trait]
impl<B: Backend> EventLog for SqlStore<B> {
    async fn events(&self, query: &EventQuery) -> Result<Vec<LoggedEvent>, InfraError> {
        self.expand_batches().await?;
        let mut q = Sql::new(&format!("{SELECT_EVENTS} WHERE id > "))
            .bind(Bind::BigInt(query.after.unwrap_or(0)));
        if let Some(kind) = query.kind {
            q = q
                .sql(" AND type = ")
                .bind(Bind::Text(kind.as_str().to_owned()));
        }
        if let Some(drop) = query.drop {
            q = q.sql(" AND drop_id = ").bind(Bind::BigInt(drop.get()));
        }
        let rows: Vec<EventRow> = self
            .read(
                "read events",
                q.sql(" ORDER BY id LIMIT ")
                    .bind(Bind::BigInt(i64::from(query.limit))),
            )
            .await?;
        rows.into_iter().map(EventRow::into_domain).collect()
    }

    async fn record(&self, facts: &[Fact], at: OffsetDateTime) -> Result<(), InfraError> {
        let facts = facts.to_vec();
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "record events",
            |_| false,
            move |c, _| {
                let facts = facts.clone();
                Box::pin(async move {
                    super::queries::begin_write::<B>(c).await?;
                    append::<B>(c, &facts, at).await?;
                    Ok(())
                })
            },
        )
        .await
    }

    async fn record_gate(&self, fact: &Fact, at: OffsetDateTime) -> Result<bool, InfraError> {
        let fact = fact.clone();
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "record a gate event",
            |_| false,
            move |c, _| {
                let fact = fact.clone();
                Box::pin(async move {
                    super::queries::begin_write::<B>(c).await?;
                    let drop = fact.drop_id().get();
                    // The drop row's lock first, so two instances cannot both find the same
                    // latest gate event and both write the next.
                    c.run(
                        Sql::new("UPDATE limited_drops SET event_seq = event_seq WHERE id = ")
                            .bind(Bind::BigInt(drop)),
                    )
                    .await?;
                    // Its latest gate event may still wait in a batch row.
                    while expand_in::<B>(c, Some(fact.drop_id())).await? == EXPAND_BATCHES {}
                    let latest: Vec<KindRow> = c
                        .rows(
                            Sql::new("SELECT type AS kind FROM events WHERE drop_id = ")
                                .bind(Bind::BigInt(drop))
                                .sql(" AND type IN (")
                                .bind(Bind::Text(EventType::GateDegraded.as_str().to_owned()))
                                .sql(", ")
                                .bind(Bind::Text(EventType::GateRecovered.as_str().to_owned()))
                                .sql(") ORDER BY dropseq DESC LIMIT 1"),
                        )
                        .await?;
                    let last = latest.first().and_then(|row| EventType::parse(&row.kind));
                    if !event::gate_fact_is_news(&fact, last) {
                        return Ok(false);
                    }
                    append::<B>(c, std::slice::from_ref(&fact), at).await?;
                    Ok(true)
                })
            },
        )
        .await
    }

    async fn pending_events(&self, limit: u32) -> Result<Vec<LoggedEvent>, InfraError> {
        self.expand_batches().await?;
        let rows: Vec<EventRow> = self
            .read(
                "unpublished events",
                Sql::new(&format!(
                    "{SELECT_EVENTS} WHERE published_at IS NULL ORDER BY drop_id, dropseq LIMIT "
                ))
                .bind(Bind::BigInt(i64::from(limit))),
            )
            .await?;
        rows.into_iter().map(EventRow::into_domain).collect()
    }

    async fn mark_relayed(
        &self,
        drop: DropId,
        dropseq: u64,
        at: OffsetDateTime,
    ) -> Result<(), InfraError> {
        self.write(
            "mark events published",
            Sql::new("UPDATE events SET published_at = ")
                .bind(Bind::OptTimestamp(Some(to_db(at))))
                .sql(" WHERE published_at IS NULL AND drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND dropseq <= ")
                .bind(Bind::BigInt(i64::try_from(dropseq).unwrap_or(i64::MAX))),
        )
        .await
        .map(|_| ())
    }

    async fn prune(
        &self,
        before: OffsetDateTime,
        published_only: bool,
        limit: u32,
    ) -> Result<u64, InfraError> {
        // Only what may be old enough to delete: a sale's batch rows wait for their readers.
        self.expand_batches_before(before).await?;
        let published = if published_only {
            " AND published_at IS NOT NULL"
        } else {
            ""
        };
        let old: Vec<crate::rows::NumberRow> = self
            .read(
                "events to prune",
                // An event not fanned out to sellers' webhooks yet is kept: its deliveries are
                // made from it.
                Sql::new(
                    "SELECT id AS n FROM events WHERE webhooks_at IS NOT NULL AND occurred_at < ",
                )
                .bind(Bind::Timestamp(to_db(before)))
                .sql(published)
                .sql(" ORDER BY occurred_at, id LIMIT ")
                .bind(Bind::BigInt(i64::from(limit))),
            )
            .await?;
        if old.is_empty() {
            return Ok(0);
        }
        let deleted = self
            .write(
                "prune events",
                Sql::for_rows(old.len())
                    .sql("DELETE FROM events WHERE id IN (")
                    .list(&old, |q, row| q.bind(Bind::BigInt(row.n)))
                    .sql(")"),
            )
            .await?;
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    async fn backlog(&self) -> Result<Backlog, InfraError> {
        // Counted whether or not the batch rows can be moved: a log that cannot is lagging.
        let rows: Vec<BacklogRow> = self
            .read(
                "event backlog",
                Sql::new(
                    "SELECT COUNT(*) AS pending, MIN(occurred_at) AS oldest FROM events \
                     WHERE published_at IS NULL UNION ALL \
                     SELECT CAST(COALESCE(SUM(event_count), 0) AS SIGNED), MIN(occurred_at) \
                     FROM event_batches",
                ),
            )
            .await?;
        Ok(rows.iter().fold(Backlog::default(), |sum, row| Backlog {
            pending: sum.pending + u64::try_from(row.pending).unwrap_or(0),
            oldest: match (sum.oldest, row.oldest.map(from_db)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }))
    }
}

impl<B: Backend> SqlStore<B> {
    /// Moves every waiting batch row into `events` (at most `EXPAND_ROUNDS` transactions of
    /// `EXPAND_BATCHES`; the rest waits for the next reader). With none waiting it costs one
    /// read, and no write transaction.
    pub async fn expand_batches(&self) -> Result<(), InfraError> {
        self.expand_oldest(None).await
    }

    /// Moves waiting batch rows into `events`, oldest first, while the oldest was written
    /// before `before` (when given), in at most `EXPAND_ROUNDS` transactions.
    async fn expand_oldest(&self, before: Option<OffsetDateTime>) -> Result<(), InfraError> {
        for round in 0..EXPAND_ROUNDS {
            // Without a cut-off, a full round says more rows may wait: no need to look again.
            if round == 0 || before.is_some() {
                let oldest: Vec<OldestBatchRow> = self
                    .read(
                        "waiting event batches",
                        Sql::new("SELECT occurred_at FROM event_batches ORDER BY id LIMIT 1"),
                    )
                    .await?;
                let Some(oldest) = oldest.first() else {
                    return Ok(());
                };
                if before.is_some_and(|before| from_db(oldest.occurred_at) >= before) {
                    return Ok(());
                }
            }
            if self.expand_round().await? < EXPAND_BATCHES {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The pruning's: moves the batch rows written before `before` (the retention's cut-off)
    /// and no newer, so the healing pass moves nothing of a sale going on (database.md).
    pub(super) async fn expand_batches_before(
        &self,
        before: OffsetDateTime,
    ) -> Result<(), InfraError> {
        self.expand_oldest(Some(before)).await
    }

    /// The webhooks' fan-out's: moves every waiting batch row, oldest first, when one of them
    /// is of a drop whose seller has an endpoint; none otherwise, so a sale whose seller takes
    /// no webhook pays nothing for them while no watched drop has news (and the log stays
    /// oldest first: a watched drop's rows are never moved before older ones).
    pub(super) async fn expand_batches_if_watched(&self) -> Result<(), InfraError> {
        let watched: Vec<crate::rows::NumberRow> = self
            .read(
                // From the endpoints, an index lookup of each of their drops' rows (a scalar
                // subquery: for an EXISTS, MariaDB planned a semi-join materializing every
                // batch row, seen on an empty schema's statistics).
                "a watched drop's waiting event batch",
                Sql::new(
                    "SELECT d.id AS n FROM webhook_endpoints w \
                     JOIN products p ON p.owner_id = w.seller_id \
                     JOIN limited_drops d ON d.product_id = p.id \
                     WHERE (SELECT b.id FROM event_batches b WHERE b.drop_id = d.id LIMIT 1) \
                     IS NOT NULL LIMIT 1",
                ),
            )
            .await?;
        if watched.is_empty() {
            return Ok(());
        }
        self.expand_batches().await
    }

    /// One transaction of [`expand_in`]: how many batch rows it moved.
    async fn expand_round(&self) -> Result<usize, InfraError> {
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "move event batches",
            |_| false,
            move |c, _| {
                Box::pin(async move {
                    super::queries::begin_write::<B>(c).await?;
                    Ok(expand_in::<B>(c, None).await?)
                })
            },
        )
        .await
    }
}

#[derive(Debug, QueryableByName)]
struct OldestBatchRow {
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    occurred_at: PrimitiveDateTime,
}

pub(super) const SELECT_EVENTS: &str = "SELECT id, event_id, drop_id, dropseq, type AS kind, subject, \
    occurred_at, data FROM events";

#[derive(Debug, QueryableByName)]
struct BacklogRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pending: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamp>)]
    oldest: Option<PrimitiveDateTime>,
}
