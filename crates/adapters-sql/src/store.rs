//! The queries and transactions of the SQL source of truth, written once.
//!
//! This file is not a module of `adapters-sql`: each backend crate compiles it as its own
//! `store` module (`#[path = "../../adapters-sql/src/store.rs"] mod store;`), next to a
//! `dialect` module and two type aliases, so every query exists once and is plain Rust that
//! rustfmt formats and clippy lints, while diesel-async resolves it against the backend's
//! concrete connection type. The backend provides:
//!
//! - `Store`, with `async fn conn(&self) -> Result<impl DerefMut<Target = Conn> + Send,
//!   InfraError>` (bounded: an exhausted pool is `InfraError::unavailable`), `fn
//!   tx_timeout(&self) -> Duration` (the limit of one ledger call, retries included), `fn
//!   retryable(&DbError) -> bool` (deadlocks, lock wait timeouts: what a fresh transaction may
//!   cure) and `fn unavailable(&DbError) -> bool` (the server did not answer in a bound);
//! - `Conn`, its connection type;
//! - `dialect::{LAST_INSERT_ID, LOCKING_READ, EXCLUSIVE_READ, ENSURE_HOLDINGS_HEAD,
//!   ENSURE_HOLDINGS_TAIL, BEGIN_WRITE, DB_NOW_MS}`: the SQL expression for the last generated
//!   id; the suffixes that make a SELECT read the latest committed row with a shared or an
//!   exclusive lock (empty where transactions are serial); the two halves around `(drop_id, user_id, 0)` rows of an INSERT into
//!   `drop_holdings` that leaves existing rows alone, locking each exclusively where the backend
//!   has row locks; a statement that takes the write lock before a write transaction reads
//!   (empty where row locks make it unnecessary); the database's clock in unix milliseconds,
//!   against which admission leases are checked.

use super::dialect::{
    BEGIN_WRITE, DB_NOW_MS, ENSURE_HOLDINGS_HEAD, ENSURE_HOLDINGS_TAIL, EXCLUSIVE_READ,
    LAST_INSERT_ID, LOCKING_READ,
};
use super::{Conn, Store};
use adapters_sql::raw::{Bind, Sql};
use adapters_sql::rows::{
    DropRow, HoldingRow, IdRow, NewDropRow, OrderRow, PaymentRow, column, from_db, to_db, units,
};
use adapters_sql::schema::{
    drop_holdings, feature_flags, limited_drops, orders, outbox_events, payment_events, products,
    stocks,
};
use adapters_sql::{TxError, bounded, decode_event, encode_event, infra, retry_when, with_retries};
use async_trait::async_trait;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::result::Error as DbError;
use diesel::sql_types::BigInt;
use diesel::{insert_into, update};
use diesel_async::{AsyncConnection, RunQueryDsl};
use goods_domain::ports::{
    self, AppliedPayment, CancelOrderError, Cancelled, CreateDropError, DomainEvent, GateSeed,
    HeldOrder, OrderQuery, OutboxEntry, PaymentEventError, PaymentQuery, PlaceOrder,
    PlaceOrderError, Placed, Placement, StaleResolution, UnitsByStatus, unix_ms,
};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop, NewLimitedDrop, NewProduct,
    OrderId, OrderStatus, PaymentEvent, PaymentOutcome, PaymentRecord, PaymentTransition,
    PaymentWindow, Product, ProductId, ProductName, Stock, UserId,
};
use time::OffsetDateTime;

/// Every column of `orders`, for raw SELECTs into [`OrderRow`].
const ORDER_COLUMNS: &str = "id, drop_id, product_id, user_id, quantity, status, \
    idempotency_key, created_at, paid_at, payment_key, payment_reference, amount_minor, currency";

/// Every column of `payment_events`, for raw SELECTs into [`PaymentRow`].
const PAYMENT_COLUMNS: &str = "id, event_id, kind, order_id, amount_minor, currency, \
    payment_reference, outcome, received_at";

/// The database's clock in unix milliseconds ([`DB_NOW_MS`]) as an expression. A type of its
/// own rather than a raw SQL literal: diesel never caches a prepared statement holding a
/// literal, and the drop update that checks the lease is the hottest statement there is.
#[derive(Debug, Clone, Copy, diesel::query_builder::QueryId, diesel::expression::ValidGrouping)]
struct DbNowMs;

impl diesel::expression::Expression for DbNowMs {
    type SqlType = BigInt;
}

impl<QS> diesel::expression::AppearsOnTable<QS> for DbNowMs {}

impl<QS> diesel::expression::SelectableExpression<QS> for DbNowMs {}

impl<DB: diesel::backend::Backend> diesel::query_builder::QueryFragment<DB> for DbNowMs {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, DB>,
    ) -> QueryResult<()> {
        out.push_sql(DB_NOW_MS);
        Ok(())
    }
}

/// Why a batch's transaction rolls back to be tried again: a hot row's conditional update
/// refused what the batch's read had found free (another writer took the units in between,
/// or the database's clock passed the earliest lease of the batch). The retry reads afresh.
#[derive(Debug)]
struct Contended(&'static str);

/// How the batch transaction answers one order before the writes.
enum Decision {
    /// Answered without a write: a replay or a refusal.
    Answered(Placement),
    /// Committed with the batch.
    Accepted,
    /// The same (buyer, key) as the accepted order at this index: answered from it.
    SameKeyAs(usize),
}

/// A buyer's holding as the batch transaction found it, plus what the batch adds.
#[derive(Debug, Clone, Copy, Default)]
struct Holding {
    quantity: i32,
    orders_placed: i32,
    added_quantity: i32,
    added_orders: i32,
}

/// One transaction for a batch of orders of one drop, each answered on its own. All reads and
/// decisions come first: the hot rows' state and the database's clock (one read), the buyers'
/// holdings created if missing and locked (one write), the batch's existing orders by (buyer,
/// key) (one read), the holdings (one read). Then the orders are decided in the batch's order against those numbers,
/// so a refusal fails one order and never the batch. The writes follow, each one statement for
/// the whole batch: the orders, their ids read back, the holdings, then the two hot rows
/// (stock, then drop) updated once by the batch's sum, last, since a hot row's lock is held
/// from its update to COMMIT. Every write is conditional on the invariant it guards; if one
/// refuses what the reads found free, the transaction rolls back as [`Contended`] and is tried
/// again.
async fn commit_batch(
    c: &mut Conn,
    batch: &[PlaceOrder],
) -> Result<Vec<Placement>, TxError<Contended>> {
    let first = &batch[0];
    let drop = first.drop_id.get();
    let limited = column(first.limited_quantity.get());
    let per_user = column(first.per_user_limit.get());
    let max_orders = column(ports::max_orders_per_buyer(first.per_user_limit));
    begin_write(c).await?;
    let (sold, stock, now_ms, closed_at): (i32, i32, i64, Option<time::PrimitiveDateTime>) =
        limited_drops::table
            .inner_join(stocks::table.on(stocks::product_id.eq(limited_drops::product_id)))
            .filter(limited_drops::id.eq(drop))
            .select((
                limited_drops::sold_quantity,
                stocks::quantity,
                DbNowMs,
                limited_drops::closed_at,
            ))
            .first(c)
            .await?;
    // A drop closed early sells nothing more (replays are still answered below).
    let closed = closed_at.is_some();
    let free = if closed {
        0
    } else {
        limited.saturating_sub(sold).min(stock).max(0)
    };

    // Orders the numbers read so far cannot refuse need their buyers' holdings, created where
    // missing and locked; a sold-out drop's refusals cost two reads and no write. Every order
    // of a buyer commits under the lock of the buyer's holding, so what is read after taking it
    // (the orders by key, the holdings; each read sees what is committed when it runs) is
    // current for these buyers: an earlier purchase of the same key is replayed, never
    // mistaken for one more order past the limit.
    let buyers: std::collections::BTreeSet<i64> = batch
        .iter()
        .filter(|o| !lease_ended(o, now_ms) && column(o.quantity.get()) <= free)
        .map(|o| o.user_id.get())
        .collect();
    lock_holdings(c, drop, &buyers).await?;
    let existing = orders_by_key(c, batch.iter()).await?;
    let mut holdings = read_holdings(c, drop, &buyers).await?;

    let mut left = free;
    let mut accepted_keys: std::collections::HashMap<(i64, &str), usize> =
        std::collections::HashMap::new();
    let mut decisions = Vec::with_capacity(batch.len());
    for (index, order) in batch.iter().enumerate() {
        let user = order.user_id.get();
        let q = column(order.quantity.get());
        let decision = if let Some(found) = existing.get(&(user, order.key.as_str().to_owned())) {
            Decision::Answered(if found.matches_request(order.drop_id, order.quantity) {
                Ok(Placed::Replayed(found.clone()))
            } else {
                Err(PlaceOrderError::KeyReused)
            })
        } else if let Some(&earlier) = accepted_keys.get(&(user, order.key.as_str())) {
            Decision::SameKeyAs(earlier)
        } else if closed {
            Decision::Answered(Err(PlaceOrderError::Closed))
        } else if lease_ended(order, now_ms) {
            Decision::Answered(Err(PlaceOrderError::LeaseExpired))
        } else if q > left {
            Decision::Answered(Err(PlaceOrderError::SoldOut {
                remaining: units(left, "remaining")?,
            }))
        } else {
            let held = holdings.entry(user).or_default();
            if held.orders_placed + held.added_orders >= max_orders {
                Decision::Answered(Err(PlaceOrderError::OrderLimitReached {
                    limit: units(max_orders, "order cap")?,
                }))
            } else if held.quantity + held.added_quantity + q > per_user {
                Decision::Answered(Err(PlaceOrderError::PerUserLimitExceeded {
                    limit: order.per_user_limit.get(),
                }))
            } else {
                held.added_quantity += q;
                held.added_orders += 1;
                left -= q;
                accepted_keys.insert((user, order.key.as_str()), index);
                Decision::Accepted
            }
        };
        decisions.push(decision);
    }

    let accepted: Vec<&PlaceOrder> = batch
        .iter()
        .zip(&decisions)
        .filter(|(_, d)| matches!(d, Decision::Accepted))
        .map(|(o, _)| o)
        .collect();
    let mut created = std::collections::HashMap::new();
    if !accepted.is_empty() {
        insert_orders(c, &accepted).await?;
        created = orders_by_key(c, accepted.iter().copied()).await?;
        add_holdings(c, drop, &holdings, per_user, max_orders).await?;
        let sum = free - left;
        let deducted = update(
            stocks::table
                .find(first.product_id.get())
                .filter(stocks::quantity.ge(sum)),
        )
        .set((
            stocks::quantity.eq(stocks::quantity - sum),
            stocks::version.eq(stocks::version + 1),
        ))
        .execute(c)
        .await?;
        if deducted == 0 {
            return Err(TxError::Refused(Contended(
                "the stock no longer covers the batch",
            )));
        }
        // The decisive conditional update: evaluated on the latest committed row under its
        // exclusive lock, so the last unit goes to one buyer. It is also the lease fence: after
        // the earliest admission lease of the batch, judged by the database's clock, it changes
        // nothing and the batch rolls back. The order rows were inserted before it, so a
        // resolution that reads such a row with a lock either waits for this transaction or runs
        // after the deadline, when this update can no longer succeed.
        let deadline = accepted
            .iter()
            .filter_map(|o| o.deadline.map(unix_ms))
            .min()
            .unwrap_or(i64::MAX);
        let taken = update(
            limited_drops::table
                .find(drop)
                .filter((limited_drops::sold_quantity + sum).le(limited))
                .filter(limited_drops::closed_at.is_null())
                .filter(DbNowMs.le(deadline)),
        )
        .set(limited_drops::sold_quantity.eq(limited_drops::sold_quantity + sum))
        .execute(c)
        .await?;
        if taken == 0 {
            return Err(TxError::Refused(Contended(
                "the drop no longer covers the batch, was closed, or a lease ended",
            )));
        }
    }

    let mut answers: Vec<Placement> = Vec::with_capacity(batch.len());
    for (order, decision) in batch.iter().zip(decisions) {
        answers.push(match decision {
            Decision::Answered(answer) => answer,
            Decision::Accepted => Ok(Placed::Created(
                created
                    .get(&(order.user_id.get(), order.key.as_str().to_owned()))
                    .cloned()
                    .ok_or_else(|| InfraError::msg("an inserted order was not read back"))?,
            )),
            Decision::SameKeyAs(earlier) => match &answers[earlier] {
                Ok(Placed::Created(found))
                    if found.matches_request(order.drop_id, order.quantity) =>
                {
                    Ok(Placed::Replayed(found.clone()))
                }
                _ => Err(PlaceOrderError::KeyReused),
            },
        });
    }
    Ok(answers)
}

/// Whether the database's clock (`now_ms`) is past the order's admission lease.
fn lease_ended(order: &PlaceOrder, now_ms: i64) -> bool {
    order.deadline.is_some_and(|d| now_ms > unix_ms(d))
}

/// One multi-row INSERT of the orders, as raw SQL: diesel-async has no multi-row insert for
/// SQLite (diesel's own runs one statement per row there).
async fn insert_orders(c: &mut Conn, orders: &[&PlaceOrder]) -> Result<(), TxError<Contended>> {
    Sql::for_rows(orders.len())
        .sql(
            "INSERT INTO orders (drop_id, product_id, user_id, quantity, status, \
             idempotency_key, created_at, amount_minor, currency) VALUES ",
        )
        .list(orders, |q, order| {
            // Accepted orders are within the per-buyer limit, which the drop's price was
            // validated against: their amount exists.
            let amount = order.amount();
            q.sql("(")
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
                .bind(Bind::BigInt(amount.map_or(i64::MAX, |a| {
                    i64::try_from(a.minor()).unwrap_or(i64::MAX)
                })))
                .sql(", ")
                .bind(Bind::Text(order.price.currency().as_str().to_owned()))
                .sql(")")
        })
        .execute(c)
        .await?;
    Ok(())
}

/// The orders that exist for the (buyer, key) pairs of `orders`, by pair.
async fn orders_by_key<'a>(
    c: &mut Conn,
    orders: impl ExactSizeIterator<Item = &'a PlaceOrder>,
) -> Result<std::collections::HashMap<(i64, String), GoodsOrder>, TxError<Contended>> {
    // One range per pair on the unique (user_id, idempotency_key) index; two separate IN lists
    // would make the server probe every buyer with every key.
    let rows: Vec<OrderRow> = Sql::for_rows(orders.len())
        .sql("SELECT ")
        .sql(ORDER_COLUMNS)
        .sql(" FROM orders WHERE (user_id, idempotency_key) IN (")
        .list(orders, |q, o| {
            q.sql("(")
                .bind(Bind::BigInt(o.user_id.get()))
                .sql(", ")
                .bind(Bind::Text(o.key.as_str().to_owned()))
                .sql(")")
        })
        .sql(")")
        .load(c)
        .await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        let order = row.into_domain()?;
        found.insert(
            (
                order.user_id.get(),
                order.idempotency_key.as_str().to_owned(),
            ),
            order,
        );
    }
    Ok(found)
}

/// Creates the holdings of `buyers` in `drop` that do not exist, locking each exclusively where
/// the backend has row locks. Rows are taken in buyer order, so two batches lock shared buyers
/// in the same order.
async fn lock_holdings(
    c: &mut Conn,
    drop: i64,
    buyers: &std::collections::BTreeSet<i64>,
) -> Result<(), TxError<Contended>> {
    if buyers.is_empty() {
        return Ok(());
    }
    Sql::for_rows(buyers.len())
        .sql(ENSURE_HOLDINGS_HEAD)
        .sql(" ")
        .list(buyers, |q, &buyer| {
            q.sql("(")
                .bind(Bind::BigInt(drop))
                .sql(", ")
                .bind(Bind::BigInt(buyer))
                .sql(", 0)")
        })
        .sql(ENSURE_HOLDINGS_TAIL)
        .execute(c)
        .await?;
    Ok(())
}

/// The holdings of `buyers` in `drop`, which [`lock_holdings`] locked: a plain read is current
/// for them, since no other transaction can change them until this one ends (MySQL runs READ
/// COMMITTED, so the read is not answered from an older snapshot; SQLite's transactions run one
/// at a time). A locking read here would also lock other buyers' rows the server happens to
/// scan, and deadlock with their batches.
async fn read_holdings(
    c: &mut Conn,
    drop: i64,
    buyers: &std::collections::BTreeSet<i64>,
) -> Result<std::collections::HashMap<i64, Holding>, TxError<Contended>> {
    if buyers.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let found: Vec<HoldingRow> = Sql::for_rows(buyers.len())
        .sql("SELECT user_id, quantity, orders_placed FROM drop_holdings WHERE drop_id = ")
        .bind(Bind::BigInt(drop))
        .sql(" AND user_id IN (")
        .list(buyers, |q, &buyer| q.bind(Bind::BigInt(buyer)))
        .sql(")")
        .load(c)
        .await?;
    Ok(found
        .into_iter()
        .map(|row| {
            let holding = Holding {
                quantity: row.quantity,
                orders_placed: row.orders_placed,
                ..Holding::default()
            };
            (row.user_id, holding)
        })
        .collect())
}

/// Adds the batch's units and orders to every buyer's holding in one statement, conditional on
/// each buyer staying within both limits; any row it refuses rolls the batch back.
async fn add_holdings(
    c: &mut Conn,
    drop: i64,
    holdings: &std::collections::HashMap<i64, Holding>,
    per_user: i32,
    max_orders: i32,
) -> Result<(), TxError<Contended>> {
    let added: Vec<(i64, &Holding)> = holdings
        .iter()
        .filter(|(_, h)| h.added_orders > 0)
        .map(|(&user, h)| (user, h))
        .collect();
    // `CASE user_id WHEN ? THEN ? ... END`: each buyer's units, or orders, added by the batch.
    let case = |q: Sql, units: bool| {
        q.sql("CASE user_id")
            .each(&added, |q, &(user, h)| {
                let n = if units {
                    h.added_quantity
                } else {
                    h.added_orders
                };
                q.sql(" WHEN ")
                    .bind(Bind::BigInt(user))
                    .sql(" THEN ")
                    .bind(Bind::Integer(n))
            })
            .sql(" END")
    };
    let q = Sql::for_rows(added.len()).sql("UPDATE drop_holdings SET quantity = quantity + ");
    let q = case(q, true).sql(", orders_placed = orders_placed + ");
    let q = case(q, false)
        .sql(" WHERE drop_id = ")
        .bind(Bind::BigInt(drop))
        .sql(" AND user_id IN (")
        .list(&added, |q, &(user, _)| q.bind(Bind::BigInt(user)))
        .sql(") AND quantity + ");
    let q = case(q, true)
        .sql(" <= ")
        .bind(Bind::Integer(per_user))
        .sql(" AND orders_placed + ");
    let changed = case(q, false)
        .sql(" <= ")
        .bind(Bind::Integer(max_orders))
        .execute(c)
        .await?;
    if changed != added.len() {
        return Err(TxError::Refused(Contended(
            "a buyer's holding no longer allows the batch",
        )));
    }
    Ok(())
}

/// SQLite runs no busy handler for a transaction that read before it writes (it could
/// deadlock), so another writer on the file would fail it at once; taking the write
/// lock first makes it wait up to `busy_timeout` instead.
async fn begin_write(c: &mut Conn) -> QueryResult<()> {
    if !BEGIN_WRITE.is_empty() {
        diesel::sql_query(BEGIN_WRITE).execute(c).await?;
    }
    Ok(())
}

/// Whether the database's clock is past `deadline_ms`: the one clock both the
/// purchase transaction and the resolution of a stale reservation consult.
async fn past(c: &mut Conn, deadline_ms: i64) -> QueryResult<bool> {
    diesel::select(DbNowMs.gt(deadline_ms)).get_result(c).await
}

async fn last_insert_id(c: &mut Conn) -> QueryResult<i64> {
    diesel::select(sql::<BigInt>(LAST_INSERT_ID))
        .get_result(c)
        .await
}

/// The order with `id` as last committed, locked exclusively until the transaction ends: the
/// one read every change of an order's state starts from, so two changes of one order run one
/// after the other and the second sees what the first did.
async fn lock_order<R>(c: &mut Conn, id: OrderId) -> Result<Option<GoodsOrder>, TxError<R>> {
    let rows: Vec<OrderRow> = diesel::sql_query(format!(
        "SELECT {ORDER_COLUMNS} FROM orders WHERE id = ?{EXCLUSIVE_READ}"
    ))
    .bind::<BigInt, _>(id.get())
    .load(c)
    .await?;
    Ok(rows
        .into_iter()
        .next()
        .map(OrderRow::into_domain)
        .transpose()?)
}

/// The event recorded under `event`'s id, locked, if any.
async fn recorded_payment<R>(
    c: &mut Conn,
    event: &PaymentEvent,
) -> Result<Option<PaymentRecord>, TxError<R>> {
    let rows: Vec<PaymentRow> = diesel::sql_query(format!(
        "SELECT {PAYMENT_COLUMNS} FROM payment_events WHERE event_id = ?{EXCLUSIVE_READ}"
    ))
    .bind::<diesel::sql_types::Text, _>(event.id.as_str())
    .load(c)
    .await?;
    Ok(rows
        .into_iter()
        .next()
        .map(PaymentRow::into_domain)
        .transpose()?)
}

/// Ends a locked PENDING order as `status` (CANCELLED or EXPIRED) and gives its units back to
/// the buyer's holding, the product's stock and the drop, in the purchase's lock order
/// (holding, stock, drop), so this and a purchase cannot deadlock on the hot rows.
async fn end_and_give_back(
    c: &mut Conn,
    order: &mut GoodsOrder,
    status: OrderStatus,
) -> QueryResult<()> {
    update(orders::table.find(order.id.get()))
        .set(orders::status.eq(status.as_str()))
        .execute(c)
        .await?;
    order.status = status;
    let q = column(order.quantity.get());
    update(drop_holdings::table.find((order.drop_id.get(), order.user_id.get())))
        .set(drop_holdings::quantity.eq(drop_holdings::quantity - q))
        .execute(c)
        .await?;
    update(stocks::table.find(order.product_id.get()))
        .set((
            stocks::quantity.eq(stocks::quantity + q),
            stocks::version.eq(stocks::version + 1),
        ))
        .execute(c)
        .await?;
    update(limited_drops::table.find(order.drop_id.get()))
        .set(limited_drops::sold_quantity.eq(limited_drops::sold_quantity - q))
        .execute(c)
        .await?;
    Ok(())
}

/// Units in the drop's live orders: the truth reconciliation compares against.
async fn sold_in_orders(c: &mut Conn, drop: i64) -> QueryResult<i64> {
    // SUM over INT is DECIMAL on MySQL; the cast keeps it a BIGINT everywhere.
    orders::table
        .filter(orders::drop_id.eq(drop))
        .filter(orders::status.eq_any([OrderStatus::Pending.as_str(), OrderStatus::Paid.as_str()]))
        .select(sql::<BigInt>("CAST(COALESCE(SUM(quantity), 0) AS SIGNED)"))
        .get_result(c)
        .await
}

/// `products.owner_id` of a product no seller owns (created before ownership existed).
const NO_OWNER: i64 = 0;

#[async_trait]
impl ports::ProductRepository for Store {
    async fn create(&self, product: &NewProduct) -> Result<Product, InfraError> {
        let mut conn = self.conn().await?;
        let name = product.name.as_str().to_owned();
        let owner = product.owner.map_or(NO_OWNER, UserId::get);
        let stock = column(product.stock_quantity);
        let id = conn
            .transaction::<_, DbError, _>(async |c| {
                insert_into(products::table)
                    .values((products::name.eq(&name), products::owner_id.eq(owner)))
                    .execute(c)
                    .await?;
                let id = last_insert_id(c).await?;
                insert_into(stocks::table)
                    .values((
                        stocks::product_id.eq(id),
                        stocks::quantity.eq(stock),
                        stocks::version.eq(0_i64),
                    ))
                    .execute(c)
                    .await?;
                Ok(id)
            })
            .await
            .map_err(infra("create product"))?;
        Ok(Product {
            id: ProductId::parse(id).map_err(|e| InfraError::new("product id", e))?,
            name: product.name.clone(),
            stock: Stock::new(product.stock_quantity, 0),
            owner: product.owner,
        })
    }

    async fn get(&self, id: ProductId) -> Result<Option<Product>, InfraError> {
        let mut conn = self.conn().await?;
        let row: Option<(i64, String, i32, i64, i64)> = products::table
            .inner_join(stocks::table)
            .filter(products::id.eq(id.get()))
            .select((
                products::id,
                products::name,
                stocks::quantity,
                stocks::version,
                products::owner_id,
            ))
            .first(&mut *conn)
            .await
            .optional()
            .map_err(infra("get product"))?;
        row.map(|(_, name, quantity, version, owner)| {
            Ok(Product {
                id,
                name: ProductName::parse(&name)
                    .map_err(|e| InfraError::new("corrupt product row", e))?,
                stock: Stock::new(units(quantity, "stock")?, version),
                // 0 is the backfill's "no seller" (user ids are positive).
                owner: UserId::parse(owner).ok(),
            })
        })
        .transpose()
    }
}

#[async_trait]
impl ports::DropRepository for Store {
    async fn create(
        &self,
        drop: &NewLimitedDrop,
        now: OffsetDateTime,
    ) -> Result<LimitedDrop, CreateDropError> {
        let product = drop.product_id.get();
        let row = NewDropRow {
            product_id: product,
            open_at: to_db(drop.window.open_at()),
            close_at: to_db(drop.window.close_at()),
            limited_quantity: column(drop.limited_quantity.get()),
            per_user_limit: column(drop.per_user_limit.get()),
            sold_quantity: 0,
            price_minor: i64::try_from(drop.price.minor()).unwrap_or(i64::MAX),
            currency: drop.price.currency().as_str().to_owned(),
        };
        let now = to_db(now);
        let id = with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<CreateDropError>, _>(async |c| {
                // A no-op update of the stock row takes its row lock (MySQL) or the
                // write lock (SQLite) first, so two creations for one product run one
                // after the other and cannot both pass the active-drop check.
                let found = update(stocks::table.find(product))
                    .set(stocks::quantity.eq(stocks::quantity))
                    .execute(c)
                    .await?;
                if found == 0 {
                    return Err(TxError::Refused(CreateDropError::ProductNotFound));
                }
                let stock: i32 = stocks::table
                    .find(product)
                    .select(stocks::quantity)
                    .first(c)
                    .await?;
                if stock < row.limited_quantity {
                    return Err(TxError::Refused(CreateDropError::InsufficientStock {
                        stock: units(stock, "stock")?,
                    }));
                }
                let active: i64 = limited_drops::table
                    .filter(limited_drops::product_id.eq(product))
                    .filter(limited_drops::close_at.gt(now))
                    .filter(limited_drops::closed_at.is_null())
                    .count()
                    .get_result(c)
                    .await?;
                if active > 0 {
                    return Err(TxError::Refused(CreateDropError::DropAlreadyActive));
                }
                insert_into(limited_drops::table)
                    .values(&row)
                    .execute(c)
                    .await?;
                Ok(last_insert_id(c).await?)
            })
            .await
        })
        .await
        .map_err(|e| e.resolve::<CreateDropError>("create drop", Store::unavailable))?;
        Ok(LimitedDrop {
            id: DropId::parse(id).map_err(|e| InfraError::new("drop id", e))?,
            product_id: drop.product_id,
            window: drop.window,
            limited_quantity: drop.limited_quantity,
            per_user_limit: drop.per_user_limit,
            price: drop.price,
            paused: false,
            closed_at: None,
        })
    }

    async fn set_paused(
        &self,
        id: DropId,
        paused: bool,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        let mut conn = self.conn().await?;
        update(limited_drops::table.find(id.get()))
            .set(limited_drops::paused.eq(paused))
            .execute(&mut *conn)
            .await
            .map_err(infra("pause drop"))?;
        drop(conn);
        ports::DropRepository::get(self, id).await
    }

    async fn close(
        &self,
        id: DropId,
        at: OffsetDateTime,
    ) -> Result<Option<LimitedDrop>, InfraError> {
        let mut conn = self.conn().await?;
        // Only a drop still on sale (or scheduled) at `at` is closed, so closing again changes
        // nothing. The update takes the drop row's lock: a purchase batch that read the row
        // before it fails its own conditional update on `closed_at` and retries, seeing it.
        let at = to_db(at);
        update(
            limited_drops::table
                .find(id.get())
                .filter(limited_drops::closed_at.is_null())
                .filter(limited_drops::close_at.gt(at)),
        )
        .set((
            limited_drops::closed_at.eq(Some(at)),
            limited_drops::paused.eq(false),
        ))
        .execute(&mut *conn)
        .await
        .map_err(infra("close drop"))?;
        drop(conn);
        ports::DropRepository::get(self, id).await
    }

    async fn get(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError> {
        let mut conn = self.conn().await?;
        limited_drops::table
            .find(id.get())
            .select(DropRow::as_select())
            .first(&mut *conn)
            .await
            .optional()
            .map_err(infra("get drop"))?
            .map(DropRow::into_domain)
            .transpose()
    }

    async fn ids_after(&self, after: Option<DropId>) -> Result<Vec<DropId>, InfraError> {
        let mut conn = self.conn().await?;
        limited_drops::table
            .filter(limited_drops::id.gt(after.map_or(0, DropId::get)))
            .order(limited_drops::id.asc())
            .select(limited_drops::id)
            .load::<i64>(&mut *conn)
            .await
            .map_err(infra("drop ids"))?
            .into_iter()
            .map(|id| DropId::parse(id).map_err(|e| InfraError::new("corrupt drop id", e)))
            .collect()
    }

    async fn get_many(&self, ids: &[DropId]) -> Result<Vec<LimitedDrop>, InfraError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn().await?;
        limited_drops::table
            .filter(limited_drops::id.eq_any(ids.iter().map(|id| id.get())))
            .select(DropRow::as_select())
            .load(&mut *conn)
            .await
            .map_err(infra("get drops"))?
            .into_iter()
            .map(DropRow::into_domain)
            .collect()
    }

    async fn sold_quantity(&self, id: DropId) -> Result<u32, InfraError> {
        let mut conn = self.conn().await?;
        let sold = sold_in_orders(&mut conn, id.get())
            .await
            .map_err(infra("sold quantity"))?;
        u32::try_from(sold).map_err(|_| InfraError::msg(format!("corrupt sold {sold}")))
    }

    async fn list_unclosed(&self, now: OffsetDateTime) -> Result<Vec<LimitedDrop>, InfraError> {
        let mut conn = self.conn().await?;
        limited_drops::table
            .filter(limited_drops::close_at.gt(to_db(now)))
            .filter(limited_drops::closed_at.is_null())
            .select(DropRow::as_select())
            .load(&mut *conn)
            .await
            .map_err(infra("list drops"))?
            .into_iter()
            .map(DropRow::into_domain)
            .collect()
    }

    async fn gate_seed(&self, drop: &LimitedDrop) -> Result<GateSeed, InfraError> {
        let mut conn = self.conn().await?;
        let rows: Vec<OrderRow> = orders::table
            .filter(orders::drop_id.eq(drop.id.get()))
            .select(OrderRow::as_select())
            .load(&mut *conn)
            .await
            .map_err(infra("gate seed"))?;
        let mut sold: u32 = 0;
        let mut held = Vec::with_capacity(rows.len());
        for row in rows {
            let order = row.into_domain()?;
            let live = order.status.is_live();
            if live {
                sold = sold.saturating_add(order.quantity.get());
            }
            held.push(HeldOrder {
                order_id: order.id,
                user_id: order.user_id,
                key: order.idempotency_key,
                quantity: order.quantity,
                live,
            });
        }
        Ok(GateSeed {
            drop_id: drop.id,
            remaining: drop.limited_quantity.get().saturating_sub(sold),
            expires_at: drop.ends_at(),
            orders: held,
        })
    }
}

#[async_trait]
impl ports::OrderRepository for Store {
    async fn get(&self, id: OrderId) -> Result<Option<GoodsOrder>, InfraError> {
        let mut conn = self.conn().await?;
        orders::table
            .find(id.get())
            .select(OrderRow::as_select())
            .first(&mut *conn)
            .await
            .optional()
            .map_err(infra("get order"))?
            .map(OrderRow::into_domain)
            .transpose()
    }

    async fn find_by_key(
        &self,
        user: UserId,
        key: &IdempotencyKey,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        let mut conn = self.conn().await?;
        orders::table
            .filter(orders::user_id.eq(user.get()))
            .filter(orders::idempotency_key.eq(key.as_str()))
            .select(OrderRow::as_select())
            .first(&mut *conn)
            .await
            .optional()
            .map_err(infra("find order by key"))?
            .map(OrderRow::into_domain)
            .transpose()
    }

    async fn list_for_buyer(&self, query: &OrderQuery) -> Result<Vec<GoodsOrder>, InfraError> {
        let mut conn = self.conn().await?;
        let mut select = orders::table
            .filter(orders::user_id.eq(query.user.get()))
            .into_boxed();
        if let Some(drop) = query.drop {
            select = select.filter(orders::drop_id.eq(drop.get()));
        }
        if let Some(status) = query.status {
            select = select.filter(orders::status.eq(status.as_str()));
        }
        if let Some(before) = query.before {
            select = select.filter(orders::id.lt(before.get()));
        }
        select
            .order(orders::id.desc())
            .limit(i64::from(query.limit))
            .select(OrderRow::as_select())
            .load(&mut *conn)
            .await
            .map_err(infra("list orders"))?
            .into_iter()
            .map(OrderRow::into_domain)
            .collect()
    }

    async fn overdue(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<OrderId>, InfraError> {
        let mut conn = self.conn().await?;
        orders::table
            .filter(orders::status.eq(OrderStatus::Pending.as_str()))
            .filter(orders::created_at.le(to_db(cutoff)))
            .order(orders::created_at.asc())
            .limit(i64::from(limit))
            .select(orders::id)
            .load::<i64>(&mut *conn)
            .await
            .map_err(infra("overdue orders"))?
            .into_iter()
            .map(|id| OrderId::parse(id).map_err(|e| InfraError::new("corrupt order id", e)))
            .collect()
    }

    async fn units_by_status(&self, drop: DropId) -> Result<UnitsByStatus, InfraError> {
        #[derive(QueryableByName)]
        struct StatusUnits {
            #[diesel(sql_type = diesel::sql_types::Text)]
            status: String,
            #[diesel(sql_type = BigInt)]
            units: i64,
        }
        let mut conn = self.conn().await?;
        let rows: Vec<StatusUnits> = diesel::sql_query(
            "SELECT status, CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS units \
             FROM orders WHERE drop_id = ? GROUP BY status",
        )
        .bind::<BigInt, _>(drop.get())
        .load(&mut *conn)
        .await
        .map_err(infra("units by status"))?;
        let mut units = UnitsByStatus::default();
        for row in rows {
            let n = u32::try_from(row.units).unwrap_or(u32::MAX);
            match OrderStatus::parse(&row.status) {
                Some(OrderStatus::Pending) => units.pending = n,
                Some(OrderStatus::Paid) => units.paid = n,
                Some(OrderStatus::Cancelled) => units.cancelled = n,
                Some(OrderStatus::Expired) => units.expired = n,
                None => {
                    return Err(InfraError::msg(format!(
                        "corrupt order status {}",
                        row.status
                    )));
                }
            }
        }
        Ok(units)
    }
}

#[async_trait]
impl ports::PurchaseLedger for Store {
    #[tracing::instrument(level = "debug", skip_all, fields(drop.id, orders = batch.len()))]
    async fn place_orders(&self, batch: &[PlaceOrder]) -> Result<Vec<Placement>, InfraError> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        tracing::Span::current().record("drop.id", first.drop_id.get());
        if batch.iter().any(|o| !first.same_drop_terms(o)) {
            return Err(InfraError::msg("a batch of orders spans drops"));
        }
        // A duplicate (buyer, key) insert means a concurrent transaction with the same key
        // committed first; a refused hot-row update, that another writer took the units this
        // transaction read as free. The retry re-reads both.
        let retryable = |e: &TxError<Contended>| match e {
            TxError::Db(e) => {
                Store::retryable(e)
                    || matches!(
                        e,
                        DbError::DatabaseError(
                            diesel::result::DatabaseErrorKind::UniqueViolation,
                            _
                        )
                    )
            }
            TxError::Refused(Contended(_)) => true,
            TxError::Infra(_) => false,
        };
        bounded(self.tx_timeout(), "place orders", async {
            retry_when(retryable, || async {
                let mut conn = self.conn().await?;
                conn.transaction::<_, TxError<Contended>, _>(async |c| commit_batch(c, batch).await)
                    .await
            })
            .await
            .map_err(|e| match e {
                TxError::Db(e) => adapters_sql::db_failure("place orders", e, Store::unavailable),
                TxError::Infra(e) => e,
                TxError::Refused(Contended(what)) => {
                    InfraError::unavailable(format!("place orders: {what}, on every attempt"))
                }
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %id, user.id = %by))]
    async fn cancel_order(
        &self,
        id: OrderId,
        by: UserId,
        cutoff: OffsetDateTime,
    ) -> Result<Cancelled, CancelOrderError> {
        let work = with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<CancelOrderError>, _>(async |c| {
                begin_write(c).await?;
                let mut order = lock_order(c, id)
                    .await?
                    .ok_or(TxError::Refused(CancelOrderError::NotFound))?;
                if order.user_id != by {
                    return Err(TxError::Refused(CancelOrderError::NotOwner));
                }
                match order.status {
                    OrderStatus::Cancelled => return Ok(Cancelled::Already(order)),
                    OrderStatus::Paid | OrderStatus::Expired => {
                        return Err(TxError::Refused(CancelOrderError::NotCancellable(
                            order.status,
                        )));
                    }
                    OrderStatus::Pending => {}
                }
                // The locked read saw PENDING: this transaction is the one that ends it, as
                // an expiry when its window has passed.
                if order.created_at <= cutoff {
                    end_and_give_back(c, &mut order, OrderStatus::Expired).await?;
                    return Ok(Cancelled::Expired(order));
                }
                end_and_give_back(c, &mut order, OrderStatus::Cancelled).await?;
                Ok(Cancelled::Now(order))
            })
            .await
        });
        bounded(self.tx_timeout(), "cancel order", async {
            work.await
                .map_err(|e| e.resolve("cancel order", Store::unavailable))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %event.order_id))]
    async fn apply_payment(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> Result<AppliedPayment, PaymentEventError> {
        // Two deliveries of one event race on its unique id: the loser's INSERT fails on the
        // duplicate (after the winner commits), and its retry finds the recorded event.
        let retryable = |e: &DbError| {
            Store::retryable(e)
                || matches!(
                    e,
                    DbError::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, _)
                )
        };
        let work = with_retries(retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<PaymentEventError>, _>(async |c| {
                begin_write(c).await?;
                if let Some(recorded) = recorded_payment(c, event).await? {
                    return if recorded.event == *event {
                        Ok(AppliedPayment {
                            record: recorded,
                            repeated: true,
                            expired: None,
                        })
                    } else {
                        Err(TxError::Refused(PaymentEventError::EventIdReused))
                    };
                }
                let mut expired = None;
                let outcome = match lock_order(c, event.order_id).await? {
                    None => PaymentOutcome::OrderNotFound,
                    Some(mut order) => {
                        let decision = order.apply_payment(event, now, window);
                        match decision.transition {
                            None => {}
                            Some(PaymentTransition::Pay(payment)) => {
                                update(orders::table.find(order.id.get()))
                                    .set((
                                        orders::status.eq(OrderStatus::Paid.as_str()),
                                        orders::paid_at.eq(Some(to_db(payment.at))),
                                        orders::payment_key.eq(Some(payment.event_id.as_str())),
                                        orders::payment_reference
                                            .eq(Some(payment.reference.as_str())),
                                    ))
                                    .execute(c)
                                    .await?;
                            }
                            Some(PaymentTransition::Expire) => {
                                end_and_give_back(c, &mut order, OrderStatus::Expired).await?;
                                expired = Some(order);
                            }
                        }
                        decision.outcome
                    }
                };
                let received_at = to_db(now);
                insert_into(payment_events::table)
                    .values((
                        payment_events::event_id.eq(event.id.as_str()),
                        payment_events::kind.eq(event.kind.as_str()),
                        payment_events::order_id.eq(event.order_id.get()),
                        payment_events::amount_minor
                            .eq(i64::try_from(event.amount.minor()).unwrap_or(i64::MAX)),
                        payment_events::currency.eq(event.amount.currency().as_str()),
                        payment_events::payment_reference.eq(event.reference.as_str()),
                        payment_events::outcome.eq(outcome.as_str()),
                        payment_events::received_at.eq(received_at),
                    ))
                    .execute(c)
                    .await?;
                Ok(AppliedPayment {
                    record: PaymentRecord {
                        seq: last_insert_id(c).await?,
                        event: event.clone(),
                        outcome,
                        received_at: from_db(received_at),
                    },
                    repeated: false,
                    expired,
                })
            })
            .await
        });
        bounded(self.tx_timeout(), "apply payment", async {
            work.await
                .map_err(|e| e.resolve("apply payment", Store::unavailable))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %id))]
    async fn expire_order(
        &self,
        id: OrderId,
        cutoff: OffsetDateTime,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        let work = with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<InfraError>, _>(async |c| {
                begin_write(c).await?;
                let Some(mut order) = lock_order(c, id).await? else {
                    return Ok(None);
                };
                if order.status != OrderStatus::Pending || order.created_at > cutoff {
                    return Ok(None);
                }
                end_and_give_back(c, &mut order, OrderStatus::Expired).await?;
                Ok(Some(order))
            })
            .await
        });
        bounded(self.tx_timeout(), "expire order", async {
            work.await
                .map_err(|e| e.resolve("expire order", Store::unavailable))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(user.id = %user))]
    async fn resolve_stale(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError> {
        let deadline = unix_ms(deadline);
        let work = with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<InfraError>, _>(async |c| {
                begin_write(c).await?;
                if !past(c, deadline).await? {
                    return Ok(StaleResolution::Pending);
                }
                // A locking read: a purchase that inserted this order and has not
                // committed holds the row, so this waits for its outcome.
                let found: Vec<IdRow> = diesel::sql_query(format!(
                    "SELECT id FROM orders WHERE user_id = ? AND idempotency_key = ?{}",
                    LOCKING_READ
                ))
                .bind::<BigInt, _>(user.get())
                .bind::<diesel::sql_types::Text, _>(key.as_str())
                .load(c)
                .await?;
                let Some(id) = found.into_iter().next().map(|r| r.id) else {
                    return Ok(StaleResolution::Abandoned);
                };
                let row: OrderRow = orders::table
                    .find(id)
                    .select(OrderRow::as_select())
                    .first(c)
                    .await?;
                Ok(StaleResolution::Committed(row.into_domain()?))
            })
            .await
        });
        bounded(self.tx_timeout(), "resolve stale reservation", async {
            work.await.map_err(|e| {
                e.resolve::<InfraError>("resolve stale reservation", Store::unavailable)
            })
        })
        .await
    }
}

#[async_trait]
impl ports::PaymentRepository for Store {
    async fn list_payments(&self, query: &PaymentQuery) -> Result<Vec<PaymentRecord>, InfraError> {
        let mut conn = self.conn().await?;
        let mut select = payment_events::table.into_boxed();
        if let Some(outcome) = query.outcome {
            select = select.filter(payment_events::outcome.eq(outcome.as_str()));
        }
        if let Some(before) = query.before {
            select = select.filter(payment_events::id.lt(before));
        }
        select
            .order(payment_events::id.desc())
            .limit(i64::from(query.limit))
            .select(PaymentRow::as_select())
            .load(&mut *conn)
            .await
            .map_err(infra("list payments"))?
            .into_iter()
            .map(PaymentRow::into_domain)
            .collect()
    }
}

#[async_trait]
impl ports::EventOutbox for Store {
    async fn record_once(
        &self,
        key: &str,
        event: &DomainEvent,
        at: OffsetDateTime,
    ) -> Result<bool, InfraError> {
        let (kind, payload) = encode_event(event)?;
        let mut conn = self.conn().await?;
        let inserted = insert_into(outbox_events::table)
            .values((
                outbox_events::event_key.eq(key),
                outbox_events::kind.eq(kind),
                outbox_events::payload.eq(&payload),
                outbox_events::created_at.eq(to_db(at)),
            ))
            .execute(&mut *conn)
            .await;
        match inserted {
            Ok(_) => Ok(true),
            Err(DbError::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, _)) => {
                Ok(false)
            }
            Err(e) => Err(InfraError::new("record event", e)),
        }
    }

    async fn unpublished(&self, limit: u32) -> Result<Vec<OutboxEntry>, InfraError> {
        let mut conn = self.conn().await?;
        let rows: Vec<(i64, String, String)> = outbox_events::table
            .filter(outbox_events::published_at.is_null())
            .order(outbox_events::id)
            .limit(i64::from(limit))
            .select((
                outbox_events::id,
                outbox_events::kind,
                outbox_events::payload,
            ))
            .load(&mut *conn)
            .await
            .map_err(infra("unpublished events"))?;
        rows.into_iter()
            .map(|(id, kind, payload)| {
                Ok(OutboxEntry {
                    id,
                    event: decode_event(&kind, &payload)?,
                })
            })
            .collect()
    }

    async fn mark_published(&self, id: i64, at: OffsetDateTime) -> Result<(), InfraError> {
        let mut conn = self.conn().await?;
        update(
            outbox_events::table
                .find(id)
                .filter(outbox_events::published_at.is_null()),
        )
        .set(outbox_events::published_at.eq(Some(to_db(at))))
        .execute(&mut *conn)
        .await
        .map_err(infra("mark event published"))?;
        Ok(())
    }
}

#[async_trait]
impl ports::FlagStore for Store {
    async fn flags(&self) -> Result<Vec<ports::Flag>, InfraError> {
        let mut conn = self.conn().await?;
        let rows: Vec<(String, bool, time::PrimitiveDateTime, i64)> = feature_flags::table
            .select((
                feature_flags::name,
                feature_flags::enabled,
                feature_flags::updated_at,
                feature_flags::updated_by,
            ))
            .load(&mut *conn)
            .await
            .map_err(infra("read flags"))?;
        // A row of a flag this release does not know (a newer release wrote it) is skipped.
        Ok(rows
            .into_iter()
            .filter_map(|(name, enabled, at, by)| {
                Some(ports::Flag {
                    name: ports::FlagName::parse(&name)?,
                    enabled,
                    updated_at: Some(from_db(at)),
                    updated_by: UserId::parse(by).ok(),
                })
            })
            .collect())
    }

    async fn set_flag(
        &self,
        name: ports::FlagName,
        enabled: bool,
        by: UserId,
        at: OffsetDateTime,
    ) -> Result<ports::Flag, InfraError> {
        let at_db = to_db(at);
        with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            // Update, else insert (portable; two racing first sets retry on the duplicate key).
            conn.transaction::<_, TxError<std::convert::Infallible>, _>(async |c| {
                let updated = update(feature_flags::table.find(name.as_str()))
                    .set((
                        feature_flags::enabled.eq(enabled),
                        feature_flags::updated_at.eq(at_db),
                        feature_flags::updated_by.eq(by.get()),
                    ))
                    .execute(c)
                    .await?;
                if updated == 0 {
                    insert_into(feature_flags::table)
                        .values((
                            feature_flags::name.eq(name.as_str()),
                            feature_flags::enabled.eq(enabled),
                            feature_flags::updated_at.eq(at_db),
                            feature_flags::updated_by.eq(by.get()),
                        ))
                        .execute(c)
                        .await?;
                }
                Ok(())
            })
            .await
        })
        .await
        .map_err(|e| match e {
            TxError::Db(error) => adapters_sql::db_failure("set flag", error, Store::unavailable),
            TxError::Infra(error) => error,
            TxError::Refused(never) => match never {},
        })?;
        Ok(ports::Flag {
            name,
            enabled,
            updated_at: Some(from_db(at_db)),
            updated_by: Some(by),
        })
    }
}

#[async_trait]
impl ports::LeaseStore for Store {
    #[tracing::instrument(level = "debug", skip_all, fields(lease = name))]
    async fn try_lead(
        &self,
        name: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, InfraError> {
        let mut conn = self.conn().await?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let taken = diesel::sql_query(format!(
            "UPDATE leases SET holder = ?, expires_at_ms = {DB_NOW_MS} + ? \
             WHERE name = ? AND (holder = ? OR expires_at_ms < {DB_NOW_MS})"
        ))
        .bind::<diesel::sql_types::Text, _>(holder)
        .bind::<BigInt, _>(ttl_ms)
        .bind::<diesel::sql_types::Text, _>(name)
        .bind::<diesel::sql_types::Text, _>(holder)
        .execute(&mut *conn)
        .await
        .map_err(infra("take lease"))?;
        if taken == 1 {
            return Ok(true);
        }
        // MySQL counts a row the UPDATE left as it was (a renewal within the same millisecond)
        // as not affected: the holder still holds it then.
        #[derive(QueryableByName)]
        struct Held {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let held: Held = diesel::sql_query(format!(
            "SELECT COUNT(*) AS n FROM leases \
             WHERE name = ? AND holder = ? AND expires_at_ms >= {DB_NOW_MS}"
        ))
        .bind::<diesel::sql_types::Text, _>(name)
        .bind::<diesel::sql_types::Text, _>(holder)
        .get_result(&mut *conn)
        .await
        .map_err(infra("read lease"))?;
        Ok(held.n == 1)
    }
}
