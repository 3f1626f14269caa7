//! Domain events that operators must hear about.

use crate::{DropId, InfraError};
use async_trait::async_trait;

/// Something an alert should fire on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainEvent {
    /// Reconciliation found more units sold than the drop allows (`source=oversell`,
    /// `severity=critical`). Must never happen; if it does, a human must look now.
    Oversold {
        /// The drop.
        drop_id: DropId,
        /// Its limit.
        limited_quantity: u32,
        /// Units the database says are sold.
        sold_quantity: u32,
    },
    /// The admission gate cannot be reached; purchases fall back to the database
    /// (`severity=warning`).
    GateDegraded {
        /// What failed.
        reason: String,
    },
}

/// Publishes domain events (a log line and a metric today; an outbox later).
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventPublisher: Send + Sync + 'static {
    /// Publishes `event`.
    ///
    /// # Errors
    /// [`InfraError`] when the event could not be handed over.
    async fn publish(&self, event: DomainEvent) -> Result<(), InfraError>;
}
