//! The event log, read by admins (`GET /admin/events`): every decision's event as the store
//! wrote it in the decision's transaction, oldest first, a page at a time. A feature of its
//! own: it holds only the log it reads.

use crate::{Actor, Role};
use goods_domain::ports::{EventLog, EventQuery, LoggedEvent};
use goods_domain::{DropId, EventType};
use std::sync::Arc;

/// Why events were not listed.
#[derive(Debug, thiserror::Error)]
pub enum ListEventsError {
    /// Only admins read the whole log.
    #[error("events are for admins")]
    Forbidden,
    /// The store failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Which events to list.
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

/// Reading the event log.
#[derive(Clone)]
pub struct Events {
    log: Arc<dyn EventLog>,
}

impl Events {
    pub fn new(log: Arc<dyn EventLog>) -> Self {
        Self { log }
    }

    /// A page of events matching `list` (admins).
    ///
    /// # Errors
    /// [`ListEventsError::Forbidden`] unless `actor` is an admin; `Unexpected` when the store
    /// fails.
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
            .await
            .map_err(anyhow::Error::new)?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|e| e.cursor)
        } else {
            None
        };
        Ok(EventPage { items, next_cursor })
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
