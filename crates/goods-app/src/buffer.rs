//! The write buffer (design document FR-7): a semaphore bounding how many admitted purchases
//! write to the database at once. An admitted purchase that finds no slot within the wait bound
//! is answered 429 instead of queueing without limit.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A bounded set of database write slots with a wait bound.
#[derive(Debug, Clone)]
pub struct WriteBuffer {
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl WriteBuffer {
    /// `permits` concurrent writes; a purchase waits at most `wait` for one.
    pub fn new(permits: usize, wait: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(permits)),
            wait,
        }
    }

    /// A write slot, held until the returned permit drops; `None` when none frees up in time.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(self.wait, Arc::clone(&self.permits).acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Slots free right now.
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
