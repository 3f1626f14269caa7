//! Draw drops: entries written in batches (one row per buyer; the draw's row keeps the
//! count), the entry set closed and read in user id order, the ranking goods-domain made
//! written back, and the awards and refusals counted as they are written.

use super::SqlStore;
use super::event_log::append;
use super::queries::begin_write;
use crate::rows::{DrawRow, EntryRow, NumberRow, SizeDrawRow, column, opt_sku, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use diesel::QueryableByName;
use goods_domain::draw::{Entrant, Ranked};
use goods_domain::ports::{DrawRepository, EnterError, Entered, NewEntry};
use goods_domain::{
    Draw, DrawSeed, DropId, EntriesRoot, Entry, Fact, InfraError, OrderId, RankKey, SizeCutoff,
    Sku, UserId,
};
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;

/// Rows one ranking or award statement writes at most.
const CHUNK: usize = 500;

/// An entry with its order's status (`NULL` without an order).
const ENTRY_SELECT: &str = "SELECT e.drop_id, e.user_id, e.entered_at, e.entry_token, e.sku, e.draw_rank, \
     e.rank_key, e.order_id, e.promoted_at, e.void_reason, o.status AS order_status \
     FROM draw_entries e LEFT JOIN orders o ON o.id = e.order_id WHERE e.drop_id = ";

#[derive(Debug, QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    rank_key: String,
}

/// The draw has begun: the batch is refused and rolls back.
#[derive(Debug)]
struct Closed;

impl From<Closed> for EnterError {
    fn from(Closed: Closed) -> Self {
        EnterError::EntriesClosed
    }
}

/// An entrant: its buyer and size.
#[derive(Debug, QueryableByName)]
struct EntrantRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    user_id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    sku: Option<String>,
}

fn user_id(raw: i64) -> Result<UserId, InfraError> {
    UserId::parse(raw).map_err(|e| InfraError::new("corrupt entry", e))
}

/// `q` followed by the condition that an entry (or size row) is of `sku`: `IS NULL` for a drop
/// without sizes.
fn of_size(q: Sql, column: &str, sku: Option<&Sku>) -> Sql {
    match sku {
        None => q.sql(" AND ").sql(column).sql(" IS NULL"),
        Some(sku) => q
            .sql(" AND ")
            .sql(column)
            .sql(" = ")
            .bind(Bind::Text(sku.as_str().to_owned())),
    }
}

#[async_trait]
impl<B: Backend> DrawRepository for SqlStore<B> {
    async fn enter(&self, drop: DropId, entries: &[NewEntry]) -> Result<Vec<Entered>, EnterError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        // A random token per batch, written with its rows: a row that carries it was created
        // by this batch, whatever the clocks say.
        let mut token = [0_u8; 8];
        getrandom::fill(&mut token).map_err(|e| InfraError::msg(format!("entry token: {e}")))?;
        let token = i64::from_le_bytes(token);
        let rows = self
            .write_tx::<_, _, EnterError, _>(
                "enter draw",
                |_| false,
                |c, _| Box::pin(write_entries::<B>(c, drop, entries, token)),
            )
            .await?;
        // Each buyer's first entry in the batch created the row if the row carries the batch's
        // token; a buyer's later entries, or one whose row was there already, did not.
        let by_user: HashMap<i64, EntryRow> = rows.into_iter().map(|r| (r.user_id, r)).collect();
        let mut seen = HashSet::new();
        entries
            .iter()
            .map(|asked| {
                let row = by_user.get(&asked.user_id.get()).cloned().ok_or_else(|| {
                    InfraError::msg("an entry was not read back after its insert")
                })?;
                let first = seen.insert(asked.user_id);
                let created = first && row.entry_token == token;
                Ok(Entered {
                    entry: row.into_domain()?,
                    created,
                })
            })
            .collect()
    }

    async fn entry(&self, drop: DropId, user: UserId) -> Result<Option<Entry>, InfraError> {
        let rows: Vec<EntryRow> = self
            .read(
                "entry",
                Sql::new(ENTRY_SELECT)
                    .bind(Bind::BigInt(drop.get()))
                    .sql(" AND e.user_id = ")
                    .bind(Bind::BigInt(user.get())),
            )
            .await?;
        rows.into_iter()
            .next()
            .map(EntryRow::into_domain)
            .transpose()
    }

    async fn draw(&self, drop: DropId) -> Result<Option<Draw>, InfraError> {
        let rows: Vec<DrawRow> = self
            .read(
                "draw",
                Sql::new(
                    "SELECT drop_id, seed, sealed_seed, seal_key_id, commitment, entries_root, \
                     drawn_at, cutoff, entry_count, winner_count, promoted_count, voided_count \
                     FROM drop_draws WHERE drop_id = ",
                )
                .bind(Bind::BigInt(drop.get())),
            )
            .await?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        // A drop in sizes keeps each size's draw beside its units; one without has no row.
        let sizes: Vec<SizeDrawRow> = self
            .read(
                "size draws",
                Sql::new(
                    "SELECT sku, draw_winners, draw_voided, draw_cutoff FROM drop_variants \
                     WHERE drop_id = ",
                )
                .bind(Bind::BigInt(drop.get()))
                .sql(" ORDER BY position"),
            )
            .await?;
        let sizes = sizes
            .into_iter()
            .map(SizeDrawRow::into_domain)
            .collect::<Result<_, _>>()?;
        row.into_domain(sizes).map(Some)
    }

    async fn close_entries(&self, drop: DropId, at: OffsetDateTime) -> Result<(), InfraError> {
        // Closing the entries waits for the batches being written (each holds the draw's row
        // for its count); from its commit on, none commits.
        self.write(
            "close entries",
            Sql::new("UPDATE drop_draws SET entries_closed_at = ")
                .bind(Bind::Timestamp(to_db(at)))
                .sql(" WHERE drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND entries_closed_at IS NULL"),
        )
        .await?;
        Ok(())
    }

    async fn entrants(&self, drop: DropId) -> Result<Vec<Entrant>, InfraError> {
        let rows: Vec<EntrantRow> = self
            .read(
                "entrants",
                Sql::new("SELECT user_id, sku FROM draw_entries WHERE drop_id = ")
                    .bind(Bind::BigInt(drop.get()))
                    .sql(" ORDER BY user_id"),
            )
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(Entrant {
                    user_id: user_id(r.user_id)?,
                    sku: opt_sku(r.sku)?,
                })
            })
            .collect()
    }

    async fn publish_root(&self, drop: DropId, root: &EntriesRoot) -> Result<(), InfraError> {
        self.write(
            "publish entries root",
            Sql::new("UPDATE drop_draws SET entries_root = ")
                .bind(Bind::Text(root.to_hex()))
                .sql(" WHERE drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND entries_root IS NULL AND entries_closed_at IS NOT NULL"),
        )
        .await?;
        Ok(())
    }

    async fn rank_entries(&self, drop: DropId, ranked: &[Ranked]) -> Result<(), InfraError> {
        for chunk in ranked.chunks(CHUNK) {
            let by_user = |q: Sql, value: &dyn Fn(&Ranked) -> Bind| {
                q.sql("CASE user_id")
                    .each(chunk, |q, r| {
                        q.sql(" WHEN ")
                            .bind(Bind::BigInt(r.user_id.get()))
                            .sql(" THEN ")
                            .bind(value(r))
                    })
                    .sql(" END")
            };
            let q = by_user(
                Sql::for_rows(chunk.len()).sql("UPDATE draw_entries SET draw_rank = "),
                &|r| Bind::Integer(column(r.rank)),
            )
            .sql(", rank_key = ");
            let q = by_user(q, &|r| Bind::Text(r.rank_key.to_hex()))
                .sql(" WHERE drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND user_id IN (")
                .list(chunk, |q, r| q.bind(Bind::BigInt(r.user_id.get())))
                .sql(")");
            self.write("rank entries", q).await?;
        }
        Ok(())
    }

    async fn waiting(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        limit: u32,
    ) -> Result<Vec<UserId>, InfraError> {
        let q = Sql::new("SELECT user_id AS n FROM draw_entries WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get()));
        let rows: Vec<NumberRow> = self
            .read(
                "waiting entries",
                of_size(q, "sku", sku.as_ref())
                    .sql(
                        " AND draw_rank IS NOT NULL AND order_id IS NULL AND void_reason IS NULL \
                         ORDER BY draw_rank LIMIT ",
                    )
                    .bind(Bind::Integer(column(limit))),
            )
            .await?;
        rows.into_iter().map(|r| user_id(r.n)).collect()
    }

    async fn award(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        awards: &[(UserId, OrderId)],
        promoted: bool,
        at: OffsetDateTime,
    ) -> Result<(), InfraError> {
        for chunk in awards.chunks(CHUNK) {
            let sku = sku.clone();
            self.write_tx::<_, InfraError, InfraError, _>(
                "award entries",
                |_| false,
                |c, _| {
                    let sku = sku.clone();
                    Box::pin(async move {
                        begin_write::<B>(c).await?;
                        // The entries this award gives a unit to (not those awarded before),
                        // locked: their events are written with the award.
                        let open: Vec<NumberRow> = c
                            .rows(
                                Sql::for_rows(chunk.len())
                                    .sql("SELECT user_id AS n FROM draw_entries WHERE drop_id = ")
                                    .bind(Bind::BigInt(drop.get()))
                                    .sql(" AND order_id IS NULL AND user_id IN (")
                                    .list(chunk, |q, (user, _)| q.bind(Bind::BigInt(user.get())))
                                    .sql(")")
                                    .sql(B::DIALECT.locking_read),
                            )
                            .await?;
                        let open: std::collections::HashSet<i64> =
                            open.into_iter().map(|r| r.n).collect();
                        let facts: Vec<Fact> = chunk
                            .iter()
                            .filter(|(user, _)| open.contains(&user.get()))
                            .map(|&(user, order)| Fact::EntryWon {
                                drop,
                                user,
                                sku: sku.clone(),
                                order,
                                promoted,
                            })
                            .collect();
                        let q = Sql::for_rows(chunk.len())
                            .sql("UPDATE draw_entries SET promoted = ")
                            .bind(Bind::Bool(promoted))
                            .sql(", promoted_at = ")
                            .bind(Bind::OptTimestamp(promoted.then(|| to_db(at))))
                            .sql(", order_id = CASE user_id")
                            .each(chunk, |q, (user, order)| {
                                q.sql(" WHEN ")
                                    .bind(Bind::BigInt(user.get()))
                                    .sql(" THEN ")
                                    .bind(Bind::BigInt(order.get()))
                            })
                            .sql(" END WHERE drop_id = ")
                            .bind(Bind::BigInt(drop.get()))
                            .sql(" AND order_id IS NULL AND user_id IN (")
                            .list(chunk, |q, (user, _)| q.bind(Bind::BigInt(user.get())))
                            .sql(")");
                        let awarded = i64::try_from(c.run(q).await?).unwrap_or(i64::MAX);
                        c.run(
                            Sql::new("UPDATE drop_draws SET winner_count = winner_count + ")
                                .bind(Bind::BigInt(awarded))
                                .sql(", promoted_count = promoted_count + ")
                                .bind(Bind::BigInt(if promoted { awarded } else { 0 }))
                                .sql(" WHERE drop_id = ")
                                .bind(Bind::BigInt(drop.get())),
                        )
                        .await?;
                        if let Some(sku) = &sku {
                            count_in_size::<B>(c, drop, sku, "draw_winners", awarded).await?;
                        }
                        append::<B>(c, &facts, at).await?;
                        Ok(())
                    })
                },
            )
            .await?;
        }
        Ok(())
    }

    async fn void(
        &self,
        drop: DropId,
        sku: Option<Sku>,
        user: UserId,
        reason: &str,
        at: OffsetDateTime,
    ) -> Result<bool, InfraError> {
        let reason = reason.to_owned();
        self.write_tx::<_, InfraError, InfraError, _>("void entry", |_| false, |c, _| {
            let reason = reason.clone();
            let sku = sku.clone();
            Box::pin(async move {
                begin_write::<B>(c).await?;
                let voided = c
                    .run(
                        Sql::new("UPDATE draw_entries SET void_reason = ")
                            .bind(Bind::Text(reason.clone()))
                            .sql(" WHERE drop_id = ")
                            .bind(Bind::BigInt(drop.get()))
                            .sql(" AND user_id = ")
                            .bind(Bind::BigInt(user.get()))
                            .sql(" AND order_id IS NULL AND void_reason IS NULL"),
                    )
                    .await?;
                if voided == 1 {
                    c.run(
                        Sql::new("UPDATE drop_draws SET voided_count = voided_count + 1 WHERE drop_id = ")
                            .bind(Bind::BigInt(drop.get())),
                    )
                    .await?;
                    if let Some(sku) = &sku {
                        count_in_size::<B>(c, drop, sku, "draw_voided", 1).await?;
                    }
                    let voided = Fact::EntryVoided {
                        drop,
                        user,
                        sku,
                        reason,
                    };
                    append::<B>(c, &[voided], at).await?;
                }
                Ok(voided == 1)
            })
        })
        .await
    }

    async fn last_awarded(
        &self,
        drop: DropId,
        sku: Option<Sku>,
    ) -> Result<Option<RankKey>, InfraError> {
        let q = Sql::new("SELECT rank_key FROM draw_entries WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get()));
        let rows: Vec<KeyRow> = self
            .read(
                "last awarded entry",
                of_size(q, "sku", sku.as_ref())
                    .sql(" AND order_id IS NOT NULL ORDER BY draw_rank DESC LIMIT 1"),
            )
            .await?;
        rows.into_iter()
            .next()
            .map(|r| {
                RankKey::from_hex(&r.rank_key).map_err(|e| InfraError::new("corrupt rank key", e))
            })
            .transpose()
    }

    async fn finish_draw(
        &self,
        drop: DropId,
        at: OffsetDateTime,
        seed: &DrawSeed,
        cutoffs: &[SizeCutoff],
    ) -> Result<bool, InfraError> {
        let seed = *seed;
        // A drop without sizes has one cutoff, its own; a drop in sizes one per size.
        let cutoff = cutoffs
            .iter()
            .find(|c| c.sku.is_none())
            .and_then(|c| c.cutoff);
        let size_cutoffs: Vec<(Sku, Option<RankKey>)> = cutoffs
            .iter()
            .filter_map(|c| c.sku.clone().map(|sku| (sku, c.cutoff)))
            .collect();
        self.write_tx::<_, InfraError, InfraError, _>(
            "finish draw",
            |_| false,
            move |c, _| {
                let size_cutoffs = size_cutoffs.clone();
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    let q = Sql::new("UPDATE drop_draws SET drawn_at = ")
                        .bind(Bind::Timestamp(to_db(at)))
                        .sql(", seed = ")
                        .bind(Bind::Text(seed.to_hex()))
                        .sql(", cutoff = ");
                    let q = match cutoff {
                        Some(cutoff) => q.bind(Bind::Text(cutoff.to_hex())),
                        None => q.sql("NULL"),
                    };
                    let changed = c
                        .run(
                            q.sql(" WHERE drop_id = ")
                                .bind(Bind::BigInt(drop.get()))
                                .sql(" AND drawn_at IS NULL"),
                        )
                        .await?;
                    if changed != 1 {
                        return Ok(false);
                    }
                    for (sku, size_cutoff) in &size_cutoffs {
                        let Some(size_cutoff) = size_cutoff else {
                            continue;
                        };
                        c.run(
                            Sql::new("UPDATE drop_variants SET draw_cutoff = ")
                                .bind(Bind::Text(size_cutoff.to_hex()))
                                .sql(" WHERE drop_id = ")
                                .bind(Bind::BigInt(drop.get()))
                                .sql(" AND sku = ")
                                .bind(Bind::Text(sku.as_str().to_owned())),
                        )
                        .await?;
                    }
                    let rows: Vec<DrawnRow> = c
                        .rows(
                            Sql::new(
                                "SELECT entries_root, entry_count, winner_count FROM drop_draws \
                             WHERE drop_id = ",
                            )
                            .bind(Bind::BigInt(drop.get())),
                        )
                        .await?;
                    let row = rows
                        .into_iter()
                        .next()
                        .ok_or(TxError::Db(diesel::result::Error::NotFound))?;
                    let root = row
                        .entries_root
                        .map(|r| EntriesRoot::from_hex(&r))
                        .transpose()
                        .map_err(|e| InfraError::new("corrupt entries root", e))?;
                    let fact = Fact::DrawCompleted {
                        drop,
                        seed,
                        cutoff,
                        size_cutoffs,
                        root,
                        entries: u32::try_from(row.entry_count).unwrap_or(0),
                        winners: u32::try_from(row.winner_count).unwrap_or(0),
                    };
                    append::<B>(c, &[fact], at).await?;
                    Ok(true)
                })
            },
        )
        .await
    }
}

/// The entries' transaction: the draw's row locked (refused once entries are closed), the
/// batch inserted in one statement skipping buyers who entered before, the batch's rows read
/// back, and the draw's entry count grown by the rows this batch created.
async fn write_entries<B: Backend>(
    c: &mut B::Conn,
    drop: DropId,
    entries: &[NewEntry],
    token: i64,
) -> Result<Vec<EntryRow>, TxError<Closed>> {
    begin_write::<B>(c).await?;
    // A no-op update takes the draw's row lock first: the count below cannot deadlock with
    // another instance's batch, and the close waits for this batch.
    let open = c
        .run(
            Sql::new("UPDATE drop_draws SET entry_count = entry_count WHERE drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND entries_closed_at IS NULL"),
        )
        .await?;
    if open == 0 {
        return Err(TxError::Refused(Closed));
    }
    let mut firsts = HashSet::new();
    let batch: Vec<&NewEntry> = entries
        .iter()
        .filter(|e| firsts.insert(e.user_id))
        .collect();
    c.run(
        Sql::for_rows(batch.len())
            .sql(B::DIALECT.insert_ignore)
            .sql(" draw_entries (drop_id, user_id, sku, entered_at, entry_token) VALUES ")
            .list(&batch, |q, e| {
                let q = q
                    .sql("(")
                    .bind(Bind::BigInt(drop.get()))
                    .sql(", ")
                    .bind(Bind::BigInt(e.user_id.get()))
                    .sql(", ");
                let q = match &e.sku {
                    Some(sku) => q.bind(Bind::Text(sku.as_str().to_owned())),
                    None => q.sql("NULL"),
                };
                q.sql(", ")
                    .bind(Bind::Timestamp(to_db(e.at)))
                    .sql(", ")
                    .bind(Bind::BigInt(token))
                    .sql(")")
            }),
    )
    .await?;
    let rows: Vec<EntryRow> = c
        .rows(
            Sql::for_rows(batch.len())
                .sql(ENTRY_SELECT)
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND e.user_id IN (")
                .list(&batch, |q, e| q.bind(Bind::BigInt(e.user_id.get())))
                .sql(")"),
        )
        .await?;
    let created = rows.iter().filter(|r| r.entry_token == token).count();
    c.run(
        Sql::new("UPDATE drop_draws SET entry_count = entry_count + ")
            .bind(Bind::BigInt(i64::try_from(created).unwrap_or(i64::MAX)))
            .sql(" WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get())),
    )
    .await?;
    Ok(rows)
}

/// Adds `n` to a size's draw count `column` (`draw_winners`, `draw_voided`), in the
/// transaction that awarded or voided its entries.
async fn count_in_size<B: Backend>(
    c: &mut B::Conn,
    drop: DropId,
    sku: &Sku,
    column: &str,
    n: i64,
) -> Result<(), diesel::result::Error> {
    if n == 0 {
        return Ok(());
    }
    c.run(
        Sql::new("UPDATE drop_variants SET ")
            .sql(column)
            .sql(" = ")
            .sql(column)
            .sql(" + ")
            .bind(Bind::BigInt(n))
            .sql(" WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get()))
            .sql(" AND sku = ")
            .bind(Bind::Text(sku.as_str().to_owned())),
    )
    .await?;
    Ok(())
}

/// A drawn draw's root and counts, as its transaction left them.
#[derive(Debug, diesel::QueryableByName)]
struct DrawnRow {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    entries_root: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    entry_count: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    winner_count: i32,
}
