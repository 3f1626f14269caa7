//! The record of payment events, read side (the write is the ledger's: see `lifecycle`).

use super::SqlStore;
use crate::rows::PaymentRow;
use crate::{Backend, Bind, Sql};
use async_trait::async_trait;
use goods_domain::ports::{PaymentQuery, PaymentRepository};
use goods_domain::{InfraError, PaymentRecord};

/// Every column of `payment_events`, for SELECTs into [`PaymentRow`].
pub(super) const PAYMENT_COLUMNS: &str = "id, event_id, kind, order_id, amount_minor, currency, \
    payment_reference, outcome, received_at";

#[async_trait]
impl<B: Backend> PaymentRepository for SqlStore<B> {
    async fn list_payments(&self, query: &PaymentQuery) -> Result<Vec<PaymentRecord>, InfraError> {
        let mut q = Sql::new(&format!(
            "SELECT {PAYMENT_COLUMNS} FROM payment_events WHERE 1 = 1"
        ));
        if let Some(outcome) = query.outcome {
            q = q
                .sql(" AND outcome = ")
                .bind(Bind::Text(outcome.as_str().to_owned()));
        }
        if let Some(before) = query.before {
            q = q.sql(" AND id < ").bind(Bind::BigInt(before));
        }
        q = q
            .sql(" ORDER BY id DESC LIMIT ")
            .bind(Bind::BigInt(i64::from(query.limit)));
        self.read::<PaymentRow>("list payments", q)
            .await?
            .into_iter()
            .map(PaymentRow::into_domain)
            .collect()
    }
}
