//! The relay (one instance at a time, the `events` lease): hands the log to the broker in
//! `dropseq` order and marks what it acknowledged; a crash in between republishes under the
//! same id, a repeat. A broker that is down only grows the backlog.

use crate::telemetry;
use goods_domain::InfraError;
use goods_domain::ports::{Clock, EventBroker, EventLog, LoggedEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Events read per round.
pub const RELAY_BATCH: u32 = 500;

/// The wait after the first round the broker took nothing from; doubled after each such round
/// in a row, up to [`MAX_BACKOFF`]. A broker that is down or stalled then costs the database one
/// read of the waiting events every few seconds, not ten a second.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between two rounds while the broker takes nothing: also how late, at most,
/// the backlog starts to drain once it is back.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// When the next round may run, after rounds in a row that the broker took nothing from (on
/// the runtime's clock: a matter of the relay's pace, not of business time).
#[derive(Debug, Default)]
struct Backoff {
    wait: Option<Duration>,
    until: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelayReport {
    pub published: usize,
    /// Drops whose publication stopped short (their rest waits, in order).
    pub failed: usize,
}

/// The log, the broker and the clock that marks publications.
#[derive(Clone)]
pub struct Relay {
    log: Arc<dyn EventLog>,
    broker: Arc<dyn EventBroker>,
    clock: Arc<dyn Clock>,
    backoff: Arc<Mutex<Backoff>>,
}

impl Relay {
    pub fn new(
        log: Arc<dyn EventLog>,
        broker: Arc<dyn EventBroker>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            log,
            broker,
            clock,
            backoff: Arc::default(),
        }
    }

    /// A round on the relay's schedule: `None` while it backs off from a broker that took
    /// nothing in the last round (`FIRST_BACKOFF`, doubling to `MAX_BACKOFF`); any event
    /// the broker acknowledges ends the backoff.
    pub async fn tick(&self) -> Result<Option<RelayReport>, InfraError> {
        let now = Instant::now();
        if self
            .backoff
            .lock()
            .ok()
            .and_then(|b| b.until)
            .is_some_and(|until| now < until)
        {
            return Ok(None);
        }
        let report = self.relay_once().await?;
        if let Ok(mut backoff) = self.backoff.lock() {
            if report.failed > 0 && report.published == 0 {
                let wait = backoff
                    .wait
                    .map_or(FIRST_BACKOFF, |w| w.saturating_mul(2).min(MAX_BACKOFF));
                *backoff = Backoff {
                    wait: Some(wait),
                    until: Some(now + wait),
                };
            } else {
                *backoff = Backoff::default();
            }
        }
        Ok(Some(report))
    }

    /// One round: up to [`RELAY_BATCH`] unpublished events, each drop's published in order
    /// and marked up to the last one the broker acknowledged. A drop that fails stops there
    /// (its later events must not overtake it); the others go on.
    pub async fn relay_once(&self) -> Result<RelayReport, InfraError> {
        let events = self.log.pending_events(RELAY_BATCH).await?;
        let mut report = RelayReport::default();
        for drop in events.chunk_by(|a, b| a.drop == b.drop) {
            let (acked, unreachable) = match self.broker.publish(drop).await {
                Ok(publication) => {
                    if let Some(id) = &publication.impostor {
                        metrics::counter!(telemetry::EVENTS_IMPOSTORS).increment(1);
                        tracing::error!(
                            severity = "critical",
                            event.id = %id,
                            drop.id = %drop[0].drop,
                            "the stream holds another message under this event's id: not delivered; tried again"
                        );
                    }
                    (publication.acked.min(drop.len()), false)
                }
                Err(error) => {
                    tracing::warn!(error = %error, drop.id = %drop[0].drop, "events not published; next round tries again");
                    (0, true)
                }
            };
            if acked < drop.len() {
                report.failed += 1;
                metrics::counter!(telemetry::EVENTS_PUBLISH_FAILURES).increment(1);
            }
            if unreachable {
                // Not even the first event was handed over: the broker is down or stalled, and
                // every other drop would wait out the same timeout. The next round tries again.
                break;
            }
            let Some(last) = acked.checked_sub(1).map(|i| &drop[i]) else {
                continue;
            };
            self.log
                .mark_relayed(last.drop, last.dropseq, self.clock.now())
                .await?;
            report.published += acked;
            count(&drop[..acked]);
        }
        Ok(report)
    }

    /// Sets the backlog gauges from the log.
    pub async fn record_backlog(&self) -> Result<(), InfraError> {
        let backlog = self.log.backlog().await?;
        #[allow(clippy::cast_precision_loss)]
        metrics::gauge!(telemetry::EVENTS_PENDING).set(backlog.pending as f64);
        let age = backlog.oldest.map_or(0.0, |oldest| {
            (self.clock.now() - oldest).as_seconds_f64().max(0.0)
        });
        metrics::gauge!(telemetry::EVENTS_OLDEST_AGE).set(age);
        Ok(())
    }
}

fn count(published: &[LoggedEvent]) {
    for event in published {
        metrics::counter!(telemetry::EVENTS_PUBLISHED, "type" => event.kind.as_str()).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::ports::{Backlog, MockClock, MockEventBroker, MockEventLog, Publication};
    use goods_domain::{DropId, EventType};
    use time::OffsetDateTime;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-12-02 09:00 UTC);

    fn event(drop: i64, seq: u64) -> LoggedEvent {
        LoggedEvent {
            cursor: drop * 100 + i64::try_from(seq).unwrap(),
            id: format!("goods-{drop}-{seq}"),
            kind: EventType::OrderPlaced,
            subject: "orders/1".into(),
            drop: DropId::parse(drop).unwrap(),
            dropseq: seq,
            time: NOW,
            data: "{}".into(),
        }
    }

    fn clock() -> Arc<MockClock> {
        let mut clock = MockClock::new();
        clock.expect_now().return_const(NOW);
        Arc::new(clock)
    }

    #[tokio::test]
    async fn each_drop_is_marked_up_to_what_the_broker_acknowledged_and_a_failure_stops_only_its_drop()
     {
        let mut log = MockEventLog::new();
        log.expect_pending_events().returning(|_| {
            Ok(vec![
                event(1, 1),
                event(1, 2),
                event(1, 3),
                event(2, 7),
                event(3, 1),
            ])
        });
        let mut broker = MockEventBroker::new();
        // Drop 1: the broker acknowledged two of three; drop 2: all; drop 3: it was down.
        broker
            .expect_publish()
            .withf(|e| e.len() == 3 && e.iter().all(|e| e.drop.get() == 1))
            .times(1)
            .returning(|_| Ok(Publication::acked(2)));
        broker
            .expect_publish()
            .withf(|e| e.len() == 1 && e[0].drop.get() == 2)
            .times(1)
            .returning(|_| Ok(Publication::acked(1)));
        broker
            .expect_publish()
            .withf(|e| e[0].drop.get() == 3)
            .times(1)
            .returning(|_| Err(InfraError::msg("broker down")));
        log.expect_mark_relayed()
            .withf(|d, seq, at| d.get() == 1 && *seq == 2 && *at == NOW)
            .times(1)
            .returning(|_, _, _| Ok(()));
        log.expect_mark_relayed()
            .withf(|d, seq, _| d.get() == 2 && *seq == 7)
            .times(1)
            .returning(|_, _, _| Ok(()));
        let relay = Relay::new(Arc::new(log), Arc::new(broker), clock());
        assert_eq!(
            relay.relay_once().await.unwrap(),
            RelayReport {
                published: 3,
                failed: 2
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_broker_that_takes_nothing_is_tried_less_often_until_it_takes_an_event() {
        let mut log = MockEventLog::new();
        log.expect_pending_events()
            .returning(|_| Ok(vec![event(1, 1), event(2, 1)]));
        log.expect_mark_relayed().returning(|_, _, _| Ok(()));
        let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tried = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut broker = MockEventBroker::new();
        let (is_up, tries) = (Arc::clone(&up), Arc::clone(&tried));
        broker.expect_publish().returning(move |events| {
            tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if is_up.load(std::sync::atomic::Ordering::SeqCst) {
                Ok(Publication::acked(events.len()))
            } else {
                Err(InfraError::msg("ack timed out"))
            }
        });
        let relay = Relay::new(Arc::new(log), Arc::new(broker), clock());
        // The relay's 100 ms ticks over 10 s with the broker down: the first round, then one
        // after each wait (200, 400, 800, 1600, 3200 ms, then 5 s), and each round stops at the
        // first drop the broker did not take.
        let mut rounds = Vec::new();
        for tick in 0..100 {
            if relay.tick().await.unwrap().is_some() {
                rounds.push(tick * 100);
            }
            tokio::time::advance(Duration::from_millis(100)).await;
        }
        assert_eq!(rounds, [0, 200, 600, 1400, 3000, 6200]);
        assert_eq!(tried.load(std::sync::atomic::Ordering::SeqCst), 6);
        // Back: the next round after the wait publishes both drops, and the backoff ends.
        up.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(10)).await;
        let report = relay.tick().await.unwrap();
        assert_eq!(
            report,
            Some(RelayReport {
                published: 2,
                failed: 0
            })
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(
            relay.tick().await.unwrap().is_some(),
            "no backoff once back"
        );
    }

    /// A repeat the broker holds another message for is not delivered: the drop is marked up
    /// to the event before it, the impostor counted, and the next round sends it again.
    #[tokio::test]
    async fn an_event_whose_id_the_stream_holds_for_another_message_is_not_delivered() {
        let mut log = MockEventLog::new();
        log.expect_pending_events()
            .returning(|_| Ok(vec![event(1, 1), event(1, 2), event(1, 3)]));
        log.expect_mark_relayed()
            .withf(|d, seq, _| d.get() == 1 && *seq == 1)
            .times(2)
            .returning(|_, _, _| Ok(()));
        let mut broker = MockEventBroker::new();
        broker.expect_publish().times(2).returning(|events| {
            Ok(Publication {
                acked: 1,
                impostor: Some(events[1].id.clone()),
            })
        });
        let (metrics, _guard) = crate::test_support::local_metrics();
        let relay = Relay::new(Arc::new(log), Arc::new(broker), clock());
        for _ in 0..2 {
            assert_eq!(
                relay.relay_once().await.unwrap(),
                RelayReport {
                    published: 1,
                    failed: 1
                }
            );
        }
        let counted = crate::test_support::counters(&metrics);
        assert_eq!(
            counted.get("events_impostors_total{}"),
            Some(&2),
            "{counted:?}"
        );
    }

    #[tokio::test]
    async fn an_empty_log_publishes_nothing() {
        let mut log = MockEventLog::new();
        log.expect_pending_events().returning(|_| Ok(Vec::new()));
        log.expect_mark_relayed().never();
        log.expect_backlog().returning(|| Ok(Backlog::default()));
        let mut broker = MockEventBroker::new();
        broker.expect_publish().never();
        let relay = Relay::new(Arc::new(log), Arc::new(broker), clock());
        assert_eq!(relay.relay_once().await.unwrap(), RelayReport::default());
        relay.record_backlog().await.unwrap();
    }
}
