//! One load per key at a time: concurrent callers missing the same thing share one trip to the
//! store. At a drop's opening every buyer misses at once, and one connection each would empty
//! the pool (a fleet test saw 503s). The result goes only to those waiting; the next miss loads.

use goods_domain::InfraError;
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// A load's result as every caller waiting for it gets it.
pub(crate) type Shared<T> = Result<T, Arc<InfraError>>;

/// A caller's own copy of a shared failure; whether it is a bound that ran out (the store did
/// not answer in time) is kept, since that decides the caller's answer.
pub(crate) fn unshared(error: &InfraError) -> InfraError {
    if error.is_unavailable() {
        InfraError::unavailable(error.to_string())
    } else {
        InfraError::msg(error.to_string())
    }
}

/// Loads in flight, one per key.
pub(crate) struct SingleFlight<K, V> {
    flights: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        Self {
            flights: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Copy, V: Clone> SingleFlight<K, V> {
    /// `load`'s result for `key`, or that of the load of `key` already running. If that one's
    /// caller is cancelled a waiter loads itself; a flight nobody awaits is forgotten.
    pub(crate) async fn run<F, Fut>(&self, key: K, load: F) -> V
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let flight = self
            .flights
            .lock()
            .map(|mut flights| Arc::clone(flights.entry(key).or_default()))
            .ok();
        // A poisoned map only costs the sharing.
        let Some(flight) = flight else {
            return load().await;
        };
        let landing = Landing {
            flights: &self.flights,
            key,
            flight,
        };
        landing.flight.get_or_init(load).await.clone()
    }

    /// How many loads are running (for tests).
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.flights.lock().map(|f| f.len()).unwrap_or(0)
    }
}

/// A caller's part in a flight; when it ends (done or cancelled) the flight leaves the map if
/// it has landed or no other caller still waits on it.
struct Landing<'a, K: Eq + Hash, V> {
    flights: &'a Mutex<HashMap<K, Arc<OnceCell<V>>>>,
    key: K,
    flight: Arc<OnceCell<V>>,
}

impl<K: Eq + Hash, V> Drop for Landing<'_, K, V> {
    fn drop(&mut self) {
        let Ok(mut flights) = self.flights.lock() else {
            return;
        };
        // Under the lock no one can join it; the map holds one reference and this caller one.
        let alone = Arc::strong_count(&self.flight) <= 2;
        if flights
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
            && (self.flight.initialized() || alone)
        {
            flights.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::future::join_all;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Notify;

    #[tokio::test]
    async fn concurrent_misses_of_one_key_share_one_load_and_the_next_miss_loads_again() {
        let flights = SingleFlight::<u32, Result<u32, String>>::default();
        let loads = AtomicUsize::new(0);
        let release = Notify::new();
        let load = || async {
            loads.fetch_add(1, Ordering::SeqCst);
            release.notified().await;
            Ok(7)
        };
        let waiting = join_all((0..50).map(|_| flights.run(1, load)));
        let releasing = async {
            // Every caller is parked on the one load before it is let go.
            while loads.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert_eq!(flights.in_flight(), 1);
            release.notify_waiters();
        };
        let (results, ()) = tokio::join!(waiting, releasing);
        assert_eq!(loads.load(Ordering::SeqCst), 1, "one load for 50 misses");
        assert!(results.iter().all(|r| *r == Ok(7)), "{results:?}");
        assert_eq!(flights.in_flight(), 0, "nothing left in flight");

        // A later miss is a new load, not the old answer.
        let again = flights.run(1, || async { Ok(8) }).await;
        assert_eq!(again, Ok(8));
    }

    /// The wiring: buyers and readers missing a drop that is not cached share one read.
    #[tokio::test]
    async fn concurrent_reads_of_an_uncached_drop_share_one_database_read() {
        let mut m = crate::test_support::Mocks::at(crate::test_support::OPEN);
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(0)));
        let (app, drops) = m.app_holding_drops(None);
        let service = app.drops();
        let reads = join_all((0..30).map(|_| service.get(crate::test_support::drop_id())));
        let releasing = async {
            crate::test_support::settle_until(|| drops.gets() > 0).await;
            drops.release_gets();
        };
        let (views, ()) = tokio::join!(reads, releasing);
        assert!(views.iter().all(Result::is_ok));
        assert_eq!(drops.gets(), 1, "30 concurrent misses, one read");
        // Cached now: no read at all.
        app.drops()
            .get(crate::test_support::drop_id())
            .await
            .unwrap();
        assert_eq!(drops.gets(), 1);
    }

    /// The wiring: purchases finding the drop's gate empty at once seed it once.
    #[tokio::test]
    async fn purchases_finding_the_gate_empty_at_once_seed_it_once() {
        use goods_domain::ports::{GateSeed, MockAdmissionGate, ReserveOutcome};
        use std::sync::atomic::AtomicBool;
        let mut m = crate::test_support::Mocks::at(crate::test_support::OPEN);
        m.drops.expect_gate_seed().returning(|drop| {
            Ok(GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: goods_domain::ports::whole_units(0),
                expires_at: crate::test_support::CLOSE,
                orders: Vec::new(),
            })
        });
        let seeded = std::sync::Arc::new(AtomicBool::new(false));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        let asked = std::sync::Arc::clone(&seeded);
        gate.expect_reserve().returning(move |_| {
            Ok(if asked.load(Ordering::SeqCst) {
                ReserveOutcome::SoldOut { remaining: 0 }
            } else {
                ReserveOutcome::NotSeeded
            })
        });
        let seeding = std::sync::Arc::clone(&seeded);
        gate.expect_seed_if_absent().times(1).returning(move |_| {
            seeding.store(true, Ordering::SeqCst);
            Ok(())
        });
        let (app, drops) = m.app_holding_drops(Some(gate));
        drops.release_gets();
        let purchases = join_all((1..=30).map(|user| {
            app.purchase(crate::PurchaseCommand {
                drop_id: crate::test_support::drop_id(),
                user_id: goods_domain::UserId::parse(user).unwrap(),
                sku: None,
                quantity: crate::test_support::qty(1),
                key: goods_domain::IdempotencyKey::parse("k").unwrap(),
            })
        }));
        let releasing = async {
            crate::test_support::settle_until(|| drops.seeds() > 0).await;
            drops.release_seeds();
        };
        let (answers, ()) = tokio::join!(purchases, releasing);
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, Err(crate::PurchaseError::SoldOut { .. }))),
            "{answers:?}"
        );
        assert_eq!(
            drops.seeds(),
            1,
            "30 buyers found the gate empty, one seeding"
        );
    }

    #[tokio::test]
    async fn a_cancelled_load_leaves_its_waiter_to_load_and_nothing_behind() {
        let flights = Arc::new(SingleFlight::<u32, u32>::default());
        let first = tokio::spawn({
            let flights = Arc::clone(&flights);
            async move { flights.run(1, std::future::pending::<u32>).await }
        });
        while flights.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let second = tokio::spawn({
            let flights = Arc::clone(&flights);
            async move { flights.run(1, || async { 9 }).await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !second.is_finished(),
            "the second waits on the first's load"
        );
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        assert_eq!(second.await.unwrap(), 9, "the waiter loaded for itself");
        assert_eq!(flights.in_flight(), 0);

        // A load cancelled with no one waiting is forgotten too.
        let lone = tokio::spawn({
            let flights = Arc::clone(&flights);
            async move { flights.run(2, std::future::pending::<u32>).await }
        });
        while flights.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        lone.abort();
        assert!(lone.await.unwrap_err().is_cancelled());
        assert_eq!(flights.in_flight(), 0, "nothing left behind");
    }

    #[tokio::test]
    async fn a_failed_load_is_every_waiters_answer_once_and_different_keys_do_not_wait() {
        let flights = SingleFlight::<u32, Result<u32, String>>::default();
        let loads = AtomicUsize::new(0);
        let release = Notify::new();
        let failing = || async {
            loads.fetch_add(1, Ordering::SeqCst);
            release.notified().await;
            Err("down".to_owned())
        };
        let waiting = join_all((0..20).map(|_| flights.run(1, failing)));
        let other_key = async {
            while loads.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            // Key 2 loads while key 1's load is held.
            let other = flights.run(2, || async { Ok(2) }).await;
            release.notify_waiters();
            other
        };
        let (results, other) = tokio::join!(waiting, other_key);
        assert_eq!(other, Ok(2));
        assert_eq!(
            loads.load(Ordering::SeqCst),
            1,
            "the failure is not retried by each waiter"
        );
        assert!(
            results.iter().all(|r| *r == Err("down".to_owned())),
            "{results:?}"
        );
    }
}
