//! The event log: every decision's event, written by the source of truth in the decision's own
//! transaction (which decision yields which events: [`crate::event`]), read back for
//! `/admin/events` and by whatever publishes them to a broker.

use crate::event::EventType;
use crate::{DropId, InfraError};
use async_trait::async_trait;
use time::OffsetDateTime;

/// An event as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its place in the log: later events have larger cursors (`/admin/events?after=`).
    pub cursor: i64,
    /// The CloudEvents `id`: unique, the same on every delivery.
    pub id: String,
    pub kind: EventType,
    /// The CloudEvents `subject`.
    pub subject: String,
    /// The drop whose sequence numbers it, and its number there (1, 2, 3, ... in commit
    /// order, no gaps).
    pub drop: DropId,
    pub dropseq: u64,
    /// When the decision committed.
    pub time: OffsetDateTime,
    /// The CloudEvents `data`, as JSON text.
    pub data: String,
}

/// Which events to read, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    /// Only those after this cursor.
    pub after: Option<i64>,
    pub kind: Option<EventType>,
    pub drop: Option<DropId>,
    pub limit: u32,
}

/// Reads the event log.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Up to `query.limit` events matching `query`, oldest first.
    ///
    /// # Errors
    /// [`InfraError`] when the store fails.
    async fn events(&self, query: &EventQuery) -> Result<Vec<LoggedEvent>, InfraError>;
}
