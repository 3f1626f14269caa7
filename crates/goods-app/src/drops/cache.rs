//! The drops an instance serves from memory: definitions, the ids that exist, and units left of
//! drops no gate counts (for [`REMAINING_TTL`]). A pause, resume or close lands here at once
//! ([`DropCache::put`]) and elsewhere at the next [`DropCache::refresh`].

use crate::mechanisms::drop_index::{DropIndex, Known};
use crate::mechanisms::single_flight::{Shared, SingleFlight, unshared};
use goods_domain::batch::FreeUnits;
use goods_domain::ports::DropRepository;
use goods_domain::{DropId, InfraError, LimitedDrop};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How long a drop's units left, counted in the database because no gate answers, serve views
/// before they are counted again (purchases, cancels, expiries and draw awards through this
/// instance count again at once; through another, the view lags this much at most).
pub const REMAINING_TTL: Duration = Duration::from_millis(500);

/// Units left per drop, each from a count started at its instant, and when this instance last
/// changed a drop's units (kept for [`REMAINING_TTL`]): a count started before a change is
/// never kept after it.
#[derive(Default)]
struct Counts {
    left: HashMap<DropId, (Instant, FreeUnits)>,
    changed: HashMap<DropId, Instant>,
}

impl Counts {
    /// Keeps `left`, counted from `started`, unless `drop`'s units changed since.
    fn keep(&mut self, drop: DropId, started: Instant, left: FreeUnits) {
        if self.changed.get(&drop).is_none_or(|at| *at < started) {
            self.left.insert(drop, (started, left));
        }
    }
}

/// See the module documentation.
pub(crate) struct DropCache {
    repository: Arc<dyn DropRepository>,
    drops: RwLock<HashMap<DropId, LimitedDrop>>,
    /// Misses in flight: the buyers missing one drop at once share one read.
    loads: SingleFlight<DropId, Shared<Option<LimitedDrop>>>,
    index: DropIndex,
    counts: RwLock<Counts>,
    /// Counts in flight: views missing one drop's count at once share one count, unless the
    /// units changed since it started (the key holds the drop's last change).
    count_loads: SingleFlight<(DropId, Option<Instant>), Shared<FreeUnits>>,
    /// Bumped by every drop put here (see [`DropCache::refresh`]).
    epoch: AtomicU64,
}

impl DropCache {
    pub(crate) fn new(repository: Arc<dyn DropRepository>) -> Self {
        Self {
            repository,
            drops: RwLock::default(),
            loads: SingleFlight::default(),
            index: DropIndex::default(),
            counts: RwLock::default(),
            count_loads: SingleFlight::default(),
            epoch: AtomicU64::new(0),
        }
    }

    /// The drop with `id`, from memory or the database. An id the index of drop ids does not
    /// hold is answered without reading the drop: below the highest id at once, just above it
    /// after a scan for new ids that many such requests share.
    pub(crate) async fn load(&self, id: DropId) -> Result<Option<LimitedDrop>, InfraError> {
        if let Some(drop) = self.drops.read().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(Some(drop));
        }
        match self.index.knows(id) {
            Known::Exists => {}
            Known::Absent => return Ok(None),
            Known::Unknown => {
                self.index
                    .scan(&*self.repository, tokio::time::Instant::now(), true)
                    .await?;
                if self.index.knows(id) != Known::Exists {
                    return Ok(None);
                }
            }
        }
        self.loads
            .run(id, || async {
                let drop = self.repository.get(id).await.map_err(Arc::new)?;
                if let (Some(drop), Ok(mut cache)) = (drop.clone(), self.drops.write()) {
                    cache.entry(id).or_insert(drop);
                }
                Ok(drop)
            })
            .await
            .map_err(|error| unshared(&error))
    }

    /// A drop this instance just created. A draw drop is held from now on, so the draws'
    /// schedule finds it without a read.
    pub(crate) fn created(&self, drop: &LimitedDrop) {
        self.index.add(drop.id);
        if drop.mode.is_draw() {
            self.hold(std::slice::from_ref(drop));
        }
    }

    /// Holds `drops` that are not held yet (a drop held already may be newer than these).
    pub(crate) fn hold(&self, drops: &[LimitedDrop]) {
        if let Ok(mut cache) = self.drops.write() {
            for drop in drops {
                cache.entry(drop.id).or_insert_with(|| drop.clone());
            }
        }
    }

    /// A drop's stored state after an operation made through this instance.
    pub(crate) fn put(&self, drop: LimitedDrop) {
        self.index.add(drop.id);
        self.units_changed(drop.id);
        if let Ok(mut cache) = self.drops.write() {
            self.epoch.fetch_add(1, Ordering::SeqCst);
            cache.insert(drop.id, drop);
        }
    }

    pub(crate) fn cached(&self) -> Vec<LimitedDrop> {
        self.drops
            .read()
            .map(|cache| cache.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Re-reads every drop in memory in one query, so a pause, a resume or a close made through
    /// another instance reaches this one, and scans for drops created since. Returns how many
    /// drops changed.
    pub(crate) async fn refresh(&self) -> Result<usize, InfraError> {
        let ids: Vec<DropId> = self
            .drops
            .read()
            .map(|cache| cache.keys().copied().collect())
            .unwrap_or_default();
        let epoch = self.epoch.load(Ordering::SeqCst);
        let fresh = self.repository.get_many(&ids).await?;
        let mut changed = 0;
        if let Ok(mut cache) = self.drops.write()
            // An operation made here while the rows were read is newer than what was read; the
            // next refresh picks up the rest.
            && self.epoch.load(Ordering::SeqCst) == epoch
        {
            for drop in fresh {
                if let Some(cached) = cache.get_mut(&drop.id)
                    && *cached != drop
                {
                    *cached = drop;
                    changed += 1;
                }
            }
        }
        self.index
            .scan(&*self.repository, tokio::time::Instant::now(), false)
            .await?;
        // Draw drops created through other instances are held here too: the instance that
        // runs the draws' schedule must know them, whoever entered where. One read per scan
        // that found new drops.
        let fresh = self.index.take_fresh();
        if !fresh.is_empty() {
            let draws: Vec<LimitedDrop> = self
                .repository
                .get_many(&fresh)
                .await?
                .into_iter()
                .filter(|d| d.mode.is_draw())
                .collect();
            self.hold(&draws);
        }
        Ok(changed)
    }

    /// Forgets drops that closed more than `grace` before `now`, so memory holds the drops that
    /// can still be bought, not every drop ever read.
    pub(crate) fn prune(&self, now: time::OffsetDateTime, grace: time::Duration) {
        if let Ok(mut cache) = self.drops.write() {
            cache.retain(|_, drop| drop.ends_at().saturating_add(grace) > now);
        }
        if let Ok(mut counts) = self.counts.write() {
            counts
                .left
                .retain(|_, (at, _)| at.elapsed() < REMAINING_TTL);
            // A count started before a change this old is past its time already.
            counts.changed.retain(|_, at| at.elapsed() < REMAINING_TTL);
        }
    }

    /// How many drops are in memory.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.drops.read().map(|c| c.len()).unwrap_or(0)
    }

    /// The units left in each size of `drop` by the database's count, reused for
    /// [`REMAINING_TTL`] from the count's start.
    pub(crate) async fn counted_remaining(
        &self,
        drop: &LimitedDrop,
    ) -> Result<FreeUnits, InfraError> {
        let (fresh, changed) = self
            .counts
            .read()
            .map(|counts| {
                let fresh = counts
                    .left
                    .get(&drop.id)
                    .filter(|(at, _)| at.elapsed() < REMAINING_TTL)
                    .map(|(_, left)| left.clone());
                (fresh, counts.changed.get(&drop.id).copied())
            })
            .unwrap_or_default();
        if let Some(left) = fresh {
            return Ok(left);
        }
        self.count_loads
            .run((drop.id, changed), || async {
                let started = Instant::now();
                let sold = self
                    .repository
                    .sold_by_size(drop.id)
                    .await
                    .map_err(Arc::new)?;
                let left: FreeUnits = drop
                    .sizes
                    .counts(&sold, None)
                    .into_iter()
                    .map(|size| (size.sku.clone(), size.remaining()))
                    .collect();
                if let Ok(mut counts) = self.counts.write() {
                    counts.keep(drop.id, started, left.clone());
                }
                Ok(left)
            })
            .await
            .map_err(|error| unshared(&error))
    }

    /// Forgets the counted units left of `drop` after this instance changed them (an order
    /// committed, cancelled, expired or awarded), so its next view counts again; a count in
    /// flight is not kept.
    pub(crate) fn units_changed(&self, drop: DropId) {
        if let Ok(mut counts) = self.counts.write() {
            counts.left.remove(&drop);
            counts.changed.insert(drop, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::MockDropRepository;
    use std::sync::atomic::AtomicUsize;

    fn cache(counts: Arc<AtomicUsize>) -> DropCache {
        let mut drops = drops_serving(sample_drop(10, 1));
        drops.expect_sold_by_size().returning(move |_| {
            counts.fetch_add(1, Ordering::SeqCst);
            Ok(goods_domain::ports::whole_units(3))
        });
        DropCache::new(Arc::new(drops))
    }

    #[tokio::test]
    async fn a_drop_is_read_once_then_served_from_memory_and_unknown_ids_cost_nothing() {
        let mut drops = MockDropRepository::new();
        drops
            .expect_get()
            .times(1)
            .returning(|_| Ok(Some(sample_drop(10, 1))));
        drops
            .expect_ids_after()
            .times(1)
            .returning(|_| Ok(vec![drop_id()]));
        let cache = DropCache::new(Arc::new(drops));
        for _ in 0..3 {
            assert_eq!(
                cache.load(drop_id()).await.unwrap(),
                Some(sample_drop(10, 1))
            );
        }
        // Far above the highest id, and below it: no read, no scan.
        for absent in [DropId::parse(5_000).unwrap(), DropId::parse(1).unwrap()] {
            if absent != drop_id() {
                assert_eq!(cache.load(absent).await.unwrap(), None);
            }
        }
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn counts_are_reused_until_this_instance_changes_the_units() {
        let counts = Arc::new(AtomicUsize::new(0));
        let cache = cache(Arc::clone(&counts));
        let drop = sample_drop(10, 1);
        for _ in 0..5 {
            assert_eq!(
                cache.counted_remaining(&drop).await.unwrap(),
                goods_domain::ports::whole_units(7)
            );
        }
        assert_eq!(counts.load(Ordering::SeqCst), 1, "one count for five views");
        cache.units_changed(drop.id);
        cache.counted_remaining(&drop).await.unwrap();
        assert_eq!(
            counts.load(Ordering::SeqCst),
            2,
            "counted again after a change"
        );
    }

    /// A draw's awards land while a view counts: the count started before them serves its
    /// caller, and is not kept for the next view.
    #[tokio::test]
    async fn a_count_started_before_a_change_is_not_kept_after_it() {
        let counts = Arc::new(AtomicUsize::new(0));
        let cache: Arc<std::sync::OnceLock<Arc<DropCache>>> = Arc::default();
        let mut drops = drops_serving(sample_drop(10, 1));
        drops.expect_sold_by_size().returning({
            let (counts, cache) = (Arc::clone(&counts), Arc::clone(&cache));
            move |_| {
                if counts.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The change commits while the first count reads.
                    cache.get().unwrap().units_changed(drop_id());
                }
                Ok(goods_domain::ports::whole_units(3))
            }
        });
        let cache = Arc::clone(cache.get_or_init(|| Arc::new(DropCache::new(Arc::new(drops)))));
        let drop = sample_drop(10, 1);
        cache.counted_remaining(&drop).await.unwrap();
        cache.counted_remaining(&drop).await.unwrap();
        cache.counted_remaining(&drop).await.unwrap();
        assert_eq!(
            counts.load(Ordering::SeqCst),
            2,
            "the count from before the change is not reused; the one after it is"
        );
    }

    #[tokio::test]
    async fn a_put_drop_replaces_the_cached_one_and_pruning_forgets_closed_ones() {
        let cache = cache(Arc::default());
        let drop = cache.load(drop_id()).await.unwrap().unwrap();
        let paused = drop.set_paused(OPEN, true).unwrap();
        cache.put(paused.clone());
        assert_eq!(cache.load(drop_id()).await.unwrap(), Some(paused));
        cache.prune(CLOSE + time::Duration::hours(2), time::Duration::hours(1));
        assert_eq!(cache.len(), 0);
    }
}
