//! Pause, resume and close, for the product's seller or an admin, each an event naming who.
//! Other instances see the change at their next refresh; a close is exact fleet-wide anyway,
//! since the purchase transaction refuses a closed drop.

use super::Drops;
use crate::{Actor, DropView, telemetry};
use goods_domain::ports::{DomainEvent, DropOperation};
use goods_domain::{Closing, DropId, DropTransitionError, InfraError, LimitedDrop};

/// Why a drop operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum OperateDropError {
    /// No such drop, or the caller does not manage it.
    #[error("drop not found")]
    NotFound,
    /// Pausing or resuming a drop whose sale has ended.
    #[error("the drop is closed")]
    Closed,
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl Drops {
    /// Pauses (`true`) or resumes (`false`) a drop; paused, purchases are refused `DROP_PAUSED`
    /// before the gate. Idempotent.
    #[tracing::instrument(skip_all, fields(drop.id = %id, paused))]
    pub async fn set_paused(
        &self,
        id: DropId,
        actor: Actor,
        paused: bool,
    ) -> Result<DropView, OperateDropError> {
        let drop = self
            .managed(id, actor)
            .await?
            .ok_or(OperateDropError::NotFound)?;
        let now = self.clock.now();
        drop.set_paused(now, paused)
            .map_err(|DropTransitionError::Closed| OperateDropError::Closed)?;
        let stored = self
            .drops
            .set_paused(id, paused)
            .await?
            .ok_or(OperateDropError::NotFound)?;
        let operation = if paused {
            DropOperation::Paused
        } else {
            DropOperation::Resumed
        };
        self.operated(stored, operation, actor).await
    }

    /// Ends a drop's sale now: no order commits after this returns, the gate forgets the drop
    /// after a grace, and the product may get a new drop (unsold units never left its stock).
    /// Closing again changes nothing.
    ///
    /// # Errors
    /// `NotFound` also for another seller's drop.
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn close(&self, id: DropId, actor: Actor) -> Result<DropView, OperateDropError> {
        let drop = self
            .managed(id, actor)
            .await?
            .ok_or(OperateDropError::NotFound)?;
        let now = self.clock.now();
        let Closing::CloseAt(at) = drop.close(now) else {
            return self.view(drop).await;
        };
        let stored = self
            .drops
            .close(id, at)
            .await?
            .ok_or(OperateDropError::NotFound)?;
        if let Some(gate) = &self.gate
            && let Err(error) = gate.closed(id, stored.ends_at()).await
        {
            // Its keys still expire an hour after closeAt; nothing is admitted meanwhile.
            tracing::warn!(drop.id = %id, error = %error, "gate not told of the close");
        }
        self.operated(stored, DropOperation::Closed, actor).await
    }

    async fn operated(
        &self,
        drop: LimitedDrop,
        operation: DropOperation,
        actor: Actor,
    ) -> Result<DropView, OperateDropError> {
        self.cache.put(drop.clone());
        self.core.announce_change();
        metrics::counter!(telemetry::DROP_OPERATIONS, "operation" => operation.as_str())
            .increment(1);
        let event = DomainEvent::DropOperated {
            drop_id: drop.id,
            operation,
            by: actor.user_id,
        };
        if let Err(error) = self.events.publish(event).await {
            tracing::warn!(error = %error, "drop operation event not published");
        }
        self.view(drop).await
    }

    async fn view(&self, drop: LimitedDrop) -> Result<DropView, OperateDropError> {
        Ok(self.view_of(drop).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drops::testing::DropMocks;
    use crate::test_support::*;
    use goods_domain::ports::MockAdmissionGate;

    fn closed(drop: LimitedDrop, at: time::OffsetDateTime) -> LimitedDrop {
        LimitedDrop {
            closed_at: Some(at),
            paused: false,
            ..drop
        }
    }

    #[tokio::test]
    async fn closing_stores_the_close_tells_the_gate_and_refuses_purchases_from_then_on() {
        let mut m = Mocks::at(OPEN);
        let drop = sample_drop(10, 1);
        m.drops.expect_get().returning({
            let drop = drop.clone();
            move |_| Ok(Some(drop.clone()))
        });
        m.drops
            .expect_close()
            .withf(|_, at| *at == OPEN)
            .times(1)
            .returning(move |_, at| Ok(Some(closed(drop.clone(), at))));
        m.drops.expect_sold_quantity().returning(|_| Ok(0));
        m.events.expect_publish().times(1).returning(|event| {
            assert!(matches!(
                event,
                DomainEvent::DropOperated {
                    operation: DropOperation::Closed,
                    ..
                }
            ));
            Ok(())
        });
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_closed()
            .withf(|_, at| *at == OPEN)
            .times(1)
            .returning(|_, _| Ok(()));
        gate.expect_remaining()
            .returning(|_| Ok(Some(goods_domain::ports::whole_units(10))));
        // A replay still wins over CLOSED, so the refusal looks for one first.
        m.orders.expect_find_by_key().returning(|_, _| Ok(None));
        let app = m.app(Some(gate));
        let view = app.drops().close(drop_id(), admin()).await.unwrap();
        assert_eq!(view.status, goods_domain::DropStatus::Closed);
        // The cache has the close: the next purchase is refused before any port.
        let refused = app
            .purchase(crate::PurchaseCommand {
                drop_id: drop_id(),
                user_id: buyer().user_id,
                sku: None,
                quantity: qty(1),
                key: key(),
            })
            .await;
        assert!(matches!(
            refused,
            Err(crate::PurchaseError::Refused(
                goods_domain::PurchaseRejection::Closed
            ))
        ));
    }

    #[tokio::test]
    async fn closing_a_closed_drop_answers_the_same_and_writes_nothing() {
        let mut m = DropMocks::new();
        // Not the default drop served: this one is closed.
        let drop = closed(sample_drop(10, 1), OPEN);
        m.drops = drops_serving(drop.clone());
        m.drops.expect_close().never();
        m.events.expect_publish().never();
        m.core.expect_announce_change().never();
        let view = m.service().close(drop_id(), admin()).await.unwrap();
        assert_eq!(view.drop, drop);
        assert_eq!(view.status, goods_domain::DropStatus::Closed);
    }

    #[tokio::test]
    async fn a_closed_drop_cannot_be_paused_and_another_sellers_drop_is_not_found() {
        let mut m = DropMocks::new();
        // Not the default drop served: this one is closed.
        let drop = closed(sample_drop(10, 1), OPEN);
        m.drops = drops_serving(drop);
        m.drops.expect_set_paused().never();
        m.products.expect_get().returning(|_| Ok(None));
        let drops = m.service();
        let err = drops
            .set_paused(drop_id(), admin(), true)
            .await
            .unwrap_err();
        assert!(matches!(err, OperateDropError::Closed));
        let err = drops
            .set_paused(drop_id(), seller(7), true)
            .await
            .unwrap_err();
        assert!(matches!(err, OperateDropError::NotFound));
    }
}
