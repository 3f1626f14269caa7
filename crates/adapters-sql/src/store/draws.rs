//! Draw drops: entries written in batches (one row per buyer, no hot row), the ranking made by
//! goods-domain's `draw::rank` over the entries read back, and the awards.

use super::SqlStore;
use super::queries::{begin_write, number};
use crate::rows::{DrawCountsRow, DrawRow, EntryRow, UserRow, column, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use goods_domain::draw::{rank, winning_cutoff};
use goods_domain::ports::{DrawRepository, EnterError, Entered, NewEntry};
use goods_domain::{
    Draw, DrawCounts, DrawSeed, DropId, Entry, InfraError, OrderId, RankKey, UserId,
};
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;

/// Rows one ranking or award statement writes at most.
const CHUNK: usize = 500;

const ENTRY_COLUMNS: &str =
    "drop_id, user_id, entered_at, entry_token, draw_rank, rank_key, order_id, promoted";

/// The draw has begun: the batch is refused and rolls back.
#[derive(Debug)]
struct Closed;

impl From<Closed> for EnterError {
    fn from(Closed: Closed) -> Self {
        EnterError::EntriesClosed
    }
}

fn count(raw: i64, what: &str) -> Result<u32, InfraError> {
    u32::try_from(raw).map_err(|_| InfraError::msg(format!("corrupt {what}: {raw}")))
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

    async fn entry(&self, drop: DropId, user: UserId) -> Result<Option<(Entry, u32)>, InfraError> {
        let rows: Vec<EntryRow> = self
            .read(
                "entry",
                Sql::new(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE drop_id = "
                ))
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND user_id = ")
                .bind(Bind::BigInt(user.get())),
            )
            .await?;
        let Some(entry) = rows
            .into_iter()
            .next()
            .map(EntryRow::into_domain)
            .transpose()?
        else {
            return Ok(None);
        };
        let ahead = match (entry.ranked, entry.order_id) {
            (Some((rank, _)), None) => {
                // Waiting entries ranked before it: past the winners (ranks are 1..n), less the
                // ones promoted since. Counting the promoted ones keeps this cheap however long
                // the waitlist is.
                let mut conn = self.conn().await?;
                let limited = number::<B>(
                    &mut conn,
                    Sql::new("SELECT limited_quantity AS n FROM limited_drops WHERE id = ")
                        .bind(Bind::BigInt(drop.get())),
                )
                .await
                .map_err(|e| crate::db_failure("entry position", e, B::unavailable))?;
                let limited = count(limited, "entry position")?;
                if rank <= limited {
                    0
                } else {
                    let n = number::<B>(
                        &mut conn,
                        Sql::new("SELECT COUNT(*) AS n FROM draw_entries WHERE drop_id = ")
                            .bind(Bind::BigInt(drop.get()))
                            .sql(" AND promoted = ")
                            .bind(Bind::Bool(true))
                            .sql(" AND draw_rank > ")
                            .bind(Bind::Integer(column(limited)))
                            .sql(" AND draw_rank < ")
                            .bind(Bind::Integer(column(rank))),
                    )
                    .await
                    .map_err(|e| crate::db_failure("entry position", e, B::unavailable))?;
                    let promoted = count(n, "entry position")?;
                    (rank - limited - 1).saturating_sub(promoted)
                }
            }
            _ => 0,
        };
        Ok(Some((entry, ahead)))
    }

    async fn draw(&self, drop: DropId) -> Result<Option<Draw>, InfraError> {
        let rows: Vec<DrawRow> = self
            .read(
                "draw",
                Sql::new(
                    "SELECT drop_id, seed, commitment, drawn_at, cutoff FROM drop_draws \
                     WHERE drop_id = ",
                )
                .bind(Bind::BigInt(drop.get())),
            )
            .await?;
        rows.into_iter()
            .next()
            .map(DrawRow::into_domain)
            .transpose()
    }

    async fn draw_counts(&self, drop: DropId) -> Result<DrawCounts, InfraError> {
        let rows: Vec<DrawCountsRow> = self
            .read(
                "draw counts",
                Sql::new(
                    "SELECT COUNT(*) AS entries, COUNT(order_id) AS winners, \
                     COUNT(CASE WHEN promoted THEN 1 END) AS promoted \
                     FROM draw_entries WHERE drop_id = ",
                )
                .bind(Bind::BigInt(drop.get())),
            )
            .await?;
        let row = rows
            .into_iter()
            .next()
            .ok_or_else(|| InfraError::msg("draw counts read nothing"))?;
        Ok(DrawCounts {
            entries: count(row.entries, "entry count")?,
            winners: count(row.winners, "winner count")?,
            promoted: count(row.promoted, "promotion count")?,
        })
    }

    async fn rank_entries(
        &self,
        drop: DropId,
        seed: &DrawSeed,
        limited: u32,
        at: OffsetDateTime,
    ) -> Result<Option<RankKey>, InfraError> {
        // Closing the entries waits for the batches being written (they read the draw's row
        // with a shared lock); from its commit on, none commits.
        self.write(
            "close entries",
            Sql::new("UPDATE drop_draws SET entries_closed_at = ")
                .bind(Bind::Timestamp(to_db(at)))
                .sql(" WHERE drop_id = ")
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND entries_closed_at IS NULL"),
        )
        .await?;
        let users: Vec<UserRow> = self
            .read(
                "entrants",
                Sql::new("SELECT user_id FROM draw_entries WHERE drop_id = ")
                    .bind(Bind::BigInt(drop.get())),
            )
            .await?;
        let users = users
            .into_iter()
            .map(|r| UserId::parse(r.user_id).map_err(|e| InfraError::new("corrupt entry", e)))
            .collect::<Result<Vec<_>, _>>()?;
        let ranked = rank(seed, &users);
        for chunk in ranked.chunks(CHUNK) {
            let by_user = |q: Sql, value: &dyn Fn(&goods_domain::draw::Ranked) -> Bind| {
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
        Ok(winning_cutoff(&ranked, limited))
    }

    async fn unawarded(
        &self,
        drop: DropId,
        after: u32,
        up_to: Option<u32>,
        limit: u32,
    ) -> Result<Vec<UserId>, InfraError> {
        let mut q = Sql::new("SELECT user_id FROM draw_entries WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get()))
            .sql(" AND order_id IS NULL AND draw_rank > ")
            .bind(Bind::Integer(column(after)));
        if let Some(up_to) = up_to {
            q = q
                .sql(" AND draw_rank <= ")
                .bind(Bind::Integer(column(up_to)));
        }
        let rows: Vec<UserRow> = self
            .read(
                "unawarded entries",
                q.sql(" ORDER BY draw_rank LIMIT ")
                    .bind(Bind::Integer(column(limit))),
            )
            .await?;
        rows.into_iter()
            .map(|r| UserId::parse(r.user_id).map_err(|e| InfraError::new("corrupt entry", e)))
            .collect()
    }

    async fn award(
        &self,
        drop: DropId,
        awards: &[(UserId, OrderId)],
        promoted: bool,
    ) -> Result<(), InfraError> {
        for chunk in awards.chunks(CHUNK) {
            let q = Sql::for_rows(chunk.len())
                .sql("UPDATE draw_entries SET promoted = ")
                .bind(Bind::Bool(promoted))
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
            self.write("award entries", q).await?;
        }
        Ok(())
    }

    async fn finish_draw(
        &self,
        drop: DropId,
        at: OffsetDateTime,
        cutoff: Option<RankKey>,
    ) -> Result<bool, InfraError> {
        let q = Sql::new("UPDATE drop_draws SET drawn_at = ")
            .bind(Bind::Timestamp(to_db(at)))
            .sql(", cutoff = ");
        let q = match cutoff {
            Some(cutoff) => q.bind(Bind::Text(cutoff.to_hex())),
            None => q.sql("NULL"),
        };
        let changed = self
            .write(
                "finish draw",
                q.sql(" WHERE drop_id = ")
                    .bind(Bind::BigInt(drop.get()))
                    .sql(" AND drawn_at IS NULL"),
            )
            .await?;
        Ok(changed == 1)
    }
}

/// The entries' transaction: the draw's row read with a shared lock (refused once the draw has
/// begun), the batch inserted in one statement skipping buyers who entered before, and the
/// batch's rows read back.
async fn write_entries<B: Backend>(
    c: &mut B::Conn,
    drop: DropId,
    entries: &[NewEntry],
    token: i64,
) -> Result<Vec<EntryRow>, TxError<Closed>> {
    begin_write::<B>(c).await?;
    let open = number::<B>(
        c,
        Sql::new("SELECT COUNT(*) AS n FROM drop_draws WHERE drop_id = ")
            .bind(Bind::BigInt(drop.get()))
            .sql(" AND entries_closed_at IS NULL")
            .sql(B::DIALECT.locking_read),
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
            .sql(" draw_entries (drop_id, user_id, entered_at, entry_token) VALUES ")
            .list(&batch, |q, e| {
                q.sql("(")
                    .bind(Bind::BigInt(drop.get()))
                    .sql(", ")
                    .bind(Bind::BigInt(e.user_id.get()))
                    .sql(", ")
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
                .sql(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE drop_id = "
                ))
                .bind(Bind::BigInt(drop.get()))
                .sql(" AND user_id IN (")
                .list(&batch, |q, e| q.bind(Bind::BigInt(e.user_id.get())))
                .sql(")"),
        )
        .await?;
    Ok(rows)
}
