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
//! - `dialect::{LAST_INSERT_ID, LOCKING_READ, ENSURE_HOLDING, BEGIN_WRITE, DB_NOW_MS}`: the SQL
//!   expression for the last generated id; the suffix that makes a SELECT read the latest
//!   committed row with a lock (empty where transactions are serial); an INSERT of
//!   `(drop_id, user_id, 0)` into `drop_holdings` that leaves an existing row alone, locking it
//!   exclusively where the backend has row locks; a statement that takes the write lock before
//!   a write transaction reads (empty where row locks make it unnecessary); the database's
//!   clock in unix milliseconds, against which admission leases are checked.

use super::dialect::{BEGIN_WRITE, DB_NOW_MS, ENSURE_HOLDING, LAST_INSERT_ID, LOCKING_READ};
use super::{Conn, Store};
use adapters_sql::rows::{DropRow, IdRow, NewDropRow, NewOrderRow, OrderRow, column, to_db, units};
use adapters_sql::schema::{drop_holdings, limited_drops, orders, outbox_events, products, stocks};
use adapters_sql::{TxError, bounded, decode_event, encode_event, infra, with_retries};
use async_trait::async_trait;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::result::Error as DbError;
use diesel::sql_types::BigInt;
use diesel::{insert_into, update};
use diesel_async::{AsyncConnection, RunQueryDsl};
use goods_domain::ports::{
    self, CancelOrderError, Cancelled, CreateDropError, DomainEvent, GateSeed, HeldOrder,
    OutboxEntry, PlaceOrder, PlaceOrderError, Placed, StaleResolution, unix_ms,
};
use goods_domain::{
    DropId, GoodsOrder, IdempotencyKey, InfraError, LimitedDrop, NewLimitedDrop, NewProduct,
    OrderId, OrderStatus, Product, ProductId, ProductName, Stock, UserId,
};
use time::OffsetDateTime;

const CANCELLED: &str = "CANCELLED";

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

/// Why a purchase transaction rolls back: an earlier order answers it, or a refusal.
enum Rollback {
    Replay(GoodsOrder),
    Refuse(PlaceOrderError),
}

const DROP_LEFT: &str =
    "SELECT limited_quantity - sold_quantity AS remaining FROM limited_drops WHERE id = ?";
const STOCK_LEFT: &str = "SELECT quantity AS remaining FROM stocks WHERE product_id = ?";

/// Units left, read with the backend's locking read: a plain read would answer from
/// the transaction's snapshot, older than the row the refused update just saw.
async fn locked_remaining(c: &mut Conn, query: &str, id: i64) -> Result<u32, TxError<Rollback>> {
    let row: adapters_sql::rows::Remaining = diesel::sql_query(format!("{query}{LOCKING_READ}"))
        .bind::<BigInt, _>(id)
        .get_result(c)
        .await?;
    Ok(units(row.remaining.max(0), "remaining")?)
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

/// Units in the drop's live orders: the truth reconciliation compares against.
async fn sold_in_orders(c: &mut Conn, drop: i64) -> QueryResult<i64> {
    // SUM over INT is DECIMAL on MySQL; the cast keeps it a BIGINT everywhere.
    orders::table
        .filter(orders::drop_id.eq(drop))
        .filter(orders::status.ne(CANCELLED))
        .select(sql::<BigInt>("CAST(COALESCE(SUM(quantity), 0) AS SIGNED)"))
        .get_result(c)
        .await
}

#[async_trait]
impl ports::ProductRepository for Store {
    async fn create(&self, product: &NewProduct) -> Result<Product, InfraError> {
        let mut conn = self.conn().await?;
        let name = product.name.as_str().to_owned();
        let stock = column(product.stock_quantity);
        let id = conn
            .transaction::<_, DbError, _>(async |c| {
                insert_into(products::table)
                    .values(products::name.eq(&name))
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
        })
    }

    async fn get(&self, id: ProductId) -> Result<Option<Product>, InfraError> {
        let mut conn = self.conn().await?;
        let row: Option<(i64, String, i32, i64)> = products::table
            .inner_join(stocks::table)
            .filter(products::id.eq(id.get()))
            .select((
                products::id,
                products::name,
                stocks::quantity,
                stocks::version,
            ))
            .first(&mut *conn)
            .await
            .optional()
            .map_err(infra("get product"))?;
        row.map(|(_, name, quantity, version)| {
            Ok(Product {
                id,
                name: ProductName::parse(&name)
                    .map_err(|e| InfraError::new("corrupt product row", e))?,
                stock: Stock::new(units(quantity, "stock")?, version),
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
        })
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
            expires_at: drop.window.close_at(),
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
}

#[async_trait]
impl ports::PurchaseLedger for Store {
    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %order.drop_id, user.id = %order.user_id))]
    async fn place_order(&self, order: &PlaceOrder) -> Result<Placed, PlaceOrderError> {
        let drop = order.drop_id.get();
        let user = order.user_id.get();
        let q = column(order.quantity.get());
        let limited = column(order.limited_quantity.get());
        let per_user = column(order.per_user_limit.get());
        let new_row = NewOrderRow {
            drop_id: drop,
            product_id: order.product_id.get(),
            user_id: user,
            quantity: q,
            status: OrderStatus::Pending.as_str().to_owned(),
            idempotency_key: order.key.as_str().to_owned(),
            created_at: to_db(order.now),
        };
        // A duplicate (user, key) insert means a concurrent request with the same key
        // committed first: the retry finds its order and replays or refuses it.
        let retryable = |e: &DbError| {
            Store::retryable(e)
                || matches!(
                    e,
                    DbError::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, _)
                )
        };
        let deadline = order.deadline.map_or(i64::MAX, unix_ms);
        bounded(self.tx_timeout(), "place order", async {
            let result = with_retries(retryable, || async {
                let mut conn = self.conn().await?;
                conn.transaction::<_, TxError<Rollback>, _>(async |c| {
                    begin_write(c).await?;
                    // Cold work first, the two hot rows (stock, then drop) last: a hot
                    // row's lock is held from its update to COMMIT, so every statement
                    // after it would lengthen the queue of every buyer of the drop.
                    let existing: Option<OrderRow> = orders::table
                        .filter(orders::user_id.eq(user))
                        .filter(orders::idempotency_key.eq(&new_row.idempotency_key))
                        .select(OrderRow::as_select())
                        .first(c)
                        .await
                        .optional()?;
                    if let Some(row) = existing {
                        let found = row.into_domain()?;
                        return Err(TxError::Refused(
                            if found.matches_request(order.drop_id, order.quantity) {
                                Rollback::Replay(found)
                            } else {
                                Rollback::Refuse(PlaceOrderError::KeyReused)
                            },
                        ));
                    }
                    // A refusal from the committed state as of now, without a lock:
                    // after a sell-out, refusals cost one read and no write.
                    let sold: i32 = limited_drops::table
                        .find(drop)
                        .select(limited_drops::sold_quantity)
                        .first(c)
                        .await?;
                    if sold.saturating_add(q) > limited {
                        let remaining = units(limited.saturating_sub(sold).max(0), "sold")?;
                        return Err(TxError::Refused(Rollback::Refuse(
                            PlaceOrderError::SoldOut { remaining },
                        )));
                    }
                    // The unique (user, key) index: a concurrent request with the same
                    // key blocks here until the first commits, then fails as a
                    // duplicate; its retry is a new transaction that replays the order.
                    insert_into(orders::table)
                        .values(&new_row)
                        .execute(c)
                        .await?;
                    let id = last_insert_id(c).await?;
                    // Makes sure the holding row exists, locking it exclusively on
                    // MySQL: a shared lock here (as INSERT IGNORE takes on a duplicate)
                    // would deadlock with the same buyer's concurrent purchase when both
                    // upgrade to update it.
                    diesel::sql_query(ENSURE_HOLDING)
                        .bind::<BigInt, _>(drop)
                        .bind::<BigInt, _>(user)
                        .execute(c)
                        .await?;
                    let max_orders = column(ports::max_orders_per_buyer(order.per_user_limit));
                    let held = update(
                        drop_holdings::table
                            .find((drop, user))
                            .filter((drop_holdings::quantity + q).le(per_user))
                            .filter(drop_holdings::orders_placed.lt(max_orders)),
                    )
                    .set((
                        drop_holdings::quantity.eq(drop_holdings::quantity + q),
                        drop_holdings::orders_placed.eq(drop_holdings::orders_placed + 1),
                    ))
                    .execute(c)
                    .await?;
                    if held == 0 {
                        // Which condition refused it: only refusals pay for this read,
                        // a locking one (the snapshot may predate the row).
                        let placed: adapters_sql::rows::Remaining = diesel::sql_query(format!(
                            "SELECT orders_placed AS remaining FROM drop_holdings \
                         WHERE drop_id = ? AND user_id = ?{}",
                            LOCKING_READ
                        ))
                        .bind::<BigInt, _>(drop)
                        .bind::<BigInt, _>(user)
                        .get_result(c)
                        .await?;
                        let placed = placed.remaining;
                        return Err(TxError::Refused(Rollback::Refuse(
                            if placed >= max_orders {
                                PlaceOrderError::OrderLimitReached {
                                    limit: units(max_orders, "order cap")?,
                                }
                            } else {
                                PlaceOrderError::PerUserLimitExceeded {
                                    limit: order.per_user_limit.get(),
                                }
                            },
                        )));
                    }
                    let deducted = update(
                        stocks::table
                            .find(order.product_id.get())
                            .filter(stocks::quantity.ge(q)),
                    )
                    .set((
                        stocks::quantity.eq(stocks::quantity - q),
                        stocks::version.eq(stocks::version + 1),
                    ))
                    .execute(c)
                    .await?;
                    if deducted == 0 {
                        let remaining =
                            locked_remaining(c, STOCK_LEFT, order.product_id.get()).await?;
                        return Err(TxError::Refused(Rollback::Refuse(
                            PlaceOrderError::SoldOut { remaining },
                        )));
                    }
                    // The decisive conditional update: evaluated on the latest committed
                    // row under its exclusive lock, so the last unit goes to one buyer.
                    // It is also the lease fence: after the admission lease, judged by
                    // the database's clock, it changes nothing and the purchase rolls
                    // back. The order row was inserted before it, so a resolution that
                    // reads that row with a lock either waits for this transaction or
                    // runs after the deadline, when this update can no longer succeed.
                    let taken = update(
                        limited_drops::table
                            .find(drop)
                            .filter((limited_drops::sold_quantity + q).le(limited))
                            .filter(DbNowMs.le(deadline)),
                    )
                    .set(limited_drops::sold_quantity.eq(limited_drops::sold_quantity + q))
                    .execute(c)
                    .await?;
                    if taken == 0 {
                        if past(c, deadline).await? {
                            return Err(TxError::Refused(Rollback::Refuse(
                                PlaceOrderError::LeaseExpired,
                            )));
                        }
                        let remaining = locked_remaining(c, DROP_LEFT, drop).await?;
                        return Err(TxError::Refused(Rollback::Refuse(
                            PlaceOrderError::SoldOut { remaining },
                        )));
                    }
                    Ok(GoodsOrder {
                        id: OrderId::parse(id).map_err(|e| InfraError::new("order id", e))?,
                        drop_id: order.drop_id,
                        product_id: order.product_id,
                        user_id: order.user_id,
                        quantity: order.quantity,
                        status: OrderStatus::Pending,
                        idempotency_key: order.key.clone(),
                        created_at: adapters_sql::rows::from_db(new_row.created_at),
                    })
                })
                .await
            })
            .await;
            match result {
                Ok(created) => Ok(Placed::Created(created)),
                Err(TxError::Refused(Rollback::Replay(found))) => Ok(Placed::Replayed(found)),
                Err(TxError::Refused(Rollback::Refuse(refusal))) => Err(refusal),
                Err(TxError::Db(e)) => {
                    Err(adapters_sql::db_failure("place order", e, Store::unavailable).into())
                }
                Err(TxError::Infra(e)) => Err(e.into()),
            }
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(order.id = %id, user.id = %by))]
    async fn cancel_order(&self, id: OrderId, by: UserId) -> Result<Cancelled, CancelOrderError> {
        let work = with_retries(Store::retryable, || async {
            let mut conn = self.conn().await?;
            conn.transaction::<_, TxError<CancelOrderError>, _>(async |c| {
                begin_write(c).await?;
                let row: Option<OrderRow> = orders::table
                    .find(id.get())
                    .select(OrderRow::as_select())
                    .first(c)
                    .await
                    .optional()?;
                let mut order = row
                    .ok_or(TxError::Refused(CancelOrderError::NotFound))?
                    .into_domain()?;
                if order.user_id != by {
                    return Err(TxError::Refused(CancelOrderError::NotOwner));
                }
                match order.status {
                    OrderStatus::Cancelled => return Ok(Cancelled::Already(order)),
                    OrderStatus::Paid => {
                        return Err(TxError::Refused(CancelOrderError::NotCancellable(
                            order.status,
                        )));
                    }
                    OrderStatus::Pending => {}
                }
                // Only the transaction that flips PENDING to CANCELLED gives units
                // back; a concurrent cancel finds nothing to flip.
                let flipped = update(
                    orders::table
                        .find(id.get())
                        .filter(orders::status.eq(OrderStatus::Pending.as_str())),
                )
                .set(orders::status.eq(CANCELLED))
                .execute(c)
                .await?;
                order.status = OrderStatus::Cancelled;
                if flipped == 0 {
                    return Ok(Cancelled::Already(order));
                }
                // The same lock order as a purchase (holding, stock, drop), so a
                // cancellation and a purchase cannot deadlock on the hot rows.
                let q = column(order.quantity.get());
                update(drop_holdings::table.find((order.drop_id.get(), by.get())))
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
