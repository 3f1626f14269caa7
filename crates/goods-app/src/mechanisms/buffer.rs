//! The write buffer (design document FR-7): a semaphore bounding how many admitted purchases
//! write to the database at once. An admitted purchase that finds no slot within the wait bound
//! is answered 429 instead of queueing without limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A bounded set of database write slots with a wait bound.
#[derive(Debug, Clone)]
pub struct WriteBuffer {
    permits: Arc<Semaphore>,
    size: usize,
    wait: Duration,
    waiters: Arc<AtomicUsize>,
}

impl WriteBuffer {
    /// `permits` concurrent writes; a purchase waits at most `wait` for one.
    pub fn new(permits: usize, wait: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(permits)),
            size: permits,
            wait,
            waiters: Arc::default(),
        }
    }

    /// A write slot, held until the returned permit drops; `None` when none frees up in time.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            metrics::histogram!(crate::telemetry::WRITE_WAIT).record(0.0);
            return Some(permit);
        }
        let started = tokio::time::Instant::now();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let permit = tokio::time::timeout(self.wait, Arc::clone(&self.permits).acquire_owned())
            .await
            .ok()
            .and_then(Result::ok);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        metrics::histogram!(crate::telemetry::WRITE_WAIT).record(started.elapsed().as_secs_f64());
        permit
    }

    /// Purchases waiting for a slot right now.
    pub fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    pub fn permits(&self) -> usize {
        self.size
    }

    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_buffer_turns_the_next_writer_away_after_the_wait_bound() {
        let buffer = WriteBuffer::new(1, Duration::from_millis(50));
        let held = buffer.acquire().await;
        assert!(held.is_some());
        assert!(buffer.acquire().await.is_none());
        drop(held);
        assert!(buffer.acquire().await.is_some());
    }
}
