//! The application's background tasks, owned. Every task is spawned here, on the runtime the
//! application was built on (an HTTP worker's runtime stops with its worker), and tracked, so
//! shutdown can stop the loops and wait for the rest to finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The tracker of every background task of one application.
#[derive(Clone, Debug)]
pub struct Tasks {
    tracker: TaskTracker,
    stop: CancellationToken,
    runtime: Option<Handle>,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
            runtime: Handle::try_current().ok(),
        }
    }
}

impl Tasks {
    /// Runs `task` to its end in the background; shutdown waits for it.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        match &self.runtime {
            Some(runtime) => drop(self.tracker.spawn_on(task, runtime)),
            None => drop(self.tracker.spawn(task)),
        }
    }

    /// Runs `pass` every `period` (and whenever `wake` is notified) until shutdown begins. A
    /// pass under way then finishes; no new one starts.
    pub fn every<F, Fut>(&self, period: Duration, wake: Option<Arc<Notify>>, mut pass: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let stop = self.stop.clone();
        self.spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let woken = || async {
                match &wake {
                    Some(wake) => wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    _ = ticker.tick() => {}
                    () = woken() => {}
                }
                pass().await;
            }
        });
    }

    /// Cancelled when shutdown begins: for a task that must notice it mid-way.
    pub fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops the loops and waits up to `within` for every task to end; `false` when some are
    /// still running then (they are dropped with the runtime).
    pub async fn shutdown(&self, within: Duration) -> bool {
        self.stop.cancel();
        self.tracker.close();
        tokio::time::timeout(within, self.tracker.wait())
            .await
            .is_ok()
    }

    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_the_loops_and_waits_for_the_task_under_way() {
        let tasks = Tasks::default();
        let passes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&passes);
        tasks.every(Duration::from_secs(1), None, move || {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        let done = Arc::new(AtomicUsize::new(0));
        let flag = Arc::clone(&done);
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            flag.store(1, Ordering::SeqCst);
        });
        tokio::time::sleep(Duration::from_millis(2100)).await;
        // The first tick fires at once, then one a second.
        assert_eq!(passes.load(Ordering::SeqCst), 3);
        assert!(tasks.shutdown(Duration::from_secs(1)).await);
        assert_eq!(done.load(Ordering::SeqCst), 1, "the one-shot task finished");
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 3, "no pass after shutdown");
        assert!(tasks.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_past_the_bound_is_reported() {
        let tasks = Tasks::default();
        tasks.spawn(async { tokio::time::sleep(Duration::from_secs(60)).await });
        assert!(!tasks.shutdown(Duration::from_secs(1)).await);
        assert_eq!(tasks.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_runs_a_pass_before_the_next_tick() {
        let tasks = Tasks::default();
        let wake = Arc::new(Notify::new());
        let passes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&passes);
        tasks.every(
            Duration::from_secs(60),
            Some(Arc::clone(&wake)),
            move || {
                let counted = Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 1, "the first tick");
        wake.notify_one();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            passes.load(Ordering::SeqCst),
            2,
            "woken, not a minute later"
        );
        assert!(tasks.shutdown(Duration::from_secs(1)).await);
    }
}
