//! The event log: every decision's event, written by the source of truth in the decision's own
//! transaction (which decision yields which events: [`crate::event`]), read back for
//! `/admin/events` and by whatever publishes them to a broker.

use crate::event::{EventType, Fact};
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

impl LoggedEvent {
    /// The event as CloudEvents 1.0 structured JSON (with the `dropseq` extension): the same
    /// bytes at `/admin/events` and on the broker.
    pub fn to_cloud_event(&self) -> String {
        use time::format_description::well_known::Rfc3339;
        let time = self
            .time
            .checked_to_offset(time::UtcOffset::UTC)
            .and_then(|utc| utc.format(&Rfc3339).ok())
            .unwrap_or_default();
        let data = if self.data.trim().is_empty() {
            "null"
        } else {
            &self.data
        };
        format!(
            concat!(
                r#"{{"specversion":"1.0","id":{},"source":"/limited-drops","type":{},"#,
                r#""subject":{},"time":{},"datacontenttype":"application/json","#,
                r#""dropseq":{},"data":{}}}"#
            ),
            json_string(&self.id),
            json_string(self.kind.as_str()),
            json_string(&self.subject),
            json_string(&time),
            self.dropseq,
            data,
        )
    }

    /// The broker subject: `goods.<dropId>.<type without "goods.">`.
    pub fn broker_subject(&self) -> String {
        let kind = self.kind.as_str();
        format!(
            "goods.{}.{}",
            self.drop,
            kind.strip_prefix("goods.").unwrap_or(kind)
        )
    }
}

/// `s` as a JSON string (RFC 8259: quotes, backslashes and control characters escaped).
fn json_string(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

/// What waits to be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    pub pending: u64,
    /// When the oldest of them was written; `None` when nothing waits.
    pub oldest: Option<OffsetDateTime>,
}

/// Reads the event log, and keeps its publication state.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Up to `query.limit` events matching `query`, oldest first.
    async fn events(&self, query: &EventQuery) -> Result<Vec<LoggedEvent>, InfraError>;

    /// Writes `facts`, all of one drop, at `at`, in a transaction of their own: for what is
    /// found rather than decided (an oversell seen by reconciliation).
    async fn record(&self, facts: &[Fact], at: OffsetDateTime) -> Result<(), InfraError>;

    /// Writes the gate fact `fact` (degraded or recovered) at `at`, in a transaction of its own,
    /// only if it is news for its drop ([`crate::event::gate_fact_is_news`] against the drop's
    /// latest gate event, read under the drop row's lock): whether it was written.
    async fn record_gate(&self, fact: &Fact, at: OffsetDateTime) -> Result<bool, InfraError>;

    /// Up to `limit` events not published yet, by drop and, within a drop, in `dropseq`
    /// order. A drop's event is committed only after every smaller number of the drop (the
    /// numbers follow commit order), so a drop's unpublished events have no hole.
    async fn pending_events(&self, limit: u32) -> Result<Vec<LoggedEvent>, InfraError>;

    /// Marks `drop`'s events up to and including `dropseq` published at `at`.
    async fn mark_relayed(
        &self,
        drop: DropId,
        dropseq: u64,
        at: OffsetDateTime,
    ) -> Result<(), InfraError>;

    /// Deletes up to `limit` events written before `before` (oldest first), only those
    /// published when `published_only`: how many it deleted.
    async fn prune(
        &self,
        before: OffsetDateTime,
        published_only: bool,
        limit: u32,
    ) -> Result<u64, InfraError>;

    /// How many events wait to be published, and since when.
    async fn backlog(&self) -> Result<Backlog, InfraError>;
}

/// What a broker took of a drop's events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Publication {
    /// How many of them, from the first, it acknowledged as stored.
    pub acked: usize,
    /// The id of the next one, when the broker answered that it already holds a message under
    /// that id and the message is not this event: someone else published under the event's id
    /// (a forgery, or another service writing to the stream), so this event is not delivered.
    pub impostor: Option<String>,
}

impl Publication {
    /// `acked` events acknowledged, no impostor.
    pub fn acked(acked: usize) -> Self {
        Self {
            acked,
            impostor: None,
        }
    }
}

/// A message broker that stores events (NATS JetStream; Kafka would be another adapter).
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait EventBroker: Send + Sync + 'static {
    /// Publishes `events` in order, each under its id, and answers how many from the first the
    /// broker acknowledged (the rest go again later). A repeat counts only if the broker's
    /// message under that id is this event; otherwise it stops there, naming the impostor.
    ///
    /// # Errors
    /// [`InfraError`] when not even the first could be handed over.
    async fn publish(&self, events: &[LoggedEvent]) -> Result<Publication, InfraError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_written_as_cloud_events_json_with_its_strings_escaped() {
        let event = LoggedEvent {
            cursor: 9,
            id: "goods-4-2".into(),
            kind: EventType::OrderPlaced,
            subject: "orders/\"7\"\\\n".into(),
            drop: DropId::parse(4).unwrap(),
            dropseq: 2,
            time: time::macros::datetime!(2026-12-02 09:00:00.5 +09:00),
            data: r#"{"orderId":7}"#.into(),
        };
        assert_eq!(
            event.to_cloud_event(),
            concat!(
                r#"{"specversion":"1.0","id":"goods-4-2","source":"/limited-drops","#,
                r#""type":"goods.order.placed","subject":"orders/\"7\"\\\u000a","#,
                r#""time":"2026-12-02T00:00:00.5Z","datacontenttype":"application/json","#,
                r#""dropseq":2,"data":{"orderId":7}}"#
            )
        );
        assert_eq!(event.broker_subject(), "goods.4.order.placed");
    }
}
