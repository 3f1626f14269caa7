//! The broker against a real `nats-server` with JetStream of the test's own: the stream made
//! when missing, one message per event in order under its id, a repeat dropped, and a broker
//! that is down or paused answered within the acknowledgement bound, then served again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adapters_nats::{NatsBroker, NatsConfig};
use goods_domain::ports::{EventBroker, LoggedEvent, Publication};
use goods_domain::{DropId, EventType};
use std::time::{Duration, Instant};
use test_support::nats::{PrivateNats, stored};

const STREAM: &str = "GOODS_EVENTS_TEST";

fn config(server: &PrivateNats) -> NatsConfig {
    NatsConfig {
        url: server.url(),
        stream: STREAM.into(),
        credentials_file: None,
        tls_ca_file: None,
        ack_timeout: Duration::from_millis(500),
    }
}

fn event(drop: i64, seq: u64) -> LoggedEvent {
    LoggedEvent {
        cursor: i64::try_from(seq).unwrap(),
        id: format!("goods-{drop}-{seq}"),
        kind: if seq == 1 {
            EventType::DropCreated
        } else {
            EventType::OrderPlaced
        },
        subject: format!("orders/{seq}"),
        drop: DropId::parse(drop).unwrap(),
        dropseq: seq,
        time: time::OffsetDateTime::UNIX_EPOCH,
        data: format!(r#"{{"orderId":{seq}}}"#),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_stored_in_order_under_their_ids_and_a_repeat_is_dropped() {
    let server = PrivateNats::start();
    let broker = NatsBroker::connect(&config(&server)).await.unwrap();
    let events: Vec<LoggedEvent> = (1..=50).map(|seq| event(7, seq)).collect();
    assert_eq!(
        broker.publish(&events).await.unwrap(),
        Publication::acked(50)
    );
    // A relay that died after the broker's ack but before marking sends them again.
    assert_eq!(
        broker.publish(&events[40..]).await.unwrap(),
        Publication::acked(10)
    );
    let messages = stored(&server.url(), STREAM).await;
    assert_eq!(messages.len(), 50, "the ten repeats were dropped");
    for (message, event) in messages.iter().zip(&events) {
        assert_eq!(message.subject, event.broker_subject());
        assert_eq!(message.id, event.id);
        assert_eq!(message.payload, event.to_cloud_event());
    }
    assert_eq!(messages[0].subject, "goods.7.drop.created");
    assert_eq!(messages[1].subject, "goods.7.order.placed");
}

/// Someone who may publish to the stream writes a message under a future event's id first:
/// the broker's "duplicate" answer for that event is not taken as delivered, since the stored
/// message is not the event. A genuine repeat (the relay sending its own event again) is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_counts_as_delivered_only_when_the_stored_message_is_the_event() {
    let server = PrivateNats::start();
    let broker = NatsBroker::connect(&config(&server)).await.unwrap();
    let events: Vec<LoggedEvent> = (1..=3).map(|seq| event(9, seq)).collect();
    assert_eq!(
        broker.publish(&events[..1]).await.unwrap(),
        Publication::acked(1)
    );
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut forged = async_nats::HeaderMap::new();
    forged.insert("Nats-Msg-Id", events[1].id.as_str());
    js.publish_with_headers(
        events[1].broker_subject(),
        forged,
        r#"{"id":"goods-9-2","type":"goods.order.placed","data":{"orderId":666}}"#.into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    for _ in 0..2 {
        assert_eq!(
            broker.publish(&events).await.unwrap(),
            Publication {
                acked: 1,
                impostor: Some("goods-9-2".into())
            },
            "the first a genuine repeat, the second not delivered, the third not sent"
        );
    }
    let messages = stored(&server.url(), STREAM).await;
    assert_eq!(messages.len(), 2, "the event and the forgery");
    assert_eq!(messages[0].payload, events[0].to_cloud_event());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_is_down_or_paused_is_answered_within_the_bound_and_served_again() {
    let mut server = PrivateNats::start();
    let broker = NatsBroker::connect(&config(&server)).await.unwrap();
    assert_eq!(
        broker.publish(&[event(3, 1)]).await.unwrap(),
        Publication::acked(1)
    );

    server.kill();
    let started = Instant::now();
    let down = broker.publish(&[event(3, 2), event(3, 3)]).await;
    assert!(
        matches!(down, Ok(Publication { acked: 0, .. }) | Err(_)),
        "{down:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    server.restart();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Publication { acked: 2, .. }) = broker.publish(&[event(3, 2), event(3, 3)]).await
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the broker was not served again within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    server.pause();
    let started = Instant::now();
    let paused = broker.publish(&[event(3, 4)]).await;
    assert!(
        matches!(paused, Ok(Publication { acked: 0, .. }) | Err(_)),
        "{paused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    server.resume();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Publication { acked: 1, .. }) = broker.publish(&[event(3, 4)]).await {
            break;
        }
        assert!(
            Instant::now() < until,
            "the broker was not served again within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ids: Vec<String> = stored(&server.url(), STREAM)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["goods-3-1", "goods-3-2", "goods-3-3", "goods-3-4"]);
}
