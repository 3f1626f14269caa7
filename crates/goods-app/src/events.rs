//! The event log, read by admins (`GET /admin/events`): every decision's event as the store
//! wrote it in the decision's transaction, oldest first, a page at a time. A feature of its
//! own: it holds only the log it reads.

mod relay;

pub use relay::{RELAY_BATCH, Relay, RelayReport};

use crate::{Actor, Role};
use goods_domain::ports::{EventLog, EventQuery, LoggedEvent};
use goods_domain::{DropId, EventType};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ListEventsError {
    /// Only admins read the whole log.
    #[error("events are for admins")]
    Forbidden,
    #[error(transparent)]
    Infra(#[from] goods_domain::InfraError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListEvents {
    /// The `nextCursor` of the previous page.
    pub after: Option<i64>,
    pub kind: Option<EventType>,
    pub drop: Option<DropId>,
    /// Page size, 1 to [`ListEvents::MAX_LIMIT`].
    pub limit: u32,
}

impl ListEvents {
    pub const DEFAULT_LIMIT: u32 = 20;
    pub const MAX_LIMIT: u32 = 100;
}

/// A page of events, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    pub items: Vec<LoggedEvent>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<i64>,
}

/// How long events are kept (`EVENTS_RETENTION_S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub keep: std::time::Duration,
    /// With a broker, an event is deleted only once published: nothing is lost to the
    /// retention while the broker is down.
    pub published_only: bool,
}

/// Events deleted per statement, and statements per pass at most.
const PRUNE_BATCH: u32 = 1000;
const PRUNE_BATCHES: u32 = 5;

#[derive(Clone)]
pub struct Events {
    log: Arc<dyn EventLog>,
}

impl Events {
    pub fn new(log: Arc<dyn EventLog>) -> Self {
        Self { log }
    }

    /// A page of events matching `list` (admins).
    #[tracing::instrument(skip_all, fields(user.id = %actor.user_id))]
    pub async fn list(&self, actor: Actor, list: ListEvents) -> Result<EventPage, ListEventsError> {
        if actor.role != Role::Admin {
            return Err(ListEventsError::Forbidden);
        }
        let limit = list.limit.clamp(1, ListEvents::MAX_LIMIT);
        let mut items = self
            .log
            .events(&EventQuery {
                after: list.after,
                kind: list.kind,
                drop: list.drop,
                // One more than asked tells whether a next page exists.
                limit: limit + 1,
            })
            .await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|e| e.cursor)
        } else {
            None
        };
        Ok(EventPage { items, next_cursor })
    }

    /// Deletes events older than `retention` at `now`, in bounded batches (at most
    /// `PRUNE_BATCH` x `PRUNE_BATCHES` per call, so one pass never holds the log long): how
    /// many it deleted.
    pub async fn prune(
        &self,
        now: time::OffsetDateTime,
        retention: Retention,
    ) -> Result<u64, goods_domain::InfraError> {
        let before = now - retention.keep;
        let mut deleted = 0;
        for _ in 0..PRUNE_BATCHES {
            let n = self
                .log
                .prune(before, retention.published_only, PRUNE_BATCH)
                .await?;
            deleted += n;
            if n < u64::from(PRUNE_BATCH) {
                break;
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::UserId;
    use goods_domain::ports::MockEventLog;

    fn actor(role: Role) -> Actor {
        Actor {
            user_id: UserId::parse(9).unwrap(),
            role,
        }
    }

    fn logged(cursor: i64) -> LoggedEvent {
        LoggedEvent {
            cursor,
            id: format!("goods-1-{cursor}"),
            kind: EventType::OrderPlaced,
            subject: format!("orders/{cursor}"),
            drop: DropId::parse(1).unwrap(),
            dropseq: u64::try_from(cursor).unwrap(),
            time: time::OffsetDateTime::UNIX_EPOCH,
            data: "{}".into(),
        }
    }

    fn list(limit: u32) -> ListEvents {
        ListEvents {
            after: Some(4),
            kind: Some(EventType::OrderPlaced),
            drop: DropId::parse(1).ok(),
            limit,
        }
    }

    #[tokio::test]
    async fn pruning_deletes_in_bounded_batches_before_the_retention_only() {
        let now = time::macros::datetime!(2026-12-09 09:00 UTC);
        let mut log = MockEventLog::new();
        let mut left = 2500_u64;
        log.expect_prune()
            .withf(move |before, published_only, limit| {
                *before == now - time::Duration::days(7) && *published_only && *limit == 1000
            })
            .times(3)
            .returning(move |_, _, limit| {
                let n = left.min(u64::from(limit));
                left -= n;
                Ok(n)
            });
        let events = Events::new(Arc::new(log));
        let retention = Retention {
            keep: std::time::Duration::from_secs(7 * 24 * 3600),
            published_only: true,
        };
        assert_eq!(events.prune(now, retention).await.unwrap(), 2500);
    }

    #[tokio::test]
    async fn only_admins_read_the_log_and_nothing_is_read_for_the_others() {
        let mut log = MockEventLog::new();
        log.expect_events().never();
        let events = Events::new(Arc::new(log));
        for role in [Role::Buyer, Role::Seller] {
            assert!(matches!(
                events.list(actor(role), list(10)).await,
                Err(ListEventsError::Forbidden)
            ));
        }
    }

    #[tokio::test]
    async fn a_full_page_names_the_next_cursor_and_the_last_page_none() {
        let mut log = MockEventLog::new();
        log.expect_events()
            .withf(|q| {
                q.after == Some(4)
                    && q.kind == Some(EventType::OrderPlaced)
                    && q.drop == DropId::parse(1).ok()
                    && q.limit == 3
            })
            .times(1)
            .returning(|_| Ok((5..8).map(logged).collect()));
        log.expect_events()
            .withf(|q| q.limit == 101)
            .times(1)
            .returning(|_| Ok((5..7).map(logged).collect()));
        let events = Events::new(Arc::new(log));
        let page = events.list(actor(Role::Admin), list(2)).await.unwrap();
        assert_eq!(
            page.items.iter().map(|e| e.cursor).collect::<Vec<_>>(),
            [5, 6]
        );
        assert_eq!(page.next_cursor, Some(6));
        let page = events.list(actor(Role::Admin), list(1000)).await.unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.next_cursor, None);
    }
}
