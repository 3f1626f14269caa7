//! The draw part of the SQL contract: entries one per buyer in batches, closed by the draw,
//! ranked by goods-domain's rule, awarded once.

use super::{SqlStore, key, now, order, product, user};
use futures::future::join_all;
use goods_domain::draw::{rank, winning_cutoff};
use goods_domain::ports::{DropRepository, EnterError, NewEntry, PlaceOrder, Placed};
use goods_domain::{DrawSeed, DropInput, LimitedDrop, NewLimitedDrop, UserId};
use std::collections::HashSet;
use time::Duration;

/// The seed every contract draw uses.
pub fn seed() -> DrawSeed {
    DrawSeed::from_bytes([42; 32])
}

/// A draw drop of `limited` units taking entries from a second ago for an hour.
pub async fn draw_drop<S: SqlStore>(store: &S, limited: i64) -> LimitedDrop {
    let p = product(store, limited).await;
    let at = now();
    let new = NewLimitedDrop::parse(
        &DropInput {
            product_id: p.id.get(),
            open_at: at - Duration::seconds(1),
            close_at: at + Duration::hours(2),
            limited_quantity: limited,
            per_user_limit: 1,
            price_minor: 0,
            currency: "XXX".into(),
            mode: "DRAW".into(),
            entry_close_at: Some(at + Duration::hours(1)),
        },
        at,
    )
    .unwrap();
    DropRepository::create(store, &new, Some(seed()), at)
        .await
        .unwrap()
}

fn entry(n: i64, at: time::OffsetDateTime) -> NewEntry {
    NewEntry {
        user_id: user(n),
        at,
    }
}

/// The order a draw gives `buyer`, as goods-app builds it.
fn award(drop: &LimitedDrop, buyer: i64) -> PlaceOrder {
    PlaceOrder {
        key: key(&format!("draw-{}", drop.id)),
        ..order(drop, buyer, "unused", 1)
    }
}

pub async fn entries_are_one_per_buyer_and_each_batch_tells_who_created_theirs<S: SqlStore>(
    store: S,
) {
    let drop = draw_drop(&store, 5).await;
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!(draw.commitment, seed().commitment());
    assert_eq!(
        (draw.drawn_at, draw.cutoff, draw.revealed_seed()),
        (None, None, None)
    );
    let t = now();
    let first = store
        .enter(drop.id, &[entry(1, t), entry(2, t), entry(1, t)])
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|e| e.created).collect::<Vec<_>>(),
        [true, true, false]
    );
    let later = t + Duration::seconds(5);
    let again = store.enter(drop.id, &[entry(1, later)]).await.unwrap();
    assert!(!again[0].created);
    assert_eq!(again[0].entry.entered_at, t, "the first entry stays");
    let counts = store.draw_counts(drop.id).await.unwrap();
    assert_eq!((counts.entries, counts.winners, counts.promoted), (2, 0, 0));
    let (mine, ahead) = store.entry(drop.id, user(2)).await.unwrap().unwrap();
    assert_eq!(
        (mine.user_id, mine.ranked, mine.order_id, ahead),
        (user(2), None, None, 0)
    );
    assert!(store.entry(drop.id, user(3)).await.unwrap().is_none());
}

pub async fn racing_entries_of_one_buyer_create_one_entry<S: SqlStore>(store: S) {
    let drop = draw_drop(&store, 5).await;
    let t = now();
    let tries = (0..20).map(|i| {
        let store = store.clone();
        async move {
            store
                .enter(drop.id, &[entry(7, t + Duration::milliseconds(i))])
                .await
                .unwrap()
        }
    });
    let created = join_all(tries)
        .await
        .into_iter()
        .filter(|answers| answers[0].created)
        .count();
    assert_eq!(created, 1);
    assert_eq!(store.draw_counts(drop.id).await.unwrap().entries, 1);
}

pub async fn the_draw_closes_the_entries_ranks_them_by_the_rule_and_awards_once<S: SqlStore>(
    store: S,
) {
    const LIMITED: u32 = 10;
    let drop = draw_drop(&store, i64::from(LIMITED)).await;
    let t = now();
    let entrants: Vec<NewEntry> = (1..=50).map(|n| entry(n, t)).collect();
    for batch in entrants.chunks(16) {
        store.enter(drop.id, batch).await.unwrap();
    }
    let cutoff = store
        .rank_entries(drop.id, &seed(), LIMITED, t)
        .await
        .unwrap();
    let users: Vec<UserId> = (1..=50).map(user).collect();
    let expected = rank(&seed(), &users);
    assert_eq!(cutoff, winning_cutoff(&expected, LIMITED));
    assert!(
        matches!(
            store.enter(drop.id, &[entry(99, t)]).await,
            Err(EnterError::EntriesClosed)
        ),
        "no entry after the draw began"
    );
    for r in &expected {
        let (stored, _) = store.entry(drop.id, r.user_id).await.unwrap().unwrap();
        assert_eq!(stored.ranked, Some((r.rank, r.rank_key)));
    }
    // Ranking again (a leader that died mid-draw) writes the same.
    assert_eq!(
        store
            .rank_entries(drop.id, &seed(), LIMITED, t)
            .await
            .unwrap(),
        cutoff
    );
    let winners = store
        .unawarded(drop.id, 0, Some(LIMITED), 64)
        .await
        .unwrap();
    assert_eq!(
        winners,
        expected[..LIMITED as usize]
            .iter()
            .map(|r| r.user_id)
            .collect::<Vec<_>>(),
        "the winners, lowest rank first"
    );
    let orders: Vec<PlaceOrder> = winners.iter().map(|u| award(&drop, u.get())).collect();
    let placed = store.place_orders(&orders).await.unwrap();
    let awards: Vec<_> = winners
        .iter()
        .zip(placed)
        .map(|(u, p)| match p {
            Ok(Placed::Created(o)) => (*u, o.id),
            other => panic!("a winner's order: {other:?}"),
        })
        .collect();
    store.award(drop.id, &awards, false).await.unwrap();
    // Awarding again, as a second leader would: the same orders replay, nothing changes.
    let replayed = store.place_orders(&orders).await.unwrap();
    assert!(
        replayed
            .iter()
            .all(|p| matches!(p, Ok(Placed::Replayed(_))))
    );
    store.award(drop.id, &awards, false).await.unwrap();
    assert!(
        store
            .unawarded(drop.id, 0, Some(LIMITED), 64)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.finish_draw(drop.id, t, cutoff).await.unwrap());
    assert!(
        !store.finish_draw(drop.id, t, cutoff).await.unwrap(),
        "once"
    );
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!((draw.drawn_at, draw.cutoff), (Some(t), cutoff));
    assert_eq!(draw.revealed_seed(), Some(seed()));
    let counts = store.draw_counts(drop.id).await.unwrap();
    assert_eq!(
        (counts.entries, counts.winners, counts.promoted),
        (50, LIMITED, 0)
    );
    assert_eq!(store.sold_quantity(drop.id).await.unwrap(), LIMITED);
    // The waitlist: entries past the winners, in rank order; each counts those ahead.
    let waiting = store.unawarded(drop.id, LIMITED, None, 100).await.unwrap();
    assert_eq!(
        waiting,
        expected[LIMITED as usize..]
            .iter()
            .map(|r| r.user_id)
            .collect::<Vec<_>>()
    );
    let seventh = &expected[LIMITED as usize + 6];
    let (_, ahead) = store
        .entry(drop.id, seventh.user_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ahead, 6);
}

pub async fn entries_racing_the_draw_commit_before_it_or_not_at_all<S: SqlStore>(store: S) {
    let drop = draw_drop(&store, 5).await;
    let t = now();
    let batches = (0..20_i64).map(|b| {
        let store = store.clone();
        async move {
            let batch: Vec<NewEntry> = (0..10).map(|i| entry(b * 10 + i + 1, t)).collect();
            (batch.clone(), store.enter(drop.id, &batch).await)
        }
    });
    let drawing = {
        let store = store.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            store.rank_entries(drop.id, &seed(), 5, t).await.unwrap()
        }
    };
    let (answers, _) = tokio::join!(join_all(batches), drawing);
    let mut accepted = HashSet::new();
    for (batch, answer) in answers {
        match answer {
            Ok(entered) => accepted.extend(batch.iter().zip(entered).map(|(e, _)| e.user_id)),
            Err(EnterError::EntriesClosed) => {}
            Err(other) => panic!("{other}"),
        }
    }
    // Every accepted entry was ranked, and nothing refused was stored.
    let counts = store.draw_counts(drop.id).await.unwrap();
    assert_eq!(counts.entries as usize, accepted.len());
    for user in &accepted {
        let (stored, _) = store.entry(drop.id, *user).await.unwrap().unwrap();
        assert!(
            stored.ranked.is_some(),
            "entry of {user} committed after the ranking"
        );
    }
}
