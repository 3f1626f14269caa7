//! Which drop ids exist, in memory, so a random id costs the database nothing (404 from here),
//! with at most one scan of new ids per [`MIN_SCAN_INTERVAL`] however many ask.
//!
//! Ids ascend and drops are never deleted: an unknown id below the highest seen is absent; one
//! just above it (within [`NEAR`]) may be new, which a scan finds; one further above is absent.
//! Each scan reaches back [`OVERLAP`] ids, for a creation that committed after a higher one's.

use goods_domain::ports::DropRepository;
use goods_domain::{DropId, InfraError};
use std::collections::HashSet;
use std::sync::RwLock;
use std::time::Duration;
use tokio::time::Instant;

/// The shortest time between two scans caused by requests for ids above the highest known:
/// random ids cost the database at most one statement per this interval.
pub const MIN_SCAN_INTERVAL: Duration = Duration::from_millis(200);

/// How far above the highest known id an id may be a drop created since the last scan.
pub const NEAR: i64 = 1024;

/// How far below the highest known id a scan starts again: drops whose creations committed out
/// of id order within this distance are still found.
const OVERLAP: i64 = 64;

/// What the index says of an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// A drop with this id exists.
    Exists,
    /// No drop has this id.
    Absent,
    /// Just above every id seen so far (or nothing scanned yet): only a scan can tell.
    Unknown,
}

#[derive(Default)]
struct Ids {
    set: HashSet<i64>,
    /// The highest id seen; `None` before the first scan.
    max: Option<i64>,
    /// Ids a scan found since the first one (drops created through other instances), until
    /// [`DropIndex::take_fresh`] takes them.
    fresh: Vec<i64>,
}

#[derive(Default)]
pub(crate) struct DropIndex {
    ids: RwLock<Ids>,
    /// When the last scan started; held while one runs, so scans never overlap.
    last_scan: tokio::sync::Mutex<Option<Instant>>,
}

impl DropIndex {
    pub(crate) fn knows(&self, id: DropId) -> Known {
        let Ok(ids) = self.ids.read() else {
            return Known::Unknown;
        };
        match ids.max {
            _ if ids.set.contains(&id.get()) => Known::Exists,
            Some(max) if id.get() <= max || id.get() > max.saturating_add(NEAR) => Known::Absent,
            _ => Known::Unknown,
        }
    }

    /// Records a drop this instance created. The highest id stays the highest a scan saw:
    /// the ids between it and this one may be other instances' drops, which only a scan finds.
    pub(crate) fn add(&self, id: DropId) {
        if let Ok(mut ids) = self.ids.write() {
            ids.set.insert(id.get());
        }
    }

    /// Scans for new ids unless a scan started after `asked` (whose answer is as new), waiting
    /// first until [`MIN_SCAN_INTERVAL`] has passed since the last one when `paced`.
    pub(crate) async fn scan(
        &self,
        drops: &dyn DropRepository,
        asked: Instant,
        paced: bool,
    ) -> Result<(), InfraError> {
        let mut last = self.last_scan.lock().await;
        if let Some(at) = *last {
            if at >= asked {
                return Ok(());
            }
            if paced {
                tokio::time::sleep_until(at + MIN_SCAN_INTERVAL).await;
            }
        }
        *last = Some(Instant::now());
        let from = self
            .ids
            .read()
            .ok()
            .and_then(|ids| ids.max)
            .and_then(|max| DropId::parse(max - OVERLAP).ok());
        let found = drops.ids_after(from).await?;
        if let Ok(mut ids) = self.ids.write() {
            let highest = found.iter().map(|id| id.get()).max();
            if ids.max.is_some() {
                let fresh: Vec<i64> = found
                    .iter()
                    .map(|id| id.get())
                    .filter(|id| !ids.set.contains(id))
                    .collect();
                ids.fresh.extend(fresh);
            }
            ids.set.extend(found.iter().map(|id| id.get()));
            // Once scanned, every id up to the highest seen is known to exist or not.
            ids.max = ids.max.max(highest).or(Some(0));
        }
        Ok(())
    }

    /// The ids scans found since the last call (not those of the first scan, nor this
    /// instance's own drops).
    pub(crate) fn take_fresh(&self) -> Vec<DropId> {
        self.ids
            .write()
            .map(|mut ids| std::mem::take(&mut ids.fresh))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|id| DropId::parse(id).ok())
            .collect()
    }

    /// How many ids it holds (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.read().map(|ids| ids.set.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::ports::MockDropRepository;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn id(n: i64) -> DropId {
        DropId::parse(n).unwrap()
    }

    /// A repository holding drops 1..=3 and 5, counting its scans.
    fn repository(scans: Arc<AtomicUsize>) -> MockDropRepository {
        let mut drops = MockDropRepository::new();
        drops.expect_ids_after().returning(move |after| {
            scans.fetch_add(1, Ordering::SeqCst);
            let after = after.map_or(0, DropId::get);
            Ok([1, 2, 3, 5]
                .into_iter()
                .filter(|n| *n > after)
                .map(id)
                .collect())
        });
        drops
    }

    #[tokio::test(start_paused = true)]
    async fn ids_below_the_highest_are_answered_without_the_database_and_above_it_by_one_scan() {
        let scans = Arc::new(AtomicUsize::new(0));
        let drops = repository(Arc::clone(&scans));
        let index = DropIndex::default();
        assert_eq!(index.knows(id(1)), Known::Unknown, "nothing scanned yet");
        index.scan(&drops, Instant::now(), true).await.unwrap();
        assert_eq!(
            [1, 3, 4, 5, 6].map(|n| index.knows(id(n))),
            [
                Known::Exists,
                Known::Exists,
                Known::Absent,
                Known::Exists,
                Known::Unknown
            ]
        );
        // A drop this instance creates is known at once, and the ids below it that no scan
        // has seen are still asked of the database: another instance may have created them.
        index.add(id(8));
        assert_eq!(index.knows(id(8)), Known::Exists);
        assert_eq!(index.knows(id(7)), Known::Unknown);
        assert_eq!((scans.load(Ordering::SeqCst), index.len()), (1, 5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_unknown_ids_costs_one_scan_per_interval() {
        let scans = Arc::new(AtomicUsize::new(0));
        let drops: Arc<dyn DropRepository> = Arc::new(repository(Arc::clone(&scans)));
        let index = Arc::new(DropIndex::default());
        let start = Instant::now();
        // 1,000 requests for ids above the highest, spread over two seconds.
        let tasks: Vec<_> = (0..1000_u64)
            .map(|i| {
                let (index, drops) = (Arc::clone(&index), Arc::clone(&drops));
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(i * 2)).await;
                    index.scan(&*drops, Instant::now(), true).await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = start.elapsed();
        let allowed = elapsed.as_millis() / MIN_SCAN_INTERVAL.as_millis() + 1;
        let made = scans.load(Ordering::SeqCst);
        assert!(
            made as u128 <= allowed && made >= 10,
            "{made} scans in {elapsed:?} (at most {allowed})"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_askers_share_one_scan() {
        let scans = Arc::new(AtomicUsize::new(0));
        let drops: Arc<dyn DropRepository> = Arc::new(repository(Arc::clone(&scans)));
        let index = Arc::new(DropIndex::default());
        let asked = Instant::now();
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (index, drops) = (Arc::clone(&index), Arc::clone(&drops));
                tokio::spawn(async move { index.scan(&*drops, asked, true).await.unwrap() })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(scans.load(Ordering::SeqCst), 1);
    }
}
