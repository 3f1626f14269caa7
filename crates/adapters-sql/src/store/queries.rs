//! Statements more than one port's transactions share.

use crate::rows::{NumberRow, OrderRow, column, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use diesel::QueryResult;
use goods_domain::{GoodsOrder, OrderId, OrderStatus};

/// Every column of `orders`, for SELECTs into [`OrderRow`].
pub(super) const ORDER_COLUMNS: &str = "id, drop_id, product_id, user_id, quantity, status, \
    idempotency_key, created_at, paid_at, payment_key, payment_reference, amount_minor, currency, \
    expires_at, sku";

/// Every column of `limited_drops` a drop is made of, for SELECTs into
/// [`DropRow`](crate::rows::DropRow).
pub(super) const DROP_COLUMNS: &str = "id, product_id, open_at, close_at, limited_quantity, \
    per_user_limit, paused, closed_at, price_minor, currency, mode, entry_close_at, payment_window_s";

/// Takes the database's write lock first where the backend needs it (see
/// [`Dialect::begin_write`](crate::Dialect::begin_write)).
pub(super) async fn begin_write<B: Backend>(c: &mut B::Conn) -> QueryResult<()> {
    if !B::DIALECT.begin_write.is_empty() {
        c.run(Sql::new(B::DIALECT.begin_write)).await?;
    }
    Ok(())
}

/// The id the connection's last INSERT generated.
pub(super) async fn last_insert_id<B: Backend>(c: &mut B::Conn) -> QueryResult<i64> {
    number::<B>(
        c,
        Sql::new(&format!("SELECT {} AS n", B::DIALECT.last_insert_id)),
    )
    .await
}

/// The one number `q` selects as `n`.
pub(super) async fn number<B: Backend>(c: &mut B::Conn, q: Sql) -> QueryResult<i64> {
    let rows: Vec<NumberRow> = c.rows(q).await?;
    rows.into_iter()
        .next()
        .map(|r| r.n)
        .ok_or(diesel::result::Error::NotFound)
}

/// Whether the database's clock is past `deadline_ms`: the one clock both a purchase's lease
/// fence and the resolution of a stale reservation consult.
pub(super) async fn past<B: Backend>(c: &mut B::Conn, deadline_ms: i64) -> QueryResult<bool> {
    let now = number::<B>(
        c,
        Sql::new(&format!("SELECT {} AS n", B::DIALECT.db_now_ms)),
    )
    .await?;
    Ok(now > deadline_ms)
}

/// The order with `id` as last committed, locked exclusively until the transaction ends: the
/// one read every change of an order's state starts from, so two changes of one order run one
/// after the other and the second sees what the first did.
pub(super) async fn lock_order<B: Backend, R>(
    c: &mut B::Conn,
    id: OrderId,
) -> Result<Option<GoodsOrder>, TxError<R>> {
    let rows: Vec<OrderRow> = c
        .rows(
            Sql::new(&format!("SELECT {ORDER_COLUMNS} FROM orders WHERE id = "))
                .bind(Bind::BigInt(id.get()))
                .sql(B::DIALECT.exclusive_read),
        )
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .map(OrderRow::into_domain)
        .transpose()?)
}

/// Writes a locked order that has just ended (CANCELLED or EXPIRED, as the aggregate decided)
/// and gives its units back to the buyer's holding, the product's stock and the drop (and, for
/// an order of a size, to that size's variant and units), in the purchase's lock order
/// (holding, stock, size, drop), so this and a purchase cannot deadlock on the hot rows.
pub(super) async fn end_and_give_back<B: Backend>(
    c: &mut B::Conn,
    order: &GoodsOrder,
) -> QueryResult<()> {
    debug_assert!(matches!(
        order.status,
        OrderStatus::Cancelled | OrderStatus::Expired
    ));
    let q = column(order.quantity.get());
    c.run(
        Sql::new("UPDATE orders SET status = ")
            .bind(Bind::Text(order.status.as_str().to_owned()))
            .sql(" WHERE id = ")
            .bind(Bind::BigInt(order.id.get())),
    )
    .await?;
    c.run(
        Sql::new("UPDATE drop_holdings SET quantity = quantity - ")
            .bind(Bind::Integer(q))
            .sql(" WHERE drop_id = ")
            .bind(Bind::BigInt(order.drop_id.get()))
            .sql(" AND user_id = ")
            .bind(Bind::BigInt(order.user_id.get())),
    )
    .await?;
    c.run(
        Sql::new("UPDATE stocks SET quantity = quantity + ")
            .bind(Bind::Integer(q))
            .sql(", version = version + 1 WHERE product_id = ")
            .bind(Bind::BigInt(order.product_id.get())),
    )
    .await?;
    // An order of a size gives its units back to that size (and its variant), as well as to
    // the drop's and the product's totals, which stay their sums.
    if let Some(sku) = &order.sku {
        c.run(
            Sql::new("UPDATE product_variants SET stock = stock + ")
                .bind(Bind::Integer(q))
                .sql(" WHERE product_id = ")
                .bind(Bind::BigInt(order.product_id.get()))
                .sql(" AND sku = ")
                .bind(Bind::Text(sku.as_str().to_owned())),
        )
        .await?;
        c.run(
            Sql::new("UPDATE drop_variants SET sold_quantity = sold_quantity - ")
                .bind(Bind::Integer(q))
                .sql(" WHERE drop_id = ")
                .bind(Bind::BigInt(order.drop_id.get()))
                .sql(" AND sku = ")
                .bind(Bind::Text(sku.as_str().to_owned())),
        )
        .await?;
    }
    c.run(
        Sql::new("UPDATE limited_drops SET sold_quantity = sold_quantity - ")
            .bind(Bind::Integer(q))
            .sql(" WHERE id = ")
            .bind(Bind::BigInt(order.drop_id.get())),
    )
    .await?;
    Ok(())
}

/// Writes a locked order that has just been PAID, as the aggregate decided.
pub(super) async fn mark_paid(c: &mut impl Exec, order: &GoodsOrder) -> QueryResult<()> {
    let Some(payment) = order
        .payment
        .as_ref()
        .filter(|_| order.status == OrderStatus::Paid)
    else {
        return Err(diesel::result::Error::QueryBuilderError(
            "an order is written PAID only with its payment".into(),
        ));
    };
    c.run(
        Sql::new("UPDATE orders SET status = ")
            .bind(Bind::Text(order.status.as_str().to_owned()))
            .sql(", paid_at = ")
            .bind(Bind::OptTimestamp(Some(to_db(payment.at))))
            .sql(", payment_key = ")
            .bind(Bind::Text(payment.event_id.as_str().to_owned()))
            .sql(", payment_reference = ")
            .bind(Bind::Text(payment.reference.as_str().to_owned()))
            .sql(" WHERE id = ")
            .bind(Bind::BigInt(order.id.get())),
    )
    .await?;
    Ok(())
}
