//! The webhook part of the SQL contract: sellers' endpoints stored with their secrets sealed for
//! their own id, read and changed by their seller alone, rotated, deleted, and counted against
//! the seller's quota under races.

use super::{SqlStore, now, user};
use futures::future::join_all;
use goods_domain::ports::{
    Attempt, CreateEndpointError, Delivery, DeliveryBacklog, DropRepository, Endpoint,
    EndpointChange, EventQuery, FanOut, NewEndpoint, Placed, ProductRepository, RetryOutcome,
    SealedSecret, SecretToSeal,
};
use goods_domain::webhook::{
    AttemptOutcome, DeliveryStatus, EndpointDescription, EndpointUrl, EventTypes, Reach,
};
use goods_domain::{EndpointId, LimitedDrop, NewProduct, SealError};
use time::Duration;

/// What the store keeps of a secret: opaque bytes naming the endpoint they were sealed for, so
/// a test sees which id the seal was bound to.
fn sealed_for(endpoint: EndpointId) -> SealedSecret {
    SealedSecret {
        key_id: "contract-key".into(),
        sealed: format!("sealed for {endpoint}").into_bytes(),
    }
}

fn new_endpoint(seller: i64, url: &str) -> NewEndpoint {
    NewEndpoint {
        seller: user(seller),
        url: EndpointUrl::parse(url, Reach::default()).unwrap(),
        types: EventTypes::all(),
        description: None,
        secret: SecretToSeal::new(|id| Ok(sealed_for(id))),
    }
}

async fn create<S: SqlStore>(store: &S, seller: i64, url: &str) -> Endpoint {
    store
        .create_endpoint(&new_endpoint(seller, url), now(), 10)
        .await
        .unwrap()
}

/// An endpoint reads back as it was created, its secret sealed for its own id; its seller
/// changes only the fields it names, rotates (the old secret kept until the overlap's end) and
/// deletes it; another seller finds nothing of it to read, change, rotate or delete.
pub async fn webhook_endpoints_are_kept_for_their_seller_alone<S: SqlStore>(store: S) {
    let at = now();
    let mut new = new_endpoint(7, "https://shop.example/hooks");
    new.types = EventTypes::parse(&["goods.order.placed", "goods.order.paid"]).unwrap();
    new.description = Some(EndpointDescription::parse("Warehouse").unwrap());
    let created = store.create_endpoint(&new, at, 10).await.unwrap();
    assert_eq!(created.seller, user(7));
    assert_eq!(created.url, "https://shop.example/hooks");
    assert_eq!(created.types, new.types);
    assert_eq!(created.description.as_deref(), Some("Warehouse"));
    assert!(created.enabled);
    assert_eq!(created.secret, sealed_for(created.id));
    assert_eq!(
        (created.previous_secret.clone(), created.failing_since),
        (None, None)
    );
    let second = create(&store, 7, "https://shop.example/other").await;
    let theirs = create(&store, 8, "https://theirs.example/h").await;
    assert_eq!(second.types, EventTypes::all());
    assert_eq!(second.description, None);

    assert_eq!(
        store.endpoints_of(user(7)).await.unwrap(),
        [created.clone(), second.clone()]
    );
    assert_eq!(
        store.endpoints_of(user(8)).await.unwrap(),
        vec![theirs.clone()]
    );
    assert_eq!(store.endpoint_of(user(8), created.id).await.unwrap(), None);
    let change = EndpointChange {
        enabled: Some(false),
        ..EndpointChange::default()
    };
    assert_eq!(
        store
            .update_endpoint(user(8), created.id, &change)
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .rotate_secret(user(8), created.id, &sealed_for(theirs.id), at)
            .await
            .unwrap()
    );
    assert!(!store.delete_endpoint(user(8), created.id).await.unwrap());
    assert_eq!(
        store
            .endpoint_of(user(7), created.id)
            .await
            .unwrap()
            .as_ref(),
        Some(&created),
        "another seller changed nothing"
    );

    // A change writes the fields it names and no other.
    let disabled = store
        .update_endpoint(user(7), created.id, &change)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        disabled,
        Endpoint {
            enabled: false,
            ..created.clone()
        }
    );
    let change = EndpointChange {
        url: Some(EndpointUrl::parse("https://moved.example/h", Reach::default()).unwrap()),
        types: Some(EventTypes::all()),
        description: Some(None),
        enabled: None,
    };
    let moved = store
        .update_endpoint(user(7), created.id, &change)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        moved,
        Endpoint {
            url: "https://moved.example/h".into(),
            types: EventTypes::all(),
            description: None,
            enabled: false,
            ..created.clone()
        }
    );

    // A rotation keeps the secret it replaces until the end of the overlap.
    let new_secret = SealedSecret {
        key_id: "contract-key".into(),
        sealed: b"the new one".to_vec(),
    };
    let until = at + Duration::hours(24);
    assert!(
        store
            .rotate_secret(user(7), created.id, &new_secret, until)
            .await
            .unwrap()
    );
    let rotated = store
        .endpoint_of(user(7), created.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.secret, new_secret);
    assert_eq!(
        rotated.previous_secret,
        Some((sealed_for(created.id), until))
    );

    assert!(store.delete_endpoint(user(7), created.id).await.unwrap());
    assert!(!store.delete_endpoint(user(7), created.id).await.unwrap());
    assert_eq!(store.endpoints_of(user(7)).await.unwrap(), [second]);
}

/// A secret that cannot be sealed creates nothing, and takes no place in the quota.
pub async fn an_endpoint_whose_secret_cannot_be_sealed_is_not_created<S: SqlStore>(store: S) {
    let mut new = new_endpoint(9, "https://shop.example/h");
    new.secret = SecretToSeal::new(|_| Err(SealError::NotConfigured));
    for _ in 0..2 {
        let refused = store.create_endpoint(&new, now(), 1).await.unwrap_err();
        assert!(
            matches!(refused, CreateEndpointError::NotConfigured),
            "{refused:?}"
        );
    }
    assert_eq!(store.endpoints_of(user(9)).await.unwrap(), []);
    store
        .create_endpoint(&new_endpoint(9, "https://shop.example/h"), now(), 1)
        .await
        .unwrap();
}

/// Eight creations of one seller racing under a quota of three create exactly three; another
/// seller's do not count; a deletion frees a place.
pub async fn racing_creations_of_endpoints_stay_within_the_sellers_quota<S: SqlStore>(store: S) {
    let tries = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create_endpoint(
                        &new_endpoint(31, &format!("https://shop.example/{i}")),
                        now(),
                        3,
                    )
                    .await
            })
        })
        .collect::<Vec<_>>();
    let results: Vec<_> = join_all(tries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let created: Vec<&Endpoint> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(created.len(), 3, "{results:?}");
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, CreateEndpointError::QuotaExceeded { limit: 3 })),
        "{results:?}"
    );
    assert_eq!(store.endpoints_of(user(31)).await.unwrap().len(), 3);
    store
        .create_endpoint(&new_endpoint(32, "https://theirs.example/h"), now(), 3)
        .await
        .unwrap();
    let refused = store
        .create_endpoint(&new_endpoint(31, "https://shop.example/9"), now(), 3)
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        CreateEndpointError::QuotaExceeded { limit: 3 }
    ));
    assert!(
        store
            .delete_endpoint(user(31), created[0].id)
            .await
            .unwrap()
    );
    store
        .create_endpoint(&new_endpoint(31, "https://shop.example/9"), now(), 3)
        .await
        .unwrap();
    assert_eq!(store.endpoints_of(user(31)).await.unwrap().len(), 3);
}

/// A drop of a fresh product of `seller`'s, created at `at` (its `goods.drop.created` event).
async fn sellers_drop<S: SqlStore>(
    store: &S,
    seller: i64,
    at: time::OffsetDateTime,
) -> LimitedDrop {
    let product = NewProduct::parse("Sneaker", 5)
        .unwrap()
        .owned_by(user(seller));
    let product = ProductRepository::create(store, &product).await.unwrap();
    DropRepository::create(
        store,
        &super::new_drop(product.id, 5, 1, at),
        None,
        at,
        None,
    )
    .await
    .unwrap()
}

/// Every event of the log (up to 100), as `/admin/events` reads them.
async fn whole_log<S: SqlStore>(store: &S) -> Vec<goods_domain::ports::LoggedEvent> {
    store
        .events(&EventQuery {
            after: None,
            kind: None,
            drop: None,
            limit: 100,
        })
        .await
        .unwrap()
}

async fn endpoint_at<S: SqlStore>(
    store: &S,
    seller: i64,
    types: EventTypes,
    at: time::OffsetDateTime,
) -> Endpoint {
    let mut new = new_endpoint(seller, "https://shop.example/h");
    new.types = types;
    store.create_endpoint(&new, at, 10).await.unwrap()
}

/// Each event reaches the endpoints that take it, once: its seller's, of its type, created
/// before it; another seller's endpoint gets nothing of it. The body is the CloudEvent the log
/// serves. An attempt's outcome moves the delivery: a failure keeps it PENDING until its next
/// attempt and starts the endpoint's failing time, a 2xx delivers it and ends that time, a
/// failure with no retry left fails it.
pub async fn events_fan_out_to_their_sellers_endpoints_once_and_attempts_are_recorded<
    S: SqlStore,
>(
    store: S,
) {
    let at = now();
    let all = endpoint_at(&store, 7, EventTypes::all(), at - Duration::minutes(1)).await;
    let placed_only = endpoint_at(
        &store,
        7,
        EventTypes::parse(&["goods.order.placed"]).unwrap(),
        at - Duration::minutes(1),
    )
    .await;
    let later = endpoint_at(&store, 7, EventTypes::all(), at + Duration::seconds(1)).await;
    let theirs = endpoint_at(&store, 8, EventTypes::all(), at - Duration::minutes(1)).await;
    let mine = sellers_drop(&store, 7, at).await;
    let other = sellers_drop(&store, 8, at).await;
    let logged = whole_log(&store).await;
    assert_eq!(logged.len(), 2, "{logged:?}");

    let first = store.fan_out(100, at).await.unwrap();
    assert_eq!(
        first,
        FanOut {
            events: 2,
            deliveries: 2
        }
    );
    assert_eq!(
        store.fan_out(100, at).await.unwrap(),
        FanOut::default(),
        "once"
    );

    assert_eq!(
        store.delivery_backlog(at, 100).await.unwrap(),
        DeliveryBacklog {
            pending: 2,
            oldest_due: Some(at)
        }
    );
    assert_eq!(
        store
            .delivery_backlog(at - Duration::seconds(1), 100)
            .await
            .unwrap(),
        DeliveryBacklog {
            pending: 2,
            oldest_due: None
        },
        "none due yet"
    );
    assert_eq!(
        store.delivery_backlog(at, 1).await.unwrap().pending,
        1,
        "counted up to the cap"
    );
    let due = store.due_deliveries(at, 10, &[]).await.unwrap();
    let made: Vec<(EndpointId, &str)> = due
        .iter()
        .map(|d| (d.endpoint.id, d.body.as_str()))
        .collect();
    let body_of = |drop: &LimitedDrop| {
        logged
            .iter()
            .find(|e| e.drop == drop.id)
            .unwrap()
            .to_cloud_event()
    };
    let (mine_body, other_body) = (body_of(&mine), body_of(&other));
    assert_eq!(
        made,
        [
            (all.id, mine_body.as_str()),
            (theirs.id, other_body.as_str())
        ]
    );
    assert!(due.iter().all(|d| d.attempts == 0));
    // An endpoint being delivered to already is left out.
    let others: Vec<EndpointId> = store
        .due_deliveries(at, 10, &[all.id])
        .await
        .unwrap()
        .iter()
        .map(|d| d.endpoint.id)
        .collect();
    assert_eq!(others, [theirs.id]);
    for nothing in [placed_only.id, later.id] {
        assert_eq!(
            store
                .deliveries_of(user(7), nothing, None, None, 10)
                .await
                .unwrap(),
            Some(vec![])
        );
    }
    assert_eq!(
        store
            .deliveries_of(user(8), all.id, None, None, 10)
            .await
            .unwrap(),
        None,
        "another seller's endpoint"
    );

    // A failure: PENDING until its next attempt, and the endpoint failing since now.
    let mine_delivery = due[0].id;
    let retry_at = at + Duration::seconds(5);
    assert!(
        store
            .record_attempt(
                mine_delivery,
                &Attempt {
                    outcome: AttemptOutcome::Answered(500),
                    next_attempt_at: Some(retry_at),
                },
                at,
            )
            .await
            .unwrap()
    );
    let due_now: Vec<i64> = store
        .due_deliveries(at, 10, &[])
        .await
        .unwrap()
        .iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(due_now, [due[1].id]);
    // Due again at its time, after the one due since before it, with its attempt counted.
    let again: Vec<(i64, u32)> = store
        .due_deliveries(retry_at, 10, &[])
        .await
        .unwrap()
        .iter()
        .map(|d| (d.id, d.attempts))
        .collect();
    assert_eq!(again, [(due[1].id, 0), (mine_delivery, 1)]);
    let failing = store.endpoint_of(user(7), all.id).await.unwrap().unwrap();
    assert_eq!(failing.failing_since, Some(at));

    // Delivered: done, and the endpoint's failures are over.
    let delivered = Attempt {
        outcome: AttemptOutcome::Answered(204),
        next_attempt_at: Some(retry_at + Duration::minutes(5)),
    };
    assert!(
        store
            .record_attempt(mine_delivery, &delivered, retry_at)
            .await
            .unwrap()
    );
    // Recorded once: an instance that was paused while the lease passed on and records the
    // same attempt again changes nothing, and is told so.
    assert!(
        !store
            .record_attempt(mine_delivery, &delivered, retry_at + Duration::seconds(1))
            .await
            .unwrap(),
        "recorded by another instance already"
    );
    let listed = store
        .deliveries_of(user(7), all.id, None, None, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        listed.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>(),
        [Delivery {
            event_id: logged
                .iter()
                .find(|e| e.drop == mine.id)
                .unwrap()
                .id
                .clone(),
            event_type: "goods.drop.created".into(),
            status: DeliveryStatus::Delivered,
            attempts: 2,
            last_status_code: Some(204),
            last_error: None,
            next_attempt_at: None,
            delivered_at: Some(retry_at),
        }]
    );
    let healthy = store.endpoint_of(user(7), all.id).await.unwrap().unwrap();
    assert_eq!(healthy.failing_since, None);

    // No retry left: FAILED, and never due again.
    store
        .record_attempt(
            due[1].id,
            &Attempt {
                outcome: AttemptOutcome::NoAnswer("connection refused".into()),
                next_attempt_at: None,
            },
            at,
        )
        .await
        .unwrap();
    let failed = store
        .deliveries_of(user(8), theirs.id, Some(DeliveryStatus::Failed), None, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].1.attempts,
            failed[0].1.last_error.as_deref(),
            failed[0].1.last_status_code
        ),
        (1, Some("connection refused"), None)
    );
    assert!(
        store
            .due_deliveries(at + Duration::days(30), 10, &[])
            .await
            .unwrap()
            .is_empty()
    );
    // A manual retry makes it due again, its attempts counted on; not for another seller, nor
    // for an event the endpoint has no delivery of.
    let other_event = logged
        .iter()
        .find(|e| e.drop == other.id)
        .unwrap()
        .id
        .clone();
    assert_eq!(
        store
            .retry_delivery(user(7), theirs.id, &other_event, at)
            .await
            .unwrap(),
        RetryOutcome::EndpointNotFound
    );
    assert_eq!(
        store
            .retry_delivery(user(8), theirs.id, "drop-0-0", at)
            .await
            .unwrap(),
        RetryOutcome::DeliveryNotFound
    );
    let later = at + Duration::hours(1);
    assert_eq!(
        store
            .retry_delivery(user(8), theirs.id, &other_event, later)
            .await
            .unwrap(),
        RetryOutcome::Scheduled
    );
    let again = store.due_deliveries(later, 10, &[]).await.unwrap();
    assert_eq!(
        (again.len(), again[0].event_id.as_str(), again[0].attempts),
        (1, other_event.as_str(), 1)
    );
    // An endpoint failing for the whole time is disabled, and only then; one delivered to since
    // is not.
    let days = Duration::days(5);
    assert_eq!(
        store
            .disable_failing(at + days - Duration::seconds(1), days)
            .await
            .unwrap(),
        []
    );
    assert_eq!(
        store.disable_failing(at + days, days).await.unwrap(),
        [theirs.id]
    );
    assert!(
        !store
            .endpoint_of(user(8), theirs.id)
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
    assert!(
        store
            .endpoint_of(user(7), all.id)
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
    assert_eq!(
        store.disable_failing(at + days, days).await.unwrap(),
        [],
        "once"
    );
    // A disabled endpoint's delivery stays PENDING but is not due; enabled again, it is, and
    // its failures start afresh.
    assert!(
        store
            .due_deliveries(later, 10, &[])
            .await
            .unwrap()
            .is_empty()
    );
    let enable = EndpointChange {
        enabled: Some(true),
        ..EndpointChange::default()
    };
    let enabled = store
        .update_endpoint(user(8), theirs.id, &enable)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((enabled.enabled, enabled.failing_since), (true, None));
    let resumed = store.due_deliveries(later, 10, &[]).await.unwrap();
    assert_eq!(
        resumed.iter().map(|d| d.endpoint.id).collect::<Vec<_>>(),
        [theirs.id]
    );
    // Deleting an endpoint drops its deliveries.
    assert!(store.delete_endpoint(user(8), theirs.id).await.unwrap());
    assert_eq!(
        store
            .deliveries_of(user(8), theirs.id, None, None, 10)
            .await
            .unwrap(),
        None
    );
}

/// Four fan-outs racing over 24 events of one seller's drops make each delivery once: 24 for
/// an endpoint taking every type, none twice.
pub async fn racing_fan_outs_make_each_delivery_once<S: SqlStore>(store: S) {
    let at = now();
    let endpoint = endpoint_at(&store, 7, EventTypes::all(), at - Duration::minutes(1)).await;
    for _ in 0..24 {
        sellers_drop(&store, 7, at).await;
    }
    let racers = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut made = 0;
                loop {
                    let round = store.fan_out(5, at).await.unwrap();
                    if round.events == 0 {
                        return made;
                    }
                    made += round.deliveries;
                }
            })
        })
        .collect::<Vec<_>>();
    let made: usize = join_all(racers).await.into_iter().map(Result::unwrap).sum();
    assert_eq!(made, 24);
    let listed = store
        .deliveries_of(user(7), endpoint.id, None, None, 100)
        .await
        .unwrap()
        .unwrap();
    let events: std::collections::HashSet<&str> =
        listed.iter().map(|(_, d)| d.event_id.as_str()).collect();
    assert_eq!((listed.len(), events.len()), (24, 24));
}

/// A sale of 3 orders (4 events with the drop's creation) of a seller without an endpoint:
/// its rows wait while the fan-out runs (another seller has an endpoint) and while the pruning
/// runs with a cut-off a minute back. A cut-off a minute ahead moves them (and deletes nothing
/// not fanned out); the fan-out marks them, delivering none; the next pruning deletes the 4.
/// Another such sale waits the same way until a drop of the seller with the endpoint has an
/// event: then the fan-out moves all 5, oldest first, and delivers the 1.
pub async fn a_sale_no_endpoint_watches_waits_for_its_readers_and_the_log_stays_in_order<
    S: SqlStore,
>(
    store: S,
) {
    let at = now();
    let later = at + Duration::minutes(1);
    endpoint_at(&store, 7, EventTypes::all(), at - Duration::minutes(1)).await;
    let sale = |store: S| async move {
        let drop = sellers_drop(&store, 8, at).await;
        for buyer in 1..=3 {
            let key = format!("sale-{}", drop.id);
            let placed = super::place(&store, &super::order(&drop, buyer, &key, 1)).await;
            assert!(matches!(placed, Ok(Placed::Created(_))), "{placed:?}");
        }
        drop
    };
    sale(store.clone()).await;
    assert_eq!(
        store.fan_out(100, at).await.unwrap(),
        FanOut::default(),
        "no endpoint takes them: left waiting"
    );
    let back = at - Duration::minutes(1);
    assert_eq!(store.prune(back, false, 100).await.unwrap(), 0);
    assert_eq!(
        store.fan_out(100, at).await.unwrap(),
        FanOut::default(),
        "a pruning whose cut-off is before them left them waiting"
    );
    assert_eq!(store.prune(later, false, 100).await.unwrap(), 0);
    assert_eq!(
        store.fan_out(100, later).await.unwrap(),
        FanOut {
            events: 4,
            deliveries: 0
        }
    );
    assert_eq!(store.prune(later, false, 100).await.unwrap(), 4);

    let unwatched = sale(store.clone()).await;
    assert_eq!(store.fan_out(100, at).await.unwrap(), FanOut::default());
    let watched = sellers_drop(&store, 7, at).await;
    assert_eq!(
        store.fan_out(100, at).await.unwrap(),
        FanOut {
            events: 5,
            deliveries: 1
        }
    );
    let logged: Vec<(goods_domain::DropId, u64)> = whole_log(&store)
        .await
        .iter()
        .map(|e| (e.drop, e.dropseq))
        .collect();
    assert_eq!(
        logged,
        [
            (unwatched.id, 1),
            (unwatched.id, 2),
            (unwatched.id, 3),
            (unwatched.id, 4),
            (watched.id, 1)
        ],
        "oldest first"
    );
}
