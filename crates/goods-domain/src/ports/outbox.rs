//! The outbox: events that must survive a lost log line are written to the source of truth
//! first, once, and handed to the [`EventPublisher`](crate::ports::EventPublisher) afterwards.

use crate::InfraError;
use crate::ports::DomainEvent;
use async_trait::async_trait;
use time::OffsetDateTime;

/// A recorded event and its id; the id travels with every publication, so a consumer that
/// sees the same event twice (a crash between publishing and marking) drops the second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The event's id, unique and stable.
    pub id: i64,
    pub event: DomainEvent,
}

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventOutbox: Send + Sync + 'static {
    /// Records `event` under `key` unless that key exists, with `facts` (one drop's) in the event
    /// log, in one transaction: `true` when this call did; concurrent callers record them once.
    async fn record_once(
        &self,
        key: &str,
        event: &DomainEvent,
        facts: &[crate::Fact],
        at: OffsetDateTime,
    ) -> Result<bool, InfraError>;

    /// Up to `limit` events not marked published yet, oldest first.
    async fn unpublished(&self, limit: u32) -> Result<Vec<OutboxEntry>, InfraError>;

    async fn mark_published(&self, id: i64, at: OffsetDateTime) -> Result<(), InfraError>;
}
