//! Domain events that operators must hear about.

use crate::{DropId, InfraError, UserId};
use async_trait::async_trait;

/// Something an alert should fire on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainEvent {
    /// Reconciliation found more units sold than the drop allows (`source=oversell`,
    /// `severity=critical`). Must never happen; if it does, a human must look now.
    Oversold {
        drop_id: DropId,
        limited_quantity: u32,
        /// Units the database says are sold.
        sold_quantity: u32,
        /// A drop in sizes: each oversold size with its limit and units sold.
        sizes: Vec<crate::SizeSold>,
    },
    /// The admission gate cannot be reached; purchases fall back to the database
    /// (`severity=warning`).
    GateDegraded { reason: String },
    /// A seller or an admin paused, resumed or closed a drop (`severity=info`).
    DropOperated {
        drop_id: DropId,
        operation: DropOperation,
        by: UserId,
    },
    /// An admin set a runtime flag (`severity=info`).
    FlagSet {
        name: crate::ports::FlagName,
        enabled: bool,
        by: UserId,
    },
}

/// An operation on a running drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropOperation {
    /// Purchases refused with `DROP_PAUSED` from now on.
    Paused,
    Resumed,
    /// The sale ended now.
    Closed,
}

impl DropOperation {
    /// The name in logs, metrics and stored events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::Resumed => "resumed",
            Self::Closed => "closed",
        }
    }

    /// The operation named `name` by [`Self::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Paused, Self::Resumed, Self::Closed]
            .into_iter()
            .find(|op| op.as_str() == name)
    }
}

/// Publishes domain events (a log line and a metric today; an outbox later).
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventPublisher: Send + Sync + 'static {
    async fn publish(&self, event: DomainEvent) -> Result<(), InfraError>;
}
