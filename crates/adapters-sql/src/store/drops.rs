//! Limited drops: creation with its checks against the product, reads, pause and close.

use super::event_log::append;
use super::queries::{DROP_COLUMNS, ORDER_COLUMNS, begin_write, last_insert_id, number};
use super::{SqlStore, products};
use crate::rows::{
    DropRow, DropSizeRow, NumberRow, OrderRow, SizeUnitsRow, column, from_db, to_db,
};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{DropRepository, GateSeed, HeldOrder};
use goods_domain::{
    CreateDropError, DrawToSeal, DropId, Fact, InfraError, LimitedDrop, NewLimitedDrop,
    OrderStatus, Quantity, SealError, Size, Sizes, Sku,
};
use std::collections::HashMap;
use time::OffsetDateTime;

impl<B: Backend> SqlStore<B> {
    /// The drops `q` selects, with their sizes (a second statement: a drop's sizes are written
    /// with it, in its creation's transaction, and never change, so a drop row read means its
    /// sizes are there to read).
    async fn drops_where(
        &self,
        what: &'static str,
        q: Sql,
    ) -> Result<Vec<LimitedDrop>, InfraError> {
        let rows: Vec<DropRow> = self.read(what, q).await?;
        let sizes = match sizes_of(&rows) {
            Some(q) => self.read("drop sizes", q).await?,
            None => Vec::new(),
        };
        with_sizes(rows, sizes)
    }
}

/// The statement reading the sizes of `rows`' drops, in each seller's order; `None` without a
/// drop to read them for.
fn sizes_of(rows: &[DropRow]) -> Option<Sql> {
    (!rows.is_empty()).then(|| {
        Sql::for_rows(rows.len())
            .sql(
                "SELECT dv.drop_id, dv.sku, dv.limited_quantity, pv.label FROM drop_variants dv \
                 JOIN limited_drops d ON d.id = dv.drop_id \
                 JOIN product_variants pv ON pv.product_id = d.product_id AND pv.sku = dv.sku \
                 WHERE dv.drop_id IN (",
            )
            .list(rows, |q, row| q.bind(Bind::BigInt(row.id)))
            .sql(") ORDER BY dv.drop_id, dv.position")
    })
}

/// The drops of `rows`, each with its `sizes` (a drop with none has no sizes: one size of all
/// its units).
fn with_sizes(rows: Vec<DropRow>, sizes: Vec<DropSizeRow>) -> Result<Vec<LimitedDrop>, InfraError> {
    let mut by_drop: HashMap<i64, Vec<Size>> = HashMap::new();
    for size in sizes {
        let drop = size.drop_id;
        by_drop.entry(drop).or_default().push(size.into_domain()?);
    }
    rows.into_iter()
        .map(|row| {
            let sizes = by_drop.remove(&row.id).unwrap_or_default();
            row.into_domain(sizes)
        })
        .collect()
}

/// One multi-row INSERT of a new drop's sizes, each at its place in the seller's list; `None`
/// for a drop without sizes, which has no row.
fn insert_sizes(drop: i64, sizes: &Sizes) -> Option<Sql> {
    let sized: Vec<(usize, &Sku, Quantity)> = sizes
        .iter()
        .enumerate()
        .filter_map(|(position, size)| size.sku.as_ref().map(|sku| (position, sku, size.limited)))
        .collect();
    (!sized.is_empty()).then(|| {
        Sql::for_rows(sized.len())
            .sql("INSERT INTO drop_variants (drop_id, sku, position, limited_quantity) VALUES ")
            .list(sized, |q, (position, sku, limited)| {
                q.sql("(")
                    .bind(Bind::BigInt(drop))
                    .sql(", ")
                    .bind(Bind::Text(sku.as_str().to_owned()))
                    .sql(", ")
                    .bind(Bind::Integer(i32::try_from(position).unwrap_or(i32::MAX)))
                    .sql(", ")
                    .bind(Bind::Integer(column(limited.get())))
                    .sql(")")
            })
    })
}

/// [`SqlStore::drops_where`] in a transaction.
async fn domain_drops<E>(
    c: &mut impl Exec,
    rows: Vec<DropRow>,
) -> Result<Vec<LimitedDrop>, TxError<E>> {
    let sizes = match sizes_of(&rows) {
        Some(q) => c.rows(q).await?,
        None => Vec::new(),
    };
    Ok(with_sizes(rows, sizes)?)
}

/// Drop ids per statement of [`DropRepository::get_many`].
pub const GET_MANY_CHUNK: usize = 500;

fn select_drops() -> Sql {
    Sql::new(&format!("SELECT {DROP_COLUMNS} FROM limited_drops"))
}

#[async_trait]
impl<B: Backend> DropRepository for SqlStore<B> {
    async fn create(
        &self,
        drop: &NewLimitedDrop,
        draw: Option<DrawToSeal>,
        now: OffsetDateTime,
        seller_quota: Option<u32>,
    ) -> Result<LimitedDrop, CreateDropError> {
        let product = drop.product_id.get();
        let instant = now;
        let now = to_db(now);
        if drop.mode.is_draw() != draw.is_some() {
            return Err(InfraError::msg(
                "a draw drop is created with its seed, and only a draw drop",
            )
            .into());
        }
        let draw = draw.as_ref();
        let at = now;
        self
            .write_tx::<_, _, CreateDropError, _>("create drop", |_| false, move |c, _| {
                Box::pin(async move {
                    // A no-op update of the stock row takes its row lock (MySQL) or the write
                    // lock (SQLite) first, so two creations for one product run one after the
                    // other and cannot both pass the active-drop check.
                    let found = c
                        .run(
                            Sql::new("UPDATE stocks SET quantity = quantity WHERE product_id = ")
                                .bind(Bind::BigInt(product)),
                        )
                        .await?;
                    if found == 0 {
                        return Err(TxError::Refused(CreateDropError::ProductNotFound));
                    }
                    let stock = number::<B>(
                        c,
                        Sql::new("SELECT CAST(quantity AS SIGNED) AS n FROM stocks WHERE product_id = ")
                            .bind(Bind::BigInt(product)),
                    )
                    .await?;
                    let variants = products::variants(c.rows(products::variants_of(product)).await?)?;
                    let stock = u32::try_from(stock).unwrap_or(0);
                    if let Err(invalid) = drop.check_product(stock, &variants) {
                        return Err(TxError::Refused(CreateDropError::Invalid(vec![invalid])));
                    }
                    // Narrowed to the drops whose closeAt is ahead (an ended drop never
                    // comes back); which of them have not ended is the domain's rule.
                    let product_drops: Vec<DropRow> = c
                        .rows(
                            Sql::new(&format!(
                                "SELECT {DROP_COLUMNS} FROM limited_drops WHERE product_id = "
                            ))
                            .bind(Bind::BigInt(product))
                            .sql(" AND close_at > ")
                            .bind(Bind::Timestamp(now)),
                        )
                        .await?;
                    goods_domain::drop::check_one_active_drop(&domain_drops(c, product_drops).await?, instant)
                        .map_err(TxError::Refused)?;
                    if seller_quota.is_some() {
                        let owner = number::<B>(
                            c,
                            Sql::new("SELECT COALESCE(owner_id, 0) AS n FROM products WHERE id = ")
                                .bind(Bind::BigInt(product)),
                        )
                        .await?;
                        if owner > 0 {
                            // The owner's products, locked in id order: two creations by one
                            // seller count one after the other.
                            let _: Vec<NumberRow> = c
                                .rows(
                                    Sql::new("SELECT id AS n FROM products WHERE owner_id = ")
                                        .bind(Bind::BigInt(owner))
                                        .sql(&format!(" ORDER BY id{}", B::DIALECT.exclusive_read)),
                                )
                                .await?;
                            let seller_drops: Vec<DropRow> = c
                                .rows(
                                    Sql::new(&format!(
                                        "SELECT {DROP_COLUMNS} FROM limited_drops WHERE product_id IN \
                                         (SELECT id FROM products WHERE owner_id = "
                                    ))
                                    .bind(Bind::BigInt(owner))
                                    .sql(") AND close_at > ")
                                    .bind(Bind::Timestamp(now)),
                                )
                                .await?;
                            goods_domain::drop::check_seller_quota(
                                &domain_drops(c, seller_drops).await?,
                                instant,
                                seller_quota,
                            )
                            .map_err(TxError::Refused)?;
                        }
                    }
                    let insert = Sql::new(
                            "INSERT INTO limited_drops (product_id, open_at, close_at, \
                             limited_quantity, per_user_limit, sold_quantity, price_minor, \
                             currency, mode, entry_close_at, payment_window_s) VALUES (",
                        )
                        .bind(Bind::BigInt(product))
                        .sql(", ")
                        .bind(Bind::Timestamp(to_db(drop.window.open_at())))
                        .sql(", ")
                        .bind(Bind::Timestamp(to_db(drop.window.close_at())))
                        .sql(", ")
                        .bind(Bind::Integer(column(drop.limited_quantity.get())))
                        .sql(", ")
                        .bind(Bind::Integer(column(drop.per_user_limit.get())))
                        .sql(", 0, ")
                        .bind(Bind::BigInt(
                            i64::try_from(drop.price.minor()).unwrap_or(i64::MAX),
                        ))
                        .sql(", ")
                        .bind(Bind::Text(drop.price.currency().as_str().to_owned()))
                        .sql(", ")
                        .bind(Bind::Text(drop.mode.as_str().to_owned()))
                        .sql(", ")
                        .bind(Bind::OptTimestamp(drop.mode.entry_close_at().map(to_db)))
                        .sql(", ");
                    // NULL: the service's default window.
                    let insert = match drop.payment_window {
                        Some(w) => insert.bind(Bind::Integer(
                            i32::try_from(w.as_seconds()).unwrap_or(i32::MAX),
                        )),
                        None => insert.sql("NULL"),
                    };
                    c.run(insert.sql(")"))
                    .await?;
                    let id = last_insert_id::<B>(c).await?;
                    if let Some(insert) = insert_sizes(id, &drop.sizes) {
                        c.run(insert).await?;
                    }
                    if let Some(draw) = draw {
                        // Sealed now that the drop has its id, which the seal binds.
                        let sealed = draw
                            .seal(DropId::parse(id).map_err(|e| InfraError::new("drop id", e))?)
                            .map_err(|e| {
                                TxError::Refused(match e {
                                    SealError::NotConfigured => CreateDropError::DrawsNotConfigured,
                                    SealError::Infra(e) => CreateDropError::Infra(e),
                                })
                            })?;
                        c.run(
                            Sql::new(
                                "INSERT INTO drop_draws (drop_id, sealed_seed, seal_key_id, commitment) VALUES (",
                            )
                            .bind(Bind::BigInt(id))
                            .sql(", ")
                            .bind(Bind::Text(hex::encode(&sealed.sealed)))
                            .sql(", ")
                            .bind(Bind::Text(sealed.key_id.clone()))
                            .sql(", ")
                            .bind(Bind::Text(draw.commitment.to_hex()))
                            .sql(")"),
                        )
                        .await?;
                    }
                    let created = LimitedDrop {
                        id: DropId::parse(id).map_err(|e| InfraError::new("drop id", e))?,
                        product_id: drop.product_id,
                        window: drop.window,
                        limited_quantity: drop.limited_quantity,
                        sizes: drop.sizes.with_labels(&variants),
                        per_user_limit: drop.per_user_limit,
                        price: drop.price,
                        paused: false,
                        closed_at: None,
                        mode: drop.mode,
                        payment_window: drop.payment_window,
                    };
                    let facts = [Fact::DropCreated(created.clone())];
                    append::<B>(c, &facts, from_db(at)).await?;
                    Ok(created)
                })
            })
            .await
    }

    async fn get(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError> {
        let found = self
            .drops_where(
                "get drop",
                select_drops()
                    .sql(" WHERE id = ")
                    .bind(Bind::BigInt(id.get())),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    async fn ids_after(&self, after: Option<DropId>) -> Result<Vec<DropId>, InfraError> {
        let rows: Vec<NumberRow> = self
            .read(
                "drop ids",
                Sql::new("SELECT id AS n FROM limited_drops WHERE id > ")
                    .bind(Bind::BigInt(after.map_or(0, DropId::get)))
                    .sql(" ORDER BY id"),
            )
            .await?;
        rows.into_iter()
            .map(|r| DropId::parse(r.n).map_err(|e| InfraError::new("corrupt drop id", e)))
            .collect()
    }

    async fn get_many(&self, ids: &[DropId]) -> Result<Vec<LimitedDrop>, InfraError> {
        // A bounded IN list per statement, however many drops an instance caches (each seller
        // may have `SELLER_MAX_ACTIVE_DROPS`, and there is no bound on sellers).
        let mut drops = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(GET_MANY_CHUNK) {
            let q = Sql::for_rows(chunk.len())
                .sql(&format!(
                    "SELECT {DROP_COLUMNS} FROM limited_drops WHERE id IN ("
                ))
                .list(chunk, |q, id| q.bind(Bind::BigInt(id.get())))
                .sql(")");
            drops.extend(self.drops_where("get drops", q).await?);
        }
        Ok(drops)
    }

    async fn sold_quantity(&self, id: DropId) -> Result<u32, InfraError> {
        let rows: Vec<NumberRow> = self.read("sold quantity", sold_in_orders(id)).await?;
        let sold = rows.first().map_or(0, |r| r.n);
        u32::try_from(sold).map_err(|_| InfraError::msg(format!("corrupt sold {sold}")))
    }

    async fn sold_by_size(&self, id: DropId) -> Result<FreeUnits, InfraError> {
        let rows: Vec<SizeUnitsRow> = self
            .read(
                "sold by size",
                Sql::new(
                    "SELECT sku, CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS n FROM orders \
                     WHERE drop_id = ",
                )
                .bind(Bind::BigInt(id.get()))
                .sql(" AND status IN (")
                .bind(Bind::Text(OrderStatus::Pending.as_str().to_owned()))
                .sql(", ")
                .bind(Bind::Text(OrderStatus::Paid.as_str().to_owned()))
                .sql(") GROUP BY sku"),
            )
            .await?;
        rows.into_iter()
            .map(|row| {
                let sku = row
                    .sku
                    .map(|s| Sku::parse("sku", &s))
                    .transpose()
                    .map_err(|e| InfraError::new("corrupt order sku", e))?;
                let units = u32::try_from(row.n)
                    .map_err(|_| InfraError::msg(format!("corrupt sold {}", row.n)))?;
                Ok((sku, units))
            })
            .collect()
    }

    async fn set_paused(
        &self,
        id: DropId,
        paused: bool,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        self.write(
            "pause drop",
            Sql::new("UPDATE limited_drops SET paused = ")
                .bind(Bind::Bool(paused))
                .sql(" WHERE id = ")
                .bind(Bind::BigInt(id.get())),
        )
        .await?;
        DropRepository::get(self, id).await
    }

    async fn close(
        &self,
        id: DropId,
        at: OffsetDateTime,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        // Only a drop still on sale (or scheduled) at `at` is closed, so closing again changes
        // nothing. The update takes the drop row's lock: a purchase batch that read the row
        // before it fails its own conditional update on `closed_at` and retries, seeing it.
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "close drop",
            |_| false,
            move |c, _| {
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    let closed = c
                        .run(
                            Sql::new("UPDATE limited_drops SET closed_at = ")
                                .bind(Bind::OptTimestamp(Some(to_db(at))))
                                .sql(", paused = ")
                                .bind(Bind::Bool(false))
                                .sql(" WHERE id = ")
                                .bind(Bind::BigInt(id.get()))
                                .sql(" AND closed_at IS NULL AND close_at > ")
                                .bind(Bind::Timestamp(to_db(at))),
                        )
                        .await?;
                    let rows: Vec<DropRow> = c
                        .rows(
                            select_drops()
                                .sql(" WHERE id = ")
                                .bind(Bind::BigInt(id.get())),
                        )
                        .await?;
                    let Some(drop) = domain_drops(c, rows).await?.into_iter().next() else {
                        return Ok(None);
                    };
                    // Closing again changes nothing, and tells nobody again.
                    if closed == 1 {
                        append::<B>(c, &[Fact::DropClosed(drop.clone())], at).await?;
                    }
                    Ok(Some(drop))
                })
            },
        )
        .await
    }

    async fn list_unclosed(&self, now: OffsetDateTime) -> Result<Vec<LimitedDrop>, InfraError> {
        self.drops_where(
            "list drops",
            select_drops()
                .sql(" WHERE close_at > ")
                .bind(Bind::Timestamp(to_db(now)))
                .sql(" AND (closed_at IS NULL OR closed_at > ")
                .bind(Bind::Timestamp(to_db(now)))
                .sql(")"),
        )
        .await
    }

    async fn gate_seed(&self, drop: &LimitedDrop) -> Result<GateSeed, InfraError> {
        let rows: Vec<OrderRow> = self
            .read(
                "gate seed",
                Sql::new(&format!(
                    "SELECT {ORDER_COLUMNS} FROM orders WHERE drop_id = "
                ))
                .bind(Bind::BigInt(drop.id.get())),
            )
            .await?;
        let mut held = Vec::with_capacity(rows.len());
        for row in rows {
            let order = row.into_domain()?;
            held.push(HeldOrder {
                order_id: order.id,
                user_id: order.user_id,
                key: order.idempotency_key,
                sku: order.sku,
                quantity: order.quantity,
                live: order.status.is_live(),
            });
        }
        Ok(GateSeed {
            unexplained: Vec::new(),
            drop_id: drop.id,
            remaining: GateSeed::remaining_of(drop, &held),
            expires_at: drop.ends_at(),
            orders: held,
        })
    }
}

/// Units in the drop's live orders (PENDING or PAID): the truth reconciliation compares against.
pub(super) fn sold_in_orders(drop: DropId) -> Sql {
    // SUM over INT is DECIMAL on MySQL; the cast keeps it a BIGINT everywhere.
    Sql::new("SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS n FROM orders WHERE drop_id = ")
        .bind(Bind::BigInt(drop.get()))
        .sql(" AND status IN (")
        .bind(Bind::Text(OrderStatus::Pending.as_str().to_owned()))
        .sql(", ")
        .bind(Bind::Text(OrderStatus::Paid.as_str().to_owned()))
        .sql(")")
}
