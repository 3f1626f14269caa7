//! The draw part of the SQL contract: entries one per buyer in batches and counted as they
//! come, closed before the entry set is read, ranked by goods-domain's rule, awarded once and
//! counted, a refused entry voided, the seed kept sealed until the reveal.

use super::{SqlStore, input_for, now, order, product, product_in_sizes, size_inputs, user};
use futures::future::join_all;
use goods_domain::draw::rank;
use goods_domain::ports::{DropRepository, EnterError, NewEntry, PlaceOrder, Placed};
use goods_domain::{
    DrawCounts, DrawSecret, DrawSeed, DropInput, EntriesTree, IdempotencyKey, LimitedDrop,
    NewLimitedDrop, SealedSeed, SizeCutoff, SizeDraw, Sku, UserId,
};
use std::collections::HashSet;
use time::Duration;

/// The seed every contract draw uses.
pub fn seed() -> DrawSeed {
    DrawSeed::from_bytes([42; 32])
}

/// What the store keeps of [`seed`] until the reveal: opaque bytes it never reads.
fn sealed() -> SealedSeed {
    SealedSeed {
        key_id: "contract-key".into(),
        sealed: vec![0xA5; 60],
    }
}

/// A draw drop of `limited` units taking entries from a second ago for an hour.
pub async fn draw_drop<S: SqlStore>(store: &S, limited: i64) -> LimitedDrop {
    let p = product(store, limited).await;
    create_draw(
        store,
        DropInput {
            limited_quantity: Some(limited),
            ..draw_input(p.id)
        },
    )
    .await
}

/// A draw drop of `product` (its units still to set), one unit per buyer, taking entries
/// from a second ago for an hour and open for two.
fn draw_input(product: goods_domain::ProductId) -> DropInput {
    let at = now();
    DropInput {
        close_at: at + Duration::hours(2),
        mode: "DRAW".into(),
        entry_close_at: Some(at + Duration::hours(1)),
        ..input_for(product, 1, at)
    }
}

/// Creates the draw drop `input` with the contract's sealed seed.
async fn create_draw<S: SqlStore>(store: &S, input: DropInput) -> LimitedDrop {
    let at = now();
    let new = NewLimitedDrop::parse(&input, at).unwrap();
    let draw = goods_domain::DrawToSeal::new(seed().commitment(), |_| Ok(sealed()));
    DropRepository::create(store, &new, Some(draw), at, None)
        .await
        .unwrap()
}

fn entry(n: i64, at: time::OffsetDateTime) -> NewEntry {
    NewEntry {
        user_id: user(n),
        sku: None,
        at,
    }
}

/// The order a draw gives `buyer`, as goods-app builds it.
fn award(drop: &LimitedDrop, buyer: i64) -> PlaceOrder {
    PlaceOrder {
        key: IdempotencyKey::for_draw(drop.id),
        ..order(drop, buyer, "unused", 1)
    }
}

async fn counts<S: SqlStore>(store: &S, drop: &LimitedDrop) -> DrawCounts {
    store.draw(drop.id).await.unwrap().unwrap().counts
}

pub async fn entries_are_one_per_buyer_and_each_batch_tells_who_created_theirs<S: SqlStore>(
    store: S,
) {
    let drop = draw_drop(&store, 5).await;
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!(draw.commitment, seed().commitment());
    assert_eq!(draw.secret, DrawSecret::Sealed(sealed()), "kept sealed");
    assert_eq!(
        (
            draw.drawn_at,
            draw.cutoff,
            draw.revealed_seed(),
            draw.entries_root
        ),
        (None, None, None, None)
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
    assert_eq!(
        counts(&store, &drop).await,
        DrawCounts {
            entries: 2,
            ..DrawCounts::default()
        }
    );
    let mine = store.entry(drop.id, user(2)).await.unwrap().unwrap();
    assert_eq!(
        (mine.user_id, mine.ranked, mine.order_id, mine.void_reason),
        (user(2), None, None, None)
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
    assert_eq!(counts(&store, &drop).await.entries, 1);
}

pub async fn the_draw_closes_the_entries_ranks_them_by_the_rule_and_awards_once<S: SqlStore>(
    store: S,
) {
    const LIMITED: u32 = 10;
    let drop = draw_drop(&store, i64::from(LIMITED)).await;
    let t = now();
    // Entered out of numeric order: the entry set comes back by user id (2 before 10).
    let entrants: Vec<NewEntry> = (1..=50).rev().map(|n| entry(n, t)).collect();
    for batch in entrants.chunks(16) {
        store.enter(drop.id, batch).await.unwrap();
    }
    store.close_entries(drop.id, t).await.unwrap();
    assert!(
        matches!(
            store.enter(drop.id, &[entry(99, t)]).await,
            Err(EnterError::EntriesClosed)
        ),
        "no entry once entries closed"
    );
    let entrants = store.entrants(drop.id).await.unwrap();
    let users: Vec<UserId> = entrants.iter().map(|e| e.user_id).collect();
    assert_eq!(users, (1..=50).map(user).collect::<Vec<UserId>>());
    assert!(entrants.iter().all(|e| e.sku.is_none()), "no sizes");
    let root = EntriesTree::new(&users).root();
    store.publish_root(drop.id, &root).await.unwrap();
    let other = EntriesTree::new(&users[..3]).root();
    store.publish_root(drop.id, &other).await.unwrap();
    assert_eq!(
        store.draw(drop.id).await.unwrap().unwrap().entries_root,
        Some(root),
        "the first root stays"
    );
    let expected = rank(&seed(), &entrants);
    store.rank_entries(drop.id, &expected).await.unwrap();
    for r in &expected {
        let stored = store.entry(drop.id, r.user_id).await.unwrap().unwrap();
        assert_eq!(stored.ranked, Some((r.rank, r.rank_key)));
    }
    // Ranking again (a leader that died mid-draw) writes the same.
    store.rank_entries(drop.id, &expected).await.unwrap();
    let winners = store.waiting(drop.id, None, LIMITED).await.unwrap();
    assert_eq!(
        winners,
        expected[..LIMITED as usize]
            .iter()
            .map(|r| r.user_id)
            .collect::<Vec<_>>(),
        "the winners, lowest rank first"
    );
    // The second winner's award is refused: voided once, and counted.
    let (refused, winners) = (winners[1], [&winners[..1], &winners[2..]].concat());
    assert!(
        store
            .void(
                drop.id,
                None,
                refused,
                "PER_USER_LIMIT_EXCEEDED",
                time::OffsetDateTime::now_utc()
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .void(
                drop.id,
                None,
                refused,
                "PER_USER_LIMIT_EXCEEDED",
                time::OffsetDateTime::now_utc()
            )
            .await
            .unwrap(),
        "once"
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
    store.award(drop.id, None, &awards, false, t).await.unwrap();
    // Awarding again, as a second leader would: the same orders replay, nothing changes.
    let replayed = store.place_orders(&orders).await.unwrap();
    assert!(
        replayed
            .iter()
            .all(|p| matches!(p, Ok(Placed::Replayed(_))))
    );
    store.award(drop.id, None, &awards, false, t).await.unwrap();
    // The unit of the voided entry goes to the next by rank.
    let next = store.waiting(drop.id, None, 1).await.unwrap();
    assert_eq!(next, [expected[LIMITED as usize].user_id]);
    let placed = store
        .place_orders(&[award(&drop, next[0].get())])
        .await
        .unwrap();
    let Ok(Placed::Created(order)) = &placed[0] else {
        panic!("{placed:?}")
    };
    store
        .award(drop.id, None, &[(next[0], order.id)], false, t)
        .await
        .unwrap();
    let cutoff = store.last_awarded(drop.id, None).await.unwrap();
    assert_eq!(cutoff, Some(expected[LIMITED as usize].rank_key));
    let cutoffs = [goods_domain::SizeCutoff { sku: None, cutoff }];
    assert!(
        store
            .finish_draw(drop.id, t, &seed(), &cutoffs)
            .await
            .unwrap()
    );
    assert!(
        !store
            .finish_draw(drop.id, t, &seed(), &cutoffs)
            .await
            .unwrap(),
        "once"
    );
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!((draw.drawn_at, draw.cutoff), (Some(t), cutoff));
    assert_eq!(draw.revealed_seed(), Some(seed()));
    assert_eq!(
        draw.counts,
        DrawCounts {
            entries: 50,
            winners: LIMITED,
            promoted: 0,
            voided: 1
        }
    );
    assert_eq!(store.sold_quantity(drop.id).await.unwrap(), LIMITED);
    let void = store.entry(drop.id, refused).await.unwrap().unwrap();
    assert_eq!(void.void_reason.as_deref(), Some("PER_USER_LIMIT_EXCEEDED"));
    // The waitlist: entries past the winners, in rank order.
    let waiting = store.waiting(drop.id, None, 100).await.unwrap();
    assert_eq!(
        waiting,
        expected[LIMITED as usize + 1..]
            .iter()
            .map(|r| r.user_id)
            .collect::<Vec<_>>()
    );
    // A promotion records when; its entry reads the order's status.
    let promoted = waiting[0];
    let placed = store
        .place_orders(&[award(&drop, promoted.get())])
        .await
        .unwrap();
    assert!(
        matches!(
            placed[0],
            Err(goods_domain::ports::PlaceOrderError::SoldOut { .. })
        ),
        "no free unit: {placed:?}"
    );
    let later = t + Duration::seconds(3);
    let first = awards[0];
    store
        .cancel_order(
            first.1,
            first.0,
            goods_domain::Expiry::at(t, goods_domain::PaymentWindow::default()),
        )
        .await
        .unwrap();
    let forfeited = store.entry(drop.id, first.0).await.unwrap().unwrap();
    assert!(forfeited.order_given_back, "its order was cancelled");
    let placed = store
        .place_orders(&[award(&drop, promoted.get())])
        .await
        .unwrap();
    let Ok(Placed::Created(order)) = &placed[0] else {
        panic!("{placed:?}")
    };
    store
        .award(drop.id, None, &[(promoted, order.id)], true, later)
        .await
        .unwrap();
    let entry = store.entry(drop.id, promoted).await.unwrap().unwrap();
    assert_eq!(
        (entry.order_id, entry.promoted_at),
        (Some(order.id), Some(later))
    );
    assert_eq!(counts(&store, &drop).await.promoted, 1);
}

pub async fn entries_racing_the_close_commit_before_it_or_not_at_all<S: SqlStore>(store: S) {
    let drop = draw_drop(&store, 5).await;
    let t = now();
    let batches = (0..20_i64).map(|b| {
        let store = store.clone();
        async move {
            let batch: Vec<NewEntry> = (0..10).map(|i| entry(b * 10 + i + 1, t)).collect();
            (batch.clone(), store.enter(drop.id, &batch).await)
        }
    });
    let closing = {
        let store = store.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            store.close_entries(drop.id, t).await.unwrap();
            store.entrants(drop.id).await.unwrap()
        }
    };
    let (answers, entrants) = tokio::join!(join_all(batches), closing);
    let mut accepted = HashSet::new();
    for (batch, answer) in answers {
        match answer {
            Ok(entered) => accepted.extend(batch.iter().zip(entered).map(|(e, _)| e.user_id)),
            Err(EnterError::EntriesClosed) => {}
            Err(other) => panic!("{other}"),
        }
    }
    // The entry set read after the close is exactly the accepted entries, and the count
    // kept as they came agrees.
    assert_eq!(
        entrants
            .into_iter()
            .map(|e| e.user_id)
            .collect::<HashSet<_>>(),
        accepted
    );
    assert_eq!(counts(&store, &drop).await.entries as usize, accepted.len());
}

/// A draw drop in `sizes` (sku, units) of a fresh product with that stock per variant, taking
/// entries from a second ago for an hour.
pub async fn sized_draw_drop<S: SqlStore>(store: &S, sizes: &[(&str, i64)]) -> LimitedDrop {
    let product = product_in_sizes(store, sizes).await;
    create_draw(
        store,
        DropInput {
            variants: size_inputs(sizes),
            ..draw_input(product.id)
        },
    )
    .await
}

fn sku(raw: &str) -> Sku {
    Sku::parse("sku", raw).unwrap()
}

/// Each size's entries are ranked, waitlisted, awarded, voided and cut off on their own: 20
/// buyers, odd ones for US-9 (3 units), even ones for US-10 (2 units); one US-10 winner's award
/// is refused and its unit goes to the next US-10 entry, never to a US-9 one.
pub async fn a_draw_in_sizes_ranks_awards_and_cuts_off_each_size_on_its_own<S: SqlStore>(store: S) {
    let drop = sized_draw_drop(&store, &[("US-9", 3), ("US-10", 2)]).await;
    let size_of = |n: i64| sku(if n % 2 == 1 { "US-9" } else { "US-10" });
    let t = now();
    let entries: Vec<NewEntry> = (1..=20)
        .map(|n| NewEntry {
            sku: Some(size_of(n)),
            ..entry(n, t)
        })
        .collect();
    for batch in entries.chunks(7) {
        store.enter(drop.id, batch).await.unwrap();
    }
    assert_eq!(
        store.entry(drop.id, user(4)).await.unwrap().unwrap().sku,
        Some(sku("US-10"))
    );
    store.close_entries(drop.id, t).await.unwrap();
    let entrants = store.entrants(drop.id).await.unwrap();
    assert_eq!(entrants.len(), 20);
    assert!(
        entrants
            .iter()
            .all(|e| e.sku == Some(size_of(e.user_id.get())))
    );
    let ranked = rank(&seed(), &entrants);
    store.rank_entries(drop.id, &ranked).await.unwrap();
    let of_size = |size: &str| -> Vec<UserId> {
        let mut r: Vec<_> = ranked.iter().filter(|r| r.sku == Some(sku(size))).collect();
        r.sort_by_key(|r| r.rank);
        r.iter().map(|r| r.user_id).collect()
    };
    let (nines, tens) = (of_size("US-9"), of_size("US-10"));
    assert_eq!((nines.len(), tens.len()), (10, 10));
    // Each size's waitlist holds its own entries only, lowest rank first.
    assert_eq!(
        store
            .waiting(drop.id, Some(sku("US-9")), 100)
            .await
            .unwrap(),
        nines
    );
    assert_eq!(
        store.waiting(drop.id, Some(sku("US-10")), 2).await.unwrap(),
        tens[..2]
    );
    assert!(
        store.waiting(drop.id, None, 100).await.unwrap().is_empty(),
        "no entry without a size"
    );
    let award_size = |buyer: UserId, size: &str| PlaceOrder {
        sku: Some(sku(size)),
        ..award(&drop, buyer.get())
    };
    let placed_ids = |placed: Vec<goods_domain::ports::Placement>, users: &[UserId]| {
        users
            .iter()
            .zip(placed)
            .map(|(u, p)| match p {
                Ok(Placed::Created(o)) => (*u, o.id),
                other => panic!("a winner's order: {other:?}"),
            })
            .collect::<Vec<_>>()
    };
    // US-9: its three best win.
    let orders: Vec<PlaceOrder> = nines[..3].iter().map(|u| award_size(*u, "US-9")).collect();
    let awards = placed_ids(store.place_orders(&orders).await.unwrap(), &nines[..3]);
    store
        .award(drop.id, Some(sku("US-9")), &awards, false, t)
        .await
        .unwrap();
    // US-10: its best is refused and voided; the next two win.
    assert!(
        store
            .void(
                drop.id,
                Some(sku("US-10")),
                tens[0],
                "PER_USER_LIMIT_EXCEEDED",
                t
            )
            .await
            .unwrap()
    );
    let winners = &tens[1..3];
    let orders: Vec<PlaceOrder> = winners.iter().map(|u| award_size(*u, "US-10")).collect();
    let awards = placed_ids(store.place_orders(&orders).await.unwrap(), winners);
    store
        .award(drop.id, Some(sku("US-10")), &awards, false, t)
        .await
        .unwrap();
    let key_of = |u: UserId| ranked.iter().find(|r| r.user_id == u).unwrap().rank_key;
    let mut cutoffs = Vec::new();
    for size in ["US-9", "US-10"] {
        cutoffs.push(SizeCutoff {
            sku: Some(sku(size)),
            cutoff: store.last_awarded(drop.id, Some(sku(size))).await.unwrap(),
        });
    }
    assert_eq!(cutoffs[0].cutoff, Some(key_of(nines[2])));
    assert_eq!(cutoffs[1].cutoff, Some(key_of(tens[2])));
    assert!(
        store
            .finish_draw(drop.id, t, &seed(), &cutoffs)
            .await
            .unwrap()
    );
    let draw = store.draw(drop.id).await.unwrap().unwrap();
    assert_eq!(draw.cutoff, None, "a drop in sizes has its sizes' cutoffs");
    assert_eq!(
        draw.sizes,
        [
            SizeDraw {
                sku: sku("US-9"),
                winners: 3,
                voided: 0,
                cutoff: Some(key_of(nines[2])),
            },
            SizeDraw {
                sku: sku("US-10"),
                winners: 2,
                voided: 1,
                cutoff: Some(key_of(tens[2])),
            },
        ]
    );
    assert_eq!(
        draw.counts,
        DrawCounts {
            entries: 20,
            winners: 5,
            promoted: 0,
            voided: 1
        }
    );
    let sold = store.sold_by_size(drop.id).await.unwrap();
    assert_eq!(
        (sold.get(&Some(sku("US-9"))), sold.get(&Some(sku("US-10")))),
        (Some(&3), Some(&2))
    );
    // The waitlists go on in each size: US-10's next is its fourth by rank.
    assert_eq!(
        store.waiting(drop.id, Some(sku("US-10")), 1).await.unwrap(),
        [tens[3]]
    );
    assert_eq!(
        store.waiting(drop.id, Some(sku("US-9")), 1).await.unwrap(),
        [nines[3]]
    );
}
