//! The purchase transaction: a batch of orders of one drop committed in one transaction
//! (group commit), each answered on its own by goods-domain's [`plan_batch`].

use super::SqlStore;
use super::duplicate_key;
use super::queries::{ORDER_COLUMNS, begin_write};
use crate::rows::{
    BatchHeadRow, HoldingRow, IdRow, OrderKeyRow, OrderRow, column, kept, to_db, units,
};
use crate::{Backend, Bind, Exec, Sql, TxError, event_lines};
use diesel::QueryableByName;
use goods_domain::batch::{
    BatchFacts, BatchPlan, FreeUnits, Holding, buyers_to_lock, free_units, plan_batch,
};
use goods_domain::ports::{PlaceOrder, Placement, unix_ms};
use goods_domain::{
    Fact, GoodsOrder, IdempotencyKey, InfraError, OrderId, OrderStatus, SizeSold, Sku, UserId,
    event,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a batch's transaction rolls back to be tried again: a hot row's conditional update
/// refused what the batch's read had found free (another writer took the units in between, or
/// the database's clock passed the earliest lease of the batch). The retry reads afresh.
#[derive(Debug)]
pub(super) struct Contended(&'static str);

impl From<Contended> for InfraError {
    fn from(Contended(what): Contended) -> Self {
        InfraError::unavailable(format!("place orders: {what}, on every attempt"))
    }
}

impl<B: Backend> SqlStore<B> {
    /// One transaction for a batch of orders of one drop; see
    /// [`PurchaseLedger::place_orders`](goods_domain::ports::PurchaseLedger::place_orders).
    pub(super) async fn place_batch(
        &self,
        batch: &[PlaceOrder],
    ) -> Result<Vec<Placement>, InfraError> {
        // A duplicate (buyer, key) insert means a concurrent transaction with the same key
        // committed first; a refused hot-row update, that another writer took the units this
        // transaction read as free. The retry re-reads both; after a lost race it reads the hot
        // rows under their locks, so no other writer can take what it reads as free.
        let lost = AtomicBool::new(false);
        self.write_tx(
            "place orders",
            |e| {
                matches!(e, TxError::Refused(Contended(_)))
                    || matches!(e, TxError::Db(db) if duplicate_key(db))
            },
            |c, _| {
                let lost = &lost;
                Box::pin(async move {
                    let result = commit_batch::<B>(c, batch, lost.load(Ordering::Relaxed)).await;
                    if matches!(result, Err(TxError::Refused(Contended(_)))) {
                        lost.store(true, Ordering::Relaxed);
                    }
                    result
                })
            },
        )
        .await
    }
}

/// The transaction: reads first (hot rows and the clock, holdings locked, existing orders,
/// holdings), the rule decides, then one statement per write for the whole batch, the hot rows
/// last (their locks are held from the update to COMMIT). A conditional write that refuses
/// rolls back as [`Contended`], to be tried again.
///
/// `locked`, for an attempt after a lost race: once the holdings are locked, the hot rows are
/// locked too, in the order the writes take them (stock, variants, sizes, drop), and read
/// again; the rule decides on what no other writer can change before COMMIT, so the batch
/// cannot lose the race again however many writers take the same drop. The first attempt reads
/// them without locks, which keeps their locks as short as the writes.
async fn commit_batch<B: Backend>(
    c: &mut B::Conn,
    batch: &[PlaceOrder],
    locked: bool,
) -> Result<Vec<Placement>, TxError<Contended>> {
    let first = &batch[0];
    let drop = first.drop_id.get();
    begin_write::<B>(c).await?;
    let mut head = read_head::<B>(c, first).await?;
    // Every order of a buyer commits under the lock of the buyer's holding, so what is read
    // after taking it (the orders by key, the holdings; each read sees what is committed when
    // it runs, at READ COMMITTED) is current for these buyers: an earlier purchase of the same
    // key is replayed, never mistaken for one more order past the limit.
    let buyers = buyers_to_lock(batch, &head.free, head.db_now_ms);
    lock_holdings::<B>(c, drop, &buyers).await?;
    if locked && !B::DIALECT.exclusive_read.is_empty() {
        lock_hot_rows::<B>(c, first).await?;
        let unlocked = head.free;
        head = read_head::<B>(c, first).await?;
        // No more free than the first read found, so every order the rule can accept is of a
        // buyer locked above (a unit given back in between waits for the next batch), and the
        // locks keep their one order: holdings, then hot rows.
        for (size, free) in &mut head.free {
            *free = (*free).min(unlocked.get(size).copied().unwrap_or(0));
        }
    }
    let Head {
        free,
        limits,
        closed,
        db_now_ms,
    } = head;
    let facts = BatchFacts {
        free,
        closed,
        db_now_ms,
        existing: orders_by_key(c, batch.iter()).await?,
        holdings: read_holdings(c, drop, &buyers).await?,
    };
    let plan = plan_batch(batch, &facts);
    let accepted: Vec<&PlaceOrder> = plan.accepted(batch).collect();
    if accepted.is_empty() {
        return Ok(plan.answers(batch, |_| None));
    }
    insert_orders(c, &accepted).await?;
    let created = inserted(c, &accepted).await?;
    add_holdings(c, drop, &plan, first).await?;
    // The events' statement is built (their data rendered) before the hot rows are locked;
    // after their update it is the one statement, of one row, more their locks are held for.
    let events = events_insert::<B>(first, &accepted, &created, &limits);
    take_units::<B>(c, first, &plan, &accepted).await?;
    if let Some(events) = events {
        c.run(events).await?;
    }
    Ok(plan.answers(batch, |o| created.get(&(o.user_id, o.key.clone())).cloned()))
}

/// What the batch reads of its drop before the rule decides.
struct Head {
    /// The units free in each size (one entry, `None`, for a drop without sizes).
    free: FreeUnits,
    /// Each size's limit (empty for a drop without sizes).
    limits: BTreeMap<Sku, u32>,
    closed: bool,
    db_now_ms: i64,
}

/// The drop's hot rows and the database's clock, as committed when read.
async fn read_head<B: Backend>(
    c: &mut B::Conn,
    first: &PlaceOrder,
) -> Result<Head, TxError<Contended>> {
    let heads: Vec<BatchHeadRow> = c
        .rows(
            Sql::new(&format!(
                "SELECT limited_drops.sold_quantity, stocks.quantity AS stock, {} AS now_ms, \
                 limited_drops.closed_at FROM limited_drops \
                 INNER JOIN stocks ON stocks.product_id = limited_drops.product_id \
                 WHERE limited_drops.id = ",
                B::DIALECT.db_now_ms
            ))
            .bind(Bind::BigInt(first.drop_id.get())),
        )
        .await?;
    let head = heads
        .into_iter()
        .next()
        .ok_or(TxError::Db(diesel::result::Error::NotFound))?;
    let closed = head.closed_at.is_some();
    // A drop without sizes is one size of its product's stock; a drop in sizes (its orders
    // name their size) has each size's units within its variant's stock. An order of a size the
    // drop does not sell finds nothing free.
    let (free, limits) = if first.sku.is_some() {
        sizes_free(c, first, closed).await?
    } else {
        let whole = FreeUnits::from([(
            None,
            free_units(
                first.limited_quantity.get(),
                units(head.sold_quantity, "sold")?,
                units(head.stock, "stock")?,
                closed,
            ),
        )]);
        (whole, BTreeMap::new())
    };
    Ok(Head {
        free,
        limits,
        closed,
        db_now_ms: head.now_ms,
    })
}

/// Locks the rows [`take_units`] writes, in its order: the stock, the product's variants and
/// the drop's sizes (a drop in sizes), then the drop. Where transactions run one at a time
/// there is nothing to lock.
async fn lock_hot_rows<B: Backend>(
    c: &mut B::Conn,
    terms: &PlaceOrder,
) -> Result<(), TxError<Contended>> {
    let (product, drop) = (terms.product_id.get(), terms.drop_id.get());
    let mut rows = vec![("stocks", "product_id", product)];
    if terms.sku.is_some() {
        rows.push(("product_variants", "product_id", product));
        rows.push(("drop_variants", "drop_id", drop));
    }
    rows.push(("limited_drops", "id", drop));
    for (table, key, id) in rows {
        let _: Vec<IdRow> = c
            .rows(
                Sql::new(&format!("SELECT {key} AS id FROM {table} WHERE {key} = "))
                    .bind(Bind::BigInt(id))
                    .sql(B::DIALECT.exclusive_read),
            )
            .await?;
    }
    Ok(())
}

/// One size of a drop in sizes as the batch reads it: its units and its variant's stock.
#[derive(Debug, QueryableByName)]
struct SizeHeadRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    sku: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    limited_quantity: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    sold_quantity: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    stock: i32,
}

/// The units free in each size of `terms`' drop: what its limit leaves, within its variant's
/// stock ([`free_units`]); and each size's limit.
async fn sizes_free(
    c: &mut impl Exec,
    terms: &PlaceOrder,
    closed: bool,
) -> Result<(FreeUnits, BTreeMap<Sku, u32>), TxError<Contended>> {
    let rows: Vec<SizeHeadRow> = c
        .rows(
            Sql::new(
                "SELECT drop_variants.sku, drop_variants.limited_quantity, \
                 drop_variants.sold_quantity, product_variants.stock FROM drop_variants \
                 INNER JOIN product_variants ON product_variants.sku = drop_variants.sku \
                 AND product_variants.product_id = ",
            )
            .bind(Bind::BigInt(terms.product_id.get()))
            .sql(" WHERE drop_variants.drop_id = ")
            .bind(Bind::BigInt(terms.drop_id.get())),
        )
        .await?;
    let mut free = FreeUnits::new();
    let mut limits = BTreeMap::new();
    for row in rows {
        let sku =
            Sku::parse("sku", &row.sku).map_err(|e| InfraError::new("corrupt drop size row", e))?;
        let limited = units(row.limited_quantity, "size limited")?;
        let units = free_units(
            limited,
            units(row.sold_quantity, "size sold")?,
            units(row.stock, "variant stock")?,
            closed,
        );
        free.insert(Some(sku.clone()), units);
        limits.insert(sku, limited);
    }
    Ok((free, limits))
}

/// One multi-row INSERT of the orders.
async fn insert_orders(
    c: &mut impl Exec,
    orders: &[&PlaceOrder],
) -> Result<(), TxError<Contended>> {
    c.run(
        Sql::for_rows(orders.len())
            .sql(
                "INSERT INTO orders (drop_id, product_id, user_id, quantity, status, \
                 idempotency_key, created_at, amount_minor, currency, expires_at, sku) VALUES ",
            )
            .list(orders, |q, order| {
                // Accepted orders are within the per-buyer limit, which the drop's price was
                // validated against: their amount exists.
                let amount = order
                    .amount()
                    .map_or(i64::MAX, |a| i64::try_from(a.minor()).unwrap_or(i64::MAX));
                let q = q
                    .sql("(")
                    .bind(Bind::BigInt(order.drop_id.get()))
                    .sql(", ")
                    .bind(Bind::BigInt(order.product_id.get()))
                    .sql(", ")
                    .bind(Bind::BigInt(order.user_id.get()))
                    .sql(", ")
                    .bind(Bind::Integer(column(order.quantity.get())))
                    .sql(", ")
                    .bind(Bind::Text(OrderStatus::Pending.as_str().to_owned()))
                    .sql(", ")
                    .bind(Bind::Text(order.key.as_str().to_owned()))
                    .sql(", ")
                    .bind(Bind::Timestamp(to_db(order.now)))
                    .sql(", ")
                    .bind(Bind::BigInt(amount))
                    .sql(", ")
                    .bind(Bind::Text(order.price.currency().as_str().to_owned()))
                    .sql(", ")
                    .bind(Bind::Timestamp(to_db(order.deadline())))
                    .sql(", ");
                match &order.sku {
                    Some(sku) => q.bind(Bind::Text(sku.as_str().to_owned())),
                    None => q.sql("NULL"),
                }
                .sql(")")
            }),
    )
    .await?;
    Ok(())
}

/// The orders that exist for the (buyer, key) pairs of `orders`, by pair.
async fn orders_by_key<'a>(
    c: &mut impl Exec,
    orders: impl ExactSizeIterator<Item = &'a PlaceOrder>,
) -> Result<HashMap<(UserId, IdempotencyKey), GoodsOrder>, TxError<Contended>> {
    let rows: Vec<OrderRow> = c.rows(by_key(ORDER_COLUMNS, orders)).await?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in rows {
        let order = row.into_domain()?;
        found.insert((order.user_id, order.idempotency_key.clone()), order);
    }
    Ok(found)
}

/// The orders [`insert_orders`] just inserted, by (buyer, key): each as
/// [`PlaceOrder::created`] makes it, numbered by its row's id, its times as the database keeps
/// them (to the microsecond). Only the ids are read back; the rest of each row is what the
/// insert wrote (a whole order is fifteen columns, each found by name in every row).
async fn inserted(
    c: &mut impl Exec,
    orders: &[&PlaceOrder],
) -> Result<HashMap<(UserId, IdempotencyKey), GoodsOrder>, TxError<Contended>> {
    let rows: Vec<OrderKeyRow> = c
        .rows(by_key(
            "id, user_id, idempotency_key",
            orders.iter().copied(),
        ))
        .await?;
    let ids: HashMap<(i64, &str), i64> = rows
        .iter()
        .map(|r| ((r.user_id, r.idempotency_key.as_str()), r.id))
        .collect();
    let mut created = HashMap::with_capacity(orders.len());
    for o in orders {
        let Some(&id) = ids.get(&(o.user_id.get(), o.key.as_str())) else {
            continue;
        };
        let id = OrderId::parse(id).map_err(|e| InfraError::new("corrupt order row", e))?;
        // Accepted orders are within the per-buyer limit, which the drop's price was validated
        // against; one without an amount rolls the batch back rather than commit unanswered.
        let order = o
            .created(id)
            .ok_or_else(|| InfraError::msg("an accepted order has no amount"))?;
        created.insert((o.user_id, o.key.clone()), kept(order));
    }
    Ok(created)
}

/// `SELECT columns FROM orders` of the (buyer, key) pairs of `orders`: one range per pair on
/// the unique (user_id, idempotency_key) index; two separate IN lists would make the server
/// probe every buyer with every key.
fn by_key<'a>(columns: &str, orders: impl ExactSizeIterator<Item = &'a PlaceOrder>) -> Sql {
    Sql::for_rows(orders.len())
        .sql(&format!(
            "SELECT {columns} FROM orders WHERE (user_id, idempotency_key) IN ("
        ))
        .list(orders, |q, o| {
            q.sql("(")
                .bind(Bind::BigInt(o.user_id.get()))
                .sql(", ")
                .bind(Bind::Text(o.key.as_str().to_owned()))
                .sql(")")
        })
        .sql(")")
}

/// Creates the holdings of `buyers` in `drop` that do not exist, locking each exclusively where
/// the backend has row locks. Rows are taken in buyer order, so two batches lock shared buyers
/// in the same order.
async fn lock_holdings<B: Backend>(
    c: &mut B::Conn,
    drop: i64,
    buyers: &BTreeSet<UserId>,
) -> Result<(), TxError<Contended>> {
    if buyers.is_empty() {
        return Ok(());
    }
    c.run(
        Sql::for_rows(buyers.len())
            .sql(B::DIALECT.ensure_holdings_head)
            .sql(" ")
            .list(buyers, |q, buyer| {
                q.sql("(")
                    .bind(Bind::BigInt(drop))
                    .sql(", ")
                    .bind(Bind::BigInt(buyer.get()))
                    .sql(", 0)")
            })
            .sql(B::DIALECT.ensure_holdings_tail),
    )
    .await?;
    Ok(())
}

/// The holdings [`lock_holdings`] locked, by a plain read (current under READ COMMITTED): a
/// locking read would also lock rows the server scans, deadlocking other batches.
async fn read_holdings(
    c: &mut impl Exec,
    drop: i64,
    buyers: &BTreeSet<UserId>,
) -> Result<HashMap<UserId, Holding>, TxError<Contended>> {
    if buyers.is_empty() {
        return Ok(HashMap::new());
    }
    let found: Vec<HoldingRow> = c
        .rows(
            Sql::for_rows(buyers.len())
                .sql("SELECT user_id, quantity, orders_placed FROM drop_holdings WHERE drop_id = ")
                .bind(Bind::BigInt(drop))
                .sql(" AND user_id IN (")
                .list(buyers, |q, buyer| q.bind(Bind::BigInt(buyer.get())))
                .sql(")"),
        )
        .await?;
    found
        .into_iter()
        .map(|row| {
            let user = UserId::parse(row.user_id)
                .map_err(|e| InfraError::new("corrupt holding row", e))?;
            let holding = Holding {
                units: units(row.quantity, "holding")?,
                orders: units(row.orders_placed, "orders placed")?,
            };
            Ok((user, holding))
        })
        .collect()
}

/// Adds the batch's units and orders to every buyer's holding in one statement, conditional on
/// each buyer staying within both limits; any row it refuses rolls the batch back.
async fn add_holdings(
    c: &mut impl Exec,
    drop: i64,
    plan: &BatchPlan,
    terms: &PlaceOrder,
) -> Result<(), TxError<Contended>> {
    let per_user = column(terms.per_user_limit.get());
    let max_orders = column(goods_domain::ports::max_orders_per_buyer(
        terms.per_user_limit,
    ));
    let added: Vec<(&UserId, &Holding)> = plan.added.iter().collect();
    // `CASE user_id WHEN ? THEN ? ... END`: each buyer's units, or orders, added by the batch.
    let case = |q: Sql, units: bool| {
        q.sql("CASE user_id")
            .each(&added, |q, &(user, h)| {
                let n = if units { h.units } else { h.orders };
                q.sql(" WHEN ")
                    .bind(Bind::BigInt(user.get()))
                    .sql(" THEN ")
                    .bind(Bind::Integer(column(n)))
            })
            .sql(" END")
    };
    let q = Sql::for_rows(added.len()).sql("UPDATE drop_holdings SET quantity = quantity + ");
    let q = case(q, true).sql(", orders_placed = orders_placed + ");
    let q = case(q, false)
        .sql(" WHERE drop_id = ")
        .bind(Bind::BigInt(drop))
        .sql(" AND user_id IN (")
        .list(&added, |q, &(user, _)| q.bind(Bind::BigInt(user.get())))
        .sql(") AND quantity + ");
    let q = case(q, true)
        .sql(" <= ")
        .bind(Bind::Integer(per_user))
        .sql(" AND orders_placed + ");
    let changed = c
        .run(case(q, false).sql(" <= ").bind(Bind::Integer(max_orders)))
        .await?;
    if changed != added.len() {
        return Err(TxError::Refused(Contended(
            "a buyer's holding no longer allows the batch",
        )));
    }
    Ok(())
}

/// Takes the batch's units from the stock, then the drop (the hot rows, last); the drop's update
/// also numbers the events, one per order and one more for the last unit (`event_seq` first, so
/// both backends read the old `sold_quantity`).
async fn take_units<B: Backend>(
    c: &mut B::Conn,
    terms: &PlaceOrder,
    plan: &BatchPlan,
    accepted: &[&PlaceOrder],
) -> Result<(), TxError<Contended>> {
    let taken = column(plan.taken_in_all());
    let deducted = c
        .run(
            Sql::new("UPDATE stocks SET quantity = quantity - ")
                .bind(Bind::Integer(taken))
                .sql(", version = version + 1 WHERE product_id = ")
                .bind(Bind::BigInt(terms.product_id.get()))
                .sql(" AND quantity >= ")
                .bind(Bind::Integer(taken)),
        )
        .await?;
    if deducted == 0 {
        return Err(TxError::Refused(Contended(
            "the stock no longer covers the batch",
        )));
    }
    // Each size's own rows before the drop's row, in one statement a table for all the batch's
    // sizes (the rows lock in key order, sku order, so two batches lock them in the same
    // order): the variants' stock, then the sizes' sold units, each row conditional on its
    // invariant, and every size's row must change. A drop without sizes has none.
    let sized: Vec<(&Sku, u32)> = plan
        .taken
        .iter()
        .filter_map(|(s, t)| s.as_ref().map(|s| (s, *t)))
        .filter(|(_, t)| *t > 0)
        .collect();
    if !sized.is_empty() {
        let (by_size, skus) = (
            units_by_size(&sized),
            sku_list(sized.iter().map(|(s, _)| *s)),
        );
        let deducted = c
            .run(
                Sql::new(&format!(
                    "UPDATE product_variants SET stock = stock - {by_size} WHERE product_id = "
                ))
                .bind(Bind::BigInt(terms.product_id.get()))
                .sql(&format!(" AND sku IN ({skus}) AND stock >= {by_size}")),
            )
            .await?;
        let sold = c
            .run(
                Sql::new(&format!(
                    "UPDATE drop_variants SET sold_quantity = sold_quantity + {by_size} \
                     WHERE drop_id = "
                ))
                .bind(Bind::BigInt(terms.drop_id.get()))
                .sql(&format!(
                    " AND sku IN ({skus}) AND sold_quantity + {by_size} <= limited_quantity"
                )),
            )
            .await?;
        if deducted != sized.len() || sold != sized.len() {
            return Err(TxError::Refused(Contended(
                "a size no longer covers the batch",
            )));
        }
    }
    // The decisive conditional update: evaluated on the latest committed row under its
    // exclusive lock, so the last unit goes to one buyer. It is also the lease fence: after the
    // earliest admission lease of the batch, judged by the database's clock, it changes nothing
    // and the batch rolls back. The order rows were inserted before it, so a resolution that
    // reads such a row with a lock either waits for this transaction or runs after the
    // deadline, when this update can no longer succeed.
    let deadline = accepted
        .iter()
        .filter_map(|o| o.deadline.map(unix_ms))
        .min()
        .unwrap_or(i64::MAX);
    let took = c
        .run(
            Sql::new("UPDATE limited_drops SET event_seq = event_seq + ")
                .bind(Bind::BigInt(
                    i64::try_from(accepted.len()).unwrap_or(i64::MAX),
                ))
                .sql(&format!(
                    " + {} + CASE WHEN sold_quantity + ",
                    sizes_sold_out(
                        terms.drop_id.get(),
                        plan.taken
                            .iter()
                            .filter(|(_, t)| **t > 0)
                            .filter_map(|(s, _)| s.as_ref())
                    )
                ))
                .bind(Bind::Integer(taken))
                .sql(" >= limited_quantity THEN 1 ELSE 0 END, sold_quantity = sold_quantity + ")
                .bind(Bind::Integer(taken))
                .sql(" WHERE id = ")
                .bind(Bind::BigInt(terms.drop_id.get()))
                .sql(" AND sold_quantity + ")
                .bind(Bind::Integer(taken))
                .sql(" <= ")
                .bind(Bind::Integer(column(terms.limited_quantity.get())))
                .sql(&format!(
                    " AND closed_at IS NULL AND {} <= ",
                    B::DIALECT.db_now_ms
                ))
                .bind(Bind::BigInt(deadline)),
        )
        .await?;
    if took == 0 {
        return Err(TxError::Refused(Contended(
            "the drop no longer covers the batch, was closed, or a lease ended",
        )));
    }
    Ok(())
}

/// The batch's events as one `event_batches` row, `INSERT ... SELECT` from the locked drop row:
/// each `goods.order.placed`, then `goods.variant.sold_out` for each size whose row says this
/// batch took its last unit, then `goods.drop.sold_out` if the drop's row says so; numbered back
/// from the `event_seq` that [`take_units`] advanced by the same count.
fn events_insert<B: Backend>(
    terms: &PlaceOrder,
    accepted: &[&PlaceOrder],
    created: &HashMap<(UserId, IdempotencyKey), GoodsOrder>,
    limits: &BTreeMap<Sku, u32>,
) -> Option<Sql> {
    let placed: Vec<GoodsOrder> = accepted
        .iter()
        .filter_map(|o| created.get(&(o.user_id, o.key.clone())).cloned())
        .collect();
    let at = placed.iter().map(|o| o.created_at).max()?;
    let orders = placed.len();
    let taken: u32 = placed.iter().map(|o| o.quantity.get()).sum();
    let limited = terms.limited_quantity.get();
    // Each size as it would be if the batch took its last unit; its row decides.
    let sizes: Vec<SizeSold> = limits
        .iter()
        .map(|(sku, limit)| {
            let of_size: u32 = placed
                .iter()
                .filter(|o| o.sku.as_ref() == Some(sku))
                .map(|o| o.quantity.get())
                .sum();
            SizeSold {
                sku: sku.clone(),
                sold: limit.saturating_sub(of_size),
                limited: *limit,
            }
        })
        .collect();
    // The orders' lines carry no data: each order's row has it (event_lines::encode_placed).
    let head = event_lines::encode_placed(&placed);
    // The facts as they are if the batch takes the last unit; the rows decide whether it did.
    let facts = event::purchase_facts(placed, limited.saturating_sub(taken), limited, &sizes);
    let after_orders = &facts[orders.min(facts.len())..];
    let (variants, sold_out): (Vec<&Fact>, Vec<&Fact>) = after_orders
        .iter()
        .partition(|f| matches!(f, Fact::VariantSoldOut { .. }));
    let tail = if sold_out.is_empty() {
        String::new()
    } else {
        format!(
            "\n{}",
            event_lines::encode(&sold_out.into_iter().cloned().collect::<Vec<_>>())
        )
    };
    let dialect = B::DIALECT;
    let drop = terms.drop_id.get();
    let sold = "CASE WHEN d.sold_quantity >= d.limited_quantity THEN ";
    let sizes_out = sizes_sold_out(
        drop,
        variants.iter().filter_map(|f| match f {
            Fact::VariantSoldOut { sku, .. } => Some(sku),
            _ => None,
        }),
    );
    let (orders, extra) = (
        i64::try_from(orders).unwrap_or(i64::MAX),
        i64::from(!tail.is_empty()),
    );
    let mut q = Sql::new(
        "INSERT INTO event_batches (drop_id, first_seq, event_count, occurred_at, events) \
         SELECT d.id, d.event_seq + 1 - ",
    )
    .bind(Bind::BigInt(orders))
    .sql(&format!(" - {sizes_out} - {sold}"))
    .bind(Bind::BigInt(extra))
    .sql(" ELSE 0 END, ")
    .bind(Bind::BigInt(orders))
    .sql(&format!(" + {sizes_out} + {sold}"))
    .bind(Bind::BigInt(extra))
    .sql(" ELSE 0 END, ")
    .bind(Bind::Timestamp(to_db(at)))
    .sql(&format!(", {}", dialect.concat_open))
    .bind(Bind::Text(head));
    for fact in &variants {
        let Fact::VariantSoldOut { sku, .. } = fact else {
            continue;
        };
        q = q
            .sql(&format!(
                "{}CASE WHEN {} THEN ",
                dialect.concat_sep,
                size_sold_out(drop, sku)
            ))
            .bind(Bind::Text(format!(
                "\n{}",
                event_lines::encode(std::slice::from_ref(*fact))
            )))
            .sql(" ELSE '' END");
    }
    Some(
        q.sql(&format!("{}{sold}", dialect.concat_sep))
            .bind(Bind::Text(tail))
            .sql(&format!(
                " ELSE '' END{} FROM limited_drops d WHERE d.id = ",
                dialect.concat_close
            ))
            .bind(Bind::BigInt(drop)),
    )
}

/// `CASE sku WHEN 'A' THEN 3 ... ELSE 0 END`: the units the batch takes of each size. Skus are
/// written inline: they hold only `[A-Za-z0-9._-]`, so none can close the quotes.
fn units_by_size(sized: &[(&Sku, u32)]) -> String {
    let mut case = String::from("CASE sku");
    for (sku, units) in sized {
        case.push_str(&format!(" WHEN '{}' THEN {units}", sku.as_str()));
    }
    case.push_str(" ELSE 0 END");
    case
}

/// `'A', 'B'`: the skus, quoted (see [`units_by_size`]).
fn sku_list<'a>(skus: impl Iterator<Item = &'a Sku>) -> String {
    skus.map(|sku| format!("'{}'", sku.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// SQL that is true when the size `sku` of `drop` has sold its last unit (its row as this
/// transaction updated it). Ids and skus are written inline: a drop id is a number and a sku
/// holds only `[A-Za-z0-9._-]`, so neither can close the quotes.
fn size_sold_out(drop: i64, sku: &Sku) -> String {
    format!(
        "EXISTS (SELECT 1 FROM drop_variants WHERE drop_id = {drop} AND sku = '{}' \
         AND sold_quantity >= limited_quantity)",
        sku.as_str()
    )
}

/// SQL counting the sizes among `skus` of `drop` that have sold their last unit (`0` for none).
fn sizes_sold_out<'a>(drop: i64, skus: impl Iterator<Item = &'a Sku>) -> String {
    let list = sku_list(skus);
    if list.is_empty() {
        return "0".to_owned();
    }
    format!(
        "(SELECT COUNT(*) FROM drop_variants WHERE drop_id = {drop} AND sku IN ({list}) \
         AND sold_quantity >= limited_quantity)"
    )
}
