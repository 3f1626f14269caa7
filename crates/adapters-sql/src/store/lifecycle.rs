//! An order's life after its purchase: cancel, expiry, payment, and the resolution of a stale
//! reservation. Every change starts from a locked read of the order; the order aggregate decides
//! what changes (goods-domain), and this writes it.

use super::SqlStore;
use super::duplicate_key;
use super::event_log::append;
use super::payments::PAYMENT_COLUMNS;
use super::queries::{begin_write, end_and_give_back, last_insert_id, lock_order, mark_paid, past};
use crate::rows::{IdRow, OrderRow, PaymentRow, from_db, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use goods_domain::ports::{AppliedPayment, Cancelled, PaymentEventError, StaleResolution, unix_ms};
use goods_domain::{
    CancelOrderError, CancelTransition, Expiry, GoodsOrder, IdempotencyKey, InfraError, OrderId,
    PaymentEvent, PaymentOutcome, PaymentRecord, PaymentTransition, PaymentWindow, UserId,
};
use time::OffsetDateTime;

impl<B: Backend> SqlStore<B> {
    pub(super) async fn cancel(
        &self,
        id: OrderId,
        by: UserId,
        expiry: Expiry,
    ) -> Result<Cancelled, CancelOrderError> {
        self.write_tx(
            "cancel order",
            |_| false,
            move |c, _| {
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    let mut order = lock_order::<B, _>(c, id)
                        .await?
                        .ok_or(TxError::Refused(CancelOrderError::NotFound))?;
                    let transition = order.cancel_by(by, expiry).map_err(TxError::Refused)?;
                    if !order.apply_cancel(transition) {
                        return Ok(Cancelled::Already(order));
                    }
                    end_and_give_back::<B>(c, &order).await?;
                    log_end::<B>(c, &order, expiry.now).await?;
                    Ok(match transition {
                        CancelTransition::Expire => Cancelled::Expired(order),
                        _ => Cancelled::Now(order),
                    })
                })
            },
        )
        .await
    }

    pub(super) async fn expire(
        &self,
        id: OrderId,
        expiry: Expiry,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "expire order",
            |_| false,
            move |c, _| {
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    let Some(mut order) = lock_order::<B, _>(c, id).await? else {
                        return Ok(None);
                    };
                    if !order.expire_by(expiry) {
                        return Ok(None);
                    }
                    end_and_give_back::<B>(c, &order).await?;
                    log_end::<B>(c, &order, expiry.now).await?;
                    Ok(Some(order))
                })
            },
        )
        .await
    }

    pub(super) async fn pay(
        &self,
        event: &PaymentEvent,
        now: OffsetDateTime,
        window: PaymentWindow,
    ) -> Result<AppliedPayment, PaymentEventError> {
        // Two deliveries of one event race on its unique id: the loser's INSERT fails on the
        // duplicate (after the winner commits), and its retry finds the recorded event.
        self.write_tx(
            "apply payment",
            |e| matches!(e, TxError::Db(db) if duplicate_key(db)),
            |c, _| Box::pin(apply_payment::<B>(c, event, now, window)),
        )
        .await
    }

    pub(super) async fn resolve(
        &self,
        user: UserId,
        key: &IdempotencyKey,
        deadline: OffsetDateTime,
    ) -> Result<StaleResolution, InfraError> {
        let deadline = unix_ms(deadline);
        let key = key.as_str().to_owned();
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "resolve stale reservation",
            |_| false,
            move |c, _| {
                let key = key.clone();
                Box::pin(async move {
                    begin_write::<B>(c).await?;
                    if !past::<B>(c, deadline).await? {
                        return Ok(StaleResolution::Pending);
                    }
                    // A locking read: a purchase that inserted this order and has not committed
                    // holds the row, so this waits for its outcome.
                    let found: Vec<IdRow> = c
                        .rows(
                            Sql::new("SELECT id FROM orders WHERE user_id = ")
                                .bind(Bind::BigInt(user.get()))
                                .sql(" AND idempotency_key = ")
                                .bind(Bind::Text(key))
                                .sql(B::DIALECT.locking_read),
                        )
                        .await?;
                    let Some(id) = found.into_iter().next().map(|r| r.id) else {
                        return Ok(StaleResolution::Abandoned);
                    };
                    let rows: Vec<OrderRow> = c
                        .rows(
                            Sql::new(&format!(
                                "SELECT {} FROM orders WHERE id = ",
                                super::queries::ORDER_COLUMNS
                            ))
                            .bind(Bind::BigInt(id)),
                        )
                        .await?;
                    let order = rows
                        .into_iter()
                        .next()
                        .ok_or(TxError::Db(diesel::result::Error::NotFound))?;
                    Ok(StaleResolution::Committed(order.into_domain()?))
                })
            },
        )
        .await
    }
}

/// The payment transaction: the event recorded once by its id, with the outcome the order
/// aggregate decides on the order as last committed.
async fn apply_payment<B: Backend>(
    c: &mut B::Conn,
    event: &PaymentEvent,
    now: OffsetDateTime,
    window: PaymentWindow,
) -> Result<AppliedPayment, TxError<PaymentEventError>> {
    begin_write::<B>(c).await?;
    let recorded: Vec<PaymentRow> = c
        .rows(
            Sql::new(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payment_events WHERE event_id = "
            ))
            .bind(Bind::Text(event.id.as_str().to_owned()))
            .sql(B::DIALECT.exclusive_read),
        )
        .await?;
    if let Some(row) = recorded.into_iter().next() {
        let record = row.into_domain()?;
        return if record.event == *event {
            Ok(AppliedPayment {
                record,
                repeated: true,
                expired: None,
            })
        } else {
            Err(TxError::Refused(PaymentEventError::EventIdReused))
        };
    }
    let mut expired = None;
    let mut facts = Vec::new();
    let outcome = match lock_order::<B, _>(c, event.order_id).await? {
        None => PaymentOutcome::OrderNotFound,
        Some(mut order) => {
            let decision = order.apply_payment(event, now, window);
            match decision.transition {
                None => {}
                Some(PaymentTransition::Pay(payment)) => {
                    // As the database keeps it (its timestamps' precision).
                    let at = crate::rows::from_db(to_db(payment.at));
                    order.apply_payment_transition(PaymentTransition::Pay(goods_domain::Payment {
                        at,
                        ..payment
                    }));
                    mark_paid(c, &order).await?;
                }
                Some(PaymentTransition::Expire) => {
                    order.apply_payment_transition(PaymentTransition::Expire);
                    end_and_give_back::<B>(c, &order).await?;
                    expired = Some(order.clone());
                }
            }
            facts = goods_domain::event::payment_facts(
                decision.outcome,
                &order,
                event,
                expired.is_some(),
            );
            decision.outcome
        }
    };
    let received_at = to_db(now);
    c.run(
        Sql::new(
            "INSERT INTO payment_events (event_id, kind, order_id, amount_minor, currency, \
             payment_reference, outcome, received_at) VALUES (",
        )
        .bind(Bind::Text(event.id.as_str().to_owned()))
        .sql(", ")
        .bind(Bind::Text(event.kind.as_str().to_owned()))
        .sql(", ")
        .bind(Bind::BigInt(event.order_id.get()))
        .sql(", ")
        .bind(Bind::BigInt(
            i64::try_from(event.amount.minor()).unwrap_or(i64::MAX),
        ))
        .sql(", ")
        .bind(Bind::Text(event.amount.currency().as_str().to_owned()))
        .sql(", ")
        .bind(Bind::Text(event.reference.as_str().to_owned()))
        .sql(", ")
        .bind(Bind::Text(outcome.as_str().to_owned()))
        .sql(", ")
        .bind(Bind::Timestamp(received_at))
        .sql(")"),
    )
    .await?;
    let seq = last_insert_id::<B>(c).await?;
    append::<B>(c, &facts, now).await?;
    Ok(AppliedPayment {
        record: PaymentRecord {
            seq,
            event: event.clone(),
            outcome,
            received_at: from_db(received_at),
        },
        repeated: false,
        expired,
    })
}

/// The event of an order that ended and gave its units back, in the same transaction.
async fn log_end<B: Backend>(
    c: &mut B::Conn,
    order: &GoodsOrder,
    at: OffsetDateTime,
) -> diesel::QueryResult<()> {
    let facts: Vec<goods_domain::Fact> = goods_domain::event::ended_fact(order.clone())
        .into_iter()
        .collect();
    append::<B>(c, &facts, at).await
}
