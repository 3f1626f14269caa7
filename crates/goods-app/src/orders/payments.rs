//! Payments: the payment provider's verified events are the only way an order becomes PAID.
//! The signature is the edge's to check; this use case applies an event once and counts its
//! outcome, and lists recorded events for admins.

use super::Orders;
use crate::{Actor, Role, telemetry};
use goods_domain::ports::{PaymentEventError, PaymentQuery, PaymentRepository};
use goods_domain::{PaymentEvent, PaymentOutcome, PaymentRecord};
use std::sync::Arc;

/// Why recorded events were not listed.
#[derive(Debug, thiserror::Error)]
pub enum ListPaymentsError {
    /// Only admins settle payments.
    #[error("payments are for admins")]
    Forbidden,
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListPayments {
    pub outcome: Option<PaymentOutcome>,
    /// The `nextCursor` of the previous page.
    pub after: Option<i64>,
    /// Page size, 1 to 100.
    pub limit: u32,
}

/// A page of recorded events, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentPage {
    pub items: Vec<PaymentRecord>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<i64>,
}

impl Orders {
    /// Applies a verified provider event once per id (a repeat answers the first outcome); a
    /// payment past the window expires the order, units back to the gate, `REFUND_REQUIRED`.
    #[tracing::instrument(skip_all, fields(order.id = %event.order_id, payment.event_id = event.id.as_str()))]
    pub async fn apply_payment(
        &self,
        event: PaymentEvent,
    ) -> Result<PaymentRecord, PaymentEventError> {
        let now = self.clock.now();
        let applied = self
            .ledger
            .apply_payment(&event, now, self.payment_window)
            .await?;
        if applied.repeated {
            return Ok(applied.record);
        }
        let outcome = applied.record.outcome;
        metrics::counter!(telemetry::PAYMENT_EVENTS, "outcome" => outcome.as_str()).increment(1);
        if outcome == PaymentOutcome::Paid {
            metrics::counter!(telemetry::ORDER_TRANSITIONS, "to" => "PAID").increment(1);
        }
        if outcome.needs_attention() {
            tracing::warn!(
                payment.outcome = outcome.as_str(),
                payment.reference = applied.record.event.reference.as_str(),
                "payment needs an operator: money to return or an amount to check"
            );
        }
        if let Some(order) = &applied.expired {
            self.expired(order).await;
        }
        Ok(applied.record)
    }
}

/// The recorded payment events, over the payment repository alone.
#[derive(Clone)]
pub struct PaymentLog {
    payments: Arc<dyn PaymentRepository>,
}

impl PaymentLog {
    pub fn new(payments: Arc<dyn PaymentRepository>) -> Self {
        Self { payments }
    }

    /// Recorded payment events, newest first, a page at a time (admins).
    #[tracing::instrument(skip_all, fields(user.id = %actor.user_id))]
    pub async fn list(
        &self,
        actor: Actor,
        list: ListPayments,
    ) -> Result<PaymentPage, ListPaymentsError> {
        if actor.role != Role::Admin {
            return Err(ListPaymentsError::Forbidden);
        }
        let limit = list.limit.clamp(1, 100);
        let mut items = self
            .payments
            .list_payments(&PaymentQuery {
                outcome: list.outcome,
                before: list.after,
                // One more than asked tells whether a next page exists.
                limit: limit + 1,
            })
            .await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|r| r.seq)
        } else {
            None
        };
        Ok(PaymentPage { items, next_cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::testing::OrderMocks;
    use crate::test_support::*;
    use goods_domain::ports::AppliedPayment;
    use goods_domain::{
        Currency, Money, OrderStatus, PaymentEventId, PaymentEventKind, PaymentReference,
        PaymentWindow,
    };

    fn event() -> PaymentEvent {
        PaymentEvent {
            id: PaymentEventId::parse("evt_1").unwrap(),
            kind: PaymentEventKind::Succeeded,
            order_id: order_id(),
            amount: Money::parse("amountMinor", 0, Currency::NONE).unwrap(),
            reference: PaymentReference::parse("pi_1").unwrap(),
        }
    }

    fn applied(outcome: PaymentOutcome, repeated: bool, expired: bool) -> AppliedPayment {
        AppliedPayment {
            record: PaymentRecord {
                seq: 1,
                event: event(),
                outcome,
                received_at: OPEN,
            },
            repeated,
            expired: expired.then(|| sample_order(OrderStatus::Expired)),
        }
    }

    #[tokio::test]
    async fn a_payment_that_expired_its_order_frees_the_units_once() {
        let mut m = OrderMocks::new().freeing(1);
        m.ledger
            .expect_apply_payment()
            .withf(|e, now, w| e == &event() && *now == OPEN && *w == PaymentWindow::default())
            .times(1)
            .returning(|_, _, _| Ok(applied(PaymentOutcome::RefundRequired, false, true)));
        let (snapshotter, _guard) = local_metrics();
        let record = m.service().apply_payment(event()).await.unwrap();
        assert_eq!(record.outcome, PaymentOutcome::RefundRequired);
        let counted = counters(&snapshotter);
        assert_eq!(
            counted.get("payment_events_total{outcome=REFUND_REQUIRED}"),
            Some(&1),
            "{counted:?}"
        );
    }

    #[tokio::test]
    async fn a_repeated_event_is_answered_with_its_first_outcome_and_counted_once() {
        let mut m = OrderMocks::new().freeing(0);
        m.ledger
            .expect_apply_payment()
            .returning(|_, _, _| Ok(applied(PaymentOutcome::Paid, true, false)));
        let (snapshotter, _guard) = local_metrics();
        let record = m.service().apply_payment(event()).await.unwrap();
        assert_eq!(record.outcome, PaymentOutcome::Paid);
        assert!(counters(&snapshotter).is_empty());
    }

    #[tokio::test]
    async fn an_event_id_reused_with_another_body_is_refused() {
        let mut m = OrderMocks::new().freeing(0);
        m.ledger
            .expect_apply_payment()
            .returning(|_, _, _| Err(PaymentEventError::EventIdReused));
        let err = m.service().apply_payment(event()).await.unwrap_err();
        assert!(matches!(err, PaymentEventError::EventIdReused), "{err:?}");
    }

    #[tokio::test]
    async fn only_admins_list_payments_and_a_page_ends_where_the_next_begins() {
        let mut payments = goods_domain::ports::MockPaymentRepository::new();
        payments
            .expect_list_payments()
            .withf(|q| q.limit == 3 && q.before == Some(10) && q.outcome.is_none())
            .times(1)
            .returning(|_| {
                Ok((0..3)
                    .map(|i| PaymentRecord {
                        seq: 9 - i,
                        event: event(),
                        outcome: PaymentOutcome::Paid,
                        received_at: OPEN,
                    })
                    .collect())
            });
        let log = PaymentLog::new(Arc::new(payments));
        let list = ListPayments {
            outcome: None,
            after: Some(10),
            limit: 2,
        };
        assert!(matches!(
            log.list(seller(5), list).await,
            Err(ListPaymentsError::Forbidden)
        ));
        let page = log.list(admin(), list).await.unwrap();
        assert_eq!(page.items.iter().map(|r| r.seq).collect::<Vec<_>>(), [9, 8]);
        assert_eq!(page.next_cursor, Some(8));
    }
}
