//! An example consumer, as a seller's fulfilment service would write one: a durable JetStream
//! consumer on the service's stream that ships placed orders and pages on an oversell, handles
//! each event once by its `id` (the broker delivers at least once, so a repeat must change
//! nothing), and acknowledges a message only after handling it. The design document asks for
//! the oversell event to be consumed idempotently by its event id; this is that, runnable.
//!
//! Copy `Fulfilment` and the loop in the test; keep `seen` where the side effects are (the
//! same database transaction as the shipment), not in memory as here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adapters_nats::{NatsBroker, NatsConfig};
use async_nats::jetstream::{self, consumer::pull};
use futures::StreamExt as _;
use goods_domain::ports::{EventBroker, LoggedEvent};
use goods_domain::{DropId, EventType};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use test_support::nats::PrivateNats;

const STREAM: &str = "GOODS_EVENTS_CONSUMER";

/// What the consumer did with one message.
#[derive(Debug, PartialEq, Eq)]
enum Handled {
    Shipped(i64),
    Paged(i64),
    /// An event seen before: nothing done again.
    Repeat,
    /// A type this consumer does not act on.
    Ignored,
}

/// A fulfilment service's view of the events.
#[derive(Default)]
struct Fulfilment {
    /// Event ids handled; in production, a table written in the shipment's transaction.
    seen: HashSet<String>,
}

impl Fulfilment {
    fn handle(&mut self, payload: &[u8]) -> Handled {
        let event: Value = serde_json::from_slice(payload).expect("a CloudEvent");
        let id = event["id"]
            .as_str()
            .expect("every event has an id")
            .to_owned();
        if !self.seen.insert(id) {
            return Handled::Repeat;
        }
        let data = &event["data"];
        match event["type"].as_str() {
            Some("goods.order.placed") => Handled::Shipped(data["orderId"].as_i64().unwrap()),
            Some("goods.drop.oversold")
                if data["severity"] == "critical" && data["source"] == "oversell" =>
            {
                Handled::Paged(data["dropId"].as_i64().unwrap())
            }
            _ => Handled::Ignored,
        }
    }
}

fn event(seq: u64, kind: EventType, data: &str) -> LoggedEvent {
    LoggedEvent {
        cursor: i64::try_from(seq).unwrap(),
        id: format!("goods-5-{seq}"),
        kind,
        subject: "drops/5".into(),
        drop: DropId::parse(5).unwrap(),
        dropseq: seq,
        time: time::OffsetDateTime::UNIX_EPOCH,
        data: data.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_handles_each_event_once_by_its_id_however_often_it_is_delivered() {
    let server = PrivateNats::start();
    let broker = NatsBroker::connect(&NatsConfig {
        url: server.url(),
        stream: STREAM.into(),
        credentials_file: None,
        tls_ca_file: None,
        ack_timeout: Duration::from_secs(2),
    })
    .await
    .unwrap();
    let events = vec![
        event(1, EventType::DropCreated, r#"{"dropId":5}"#),
        event(2, EventType::OrderPlaced, r#"{"orderId":11,"dropId":5}"#),
        event(3, EventType::OrderPlaced, r#"{"orderId":12,"dropId":5}"#),
        event(
            4,
            EventType::DropOversold,
            r#"{"dropId":5,"limitedQuantity":1,"soldQuantity":2,"severity":"critical","source":"oversell"}"#,
        ),
    ];
    assert_eq!(broker.publish(&events).await.unwrap().acked, 4);
    // Deliveries past the stream's duplicate window (a relay that died long after the ack, a
    // replayed backup): the same events again, as the broker cannot drop them.
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    for e in &events[1..] {
        js.publish(e.broker_subject(), e.to_cloud_event().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    let stream = js.get_stream(STREAM).await.unwrap();
    let consumer: jetstream::consumer::PullConsumer = stream
        .get_or_create_consumer(
            "fulfilment",
            pull::Config {
                durable_name: Some("fulfilment".into()),
                filter_subject: "goods.>".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut fulfilment = Fulfilment::default();
    let mut handled = Vec::new();
    let mut messages = consumer
        .fetch()
        .max_messages(100)
        .expires(Duration::from_secs(1))
        .messages()
        .await
        .unwrap();
    while let Some(message) = messages.next().await {
        let message = message.unwrap();
        handled.push(fulfilment.handle(&message.payload));
        // Acknowledged only once handled: a crash before this redelivers it, and `seen`
        // makes the redelivery a no-op.
        message.ack().await.unwrap();
    }
    assert_eq!(
        handled,
        [
            Handled::Ignored,
            Handled::Shipped(11),
            Handled::Shipped(12),
            Handled::Paged(5),
            Handled::Repeat,
            Handled::Repeat,
            Handled::Repeat,
        ]
    );
}
