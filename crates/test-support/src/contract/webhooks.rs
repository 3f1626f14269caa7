//! The webhook part of the SQL contract: sellers' endpoints stored with their secrets sealed for
//! their own id, read and changed by their seller alone, rotated, deleted, and counted against
//! the seller's quota under races.

use super::{SqlStore, now, user};
use futures::future::join_all;
use goods_domain::ports::{
    CreateEndpointError, Endpoint, EndpointChange, NewEndpoint, SealedSecret, SecretToSeal,
};
use goods_domain::webhook::{EndpointDescription, EndpointUrl, EventTypes, Reach};
use goods_domain::{EndpointId, SealError};
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
