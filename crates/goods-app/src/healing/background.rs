//! The loops beside the requests (healing pass, draws, event relay, drop refresh), owned by
//! [`Tasks`](crate::Tasks). Fleet-wide work runs under a named lease, one instance at a time:
//! [`BACKGROUND`], [`DRAWS`] (only while a draw is due), [`EVENTS`]; a failing lease store
//! counts as not held.

use crate::{Deliverer, GoodsApp, Relay};
use goods_domain::ports::{BACKGROUND, DRAWS, EVENTS, LeaseStore, WEBHOOKS};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How often the relay looks for new events: a round with nothing to publish is one indexed
/// read, on the one instance holding the `events` lease.
pub const RELAY_TICK: Duration = Duration::from_millis(100);

/// Sellers' webhook deliveries on this instance: a round every `every` while it holds the
/// `webhooks` lease (a round with nothing to do is two indexed reads).
pub struct Delivering {
    pub deliverer: Deliverer,
    /// The store holding the lease.
    pub store: Arc<dyn LeaseStore>,
    pub every: Duration,
    /// `WEBHOOK_DISABLE_AFTER_S`.
    pub disable_after: Duration,
}

/// How often the lease holder disables failing endpoints and sets the backlog's gauges.
pub const WEBHOOK_UPKEEP: Duration = Duration::from_secs(5);

/// What the background runs, and under which leases.
pub struct Background {
    /// This instance's name in the leases; unique across the fleet and its restarts.
    pub holder: String,
    /// The healing pass's period (`RECONCILE_INTERVAL_MS`); `None`: no pass.
    pub heal_every: Option<Duration>,
    /// The drop and flag refresh's period (`DROP_REFRESH_MS`), the fallback for lost notices.
    pub refresh_every: Duration,
    /// Woken by a change notice: the refresh runs at once.
    pub changed: Arc<Notify>,
    /// The lease store when the gate's state is the fleet's; `None` with an in-process gate,
    /// which every instance heals and draws for itself.
    pub fleet: Option<Arc<dyn LeaseStore>>,
    /// The event relay and the store holding its lease, when a broker is configured.
    pub relay: Option<(Relay, Arc<dyn LeaseStore>)>,
    /// Sellers' webhook deliveries, unless this instance leaves them to others.
    pub webhooks: Option<Delivering>,
}

impl GoodsApp {
    /// Starts the loops `background` describes.
    pub fn start_background(&self, background: Background) {
        let Background {
            holder,
            heal_every,
            refresh_every,
            changed,
            fleet,
            relay,
            webhooks,
        } = background;
        let tasks = self.tasks();
        if let Some(period) = heal_every {
            let leading = Arc::new(AtomicBool::new(fleet.is_none()));
            if let Some(fleet) = &fleet {
                self.keep_lease(
                    Lease::new(BACKGROUND, &holder, fleet, period),
                    &leading,
                    None,
                );
            }
            let app = self.clone();
            tasks.every(period, None, move || {
                let (app, leading) = (app.clone(), Arc::clone(&leading));
                async move {
                    if !leading.load(Ordering::SeqCst) {
                        return;
                    }
                    match app.heal_all().await {
                        Ok(report) if report != crate::HealReport::default() => {
                            tracing::debug!(?report, "healing pass");
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(error = %error, "healing pass failed"),
                    }
                }
            });
        }
        // Draws keep their own schedule whatever the healing pass's period (0 included). Their
        // lease is wanted only while a draw is due here: a fleet without one renews nothing.
        let drawing = Arc::new(AtomicBool::new(fleet.is_none()));
        if let Some(fleet) = &fleet {
            let app = self.clone();
            self.keep_lease(
                Lease::new(DRAWS, &holder, fleet, 3 * crate::DRAW_TICK),
                &drawing,
                Some(Box::new(move || app.holds_draws_to_tend())),
            );
        }
        let app = self.clone();
        tasks.every(crate::DRAW_TICK, None, move || {
            let (app, drawing) = (app.clone(), Arc::clone(&drawing));
            async move {
                if let Err(error) = app.hold_draw_drops().await {
                    tracing::warn!(error = %error, "listing draw drops failed; next tick tries again");
                }
                if !drawing.load(Ordering::SeqCst) {
                    return;
                }
                match app.tend_draws().await {
                    Ok(report) if report.draws + report.promoted as usize + report.failed > 0 => {
                        tracing::debug!(?report, "draws tended");
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(error = %error, "tending draws failed"),
                }
            }
        });
        if let Some((relay, store)) = relay {
            let relaying = Arc::new(AtomicBool::new(false));
            self.keep_lease(
                Lease::new(EVENTS, &holder, &store, 30 * RELAY_TICK),
                &relaying,
                None,
            );
            tasks.every(RELAY_TICK, None, move || {
                let (relay, relaying) = (relay.clone(), Arc::clone(&relaying));
                async move {
                    if !relaying.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Err(error) = relay.tick().await {
                        tracing::warn!(error = %error, "event relay failed; next tick tries again");
                    }
                    if let Err(error) = relay.record_backlog().await {
                        tracing::warn!(error = %error, "event backlog not read");
                    }
                }
            });
        }
        if let Some(Delivering {
            deliverer,
            store,
            every,
            disable_after,
        }) = webhooks
        {
            let delivering = Arc::new(AtomicBool::new(false));
            self.keep_lease(
                Lease::new(
                    WEBHOOKS,
                    &holder,
                    &store,
                    (30 * every).max(Duration::from_secs(3)),
                ),
                &delivering,
                None,
            );
            let (keeper, keeping) = (deliverer.clone(), Arc::clone(&delivering));
            let disable_after =
                time::Duration::try_from(disable_after).unwrap_or(time::Duration::MAX);
            tasks.every(WEBHOOK_UPKEEP, None, move || {
                let (keeper, keeping) = (keeper.clone(), Arc::clone(&keeping));
                async move {
                    if !keeping.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Err(error) = keeper.upkeep(disable_after).await {
                        tracing::warn!(error = %error, "webhook upkeep failed; next tick tries again");
                    }
                }
            });
            tasks.every(every, None, move || {
                let (deliverer, delivering) = (deliverer.clone(), Arc::clone(&delivering));
                async move {
                    if !delivering.load(Ordering::SeqCst) {
                        return;
                    }
                    match deliverer.round().await {
                        Ok(report) if report != crate::RoundReport::default() => {
                            tracing::debug!(?report, "webhook round");
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(error = %error, "webhook round failed; next tick tries again"),
                    }
                }
            });
        }
        // Notices that arrive during a refresh leave one permit: one more refresh.
        let app = self.clone();
        tasks.every(refresh_every, Some(changed), move || {
            let app = app.clone();
            async move {
                if let Err(error) = app.refresh().await {
                    tracing::warn!(error = %error, "drop refresh failed; the cache keeps what it had");
                }
            }
        });
    }

    /// Takes and renews `lease` every third of its period, saying in `leading` whether it is
    /// held here; a dead holder's work moves within two periods (the work is idempotent, so an
    /// overlap is harmless). While `wanted` says no, the lease is left alone.
    fn keep_lease(
        &self,
        lease: Lease,
        leading: &Arc<AtomicBool>,
        wanted: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    ) {
        let leading = Arc::clone(leading);
        let lease = Arc::new(lease);
        let renew = (lease.period / 3).max(Duration::from_millis(10));
        self.tasks().every(renew, None, move || {
            let (lease, leading) = (Arc::clone(&lease), Arc::clone(&leading));
            let wanted = wanted.as_ref().is_none_or(|wanted| wanted());
            async move {
                let now = wanted && lease.try_lead().await;
                let was = leading.swap(now, Ordering::SeqCst);
                if now != was {
                    tracing::info!(holder = %lease.holder, lease = lease.name, leading = now, "lease changed hands");
                }
                if lease.name == BACKGROUND {
                    metrics::gauge!(crate::telemetry::BACKGROUND_LEADER)
                        .set(if now { 1.0 } else { 0.0 });
                }
            }
        });
    }
}

/// One named lease as this instance asks for it.
struct Lease {
    name: &'static str,
    holder: String,
    store: Arc<dyn LeaseStore>,
    period: Duration,
}

impl Lease {
    fn new(
        name: &'static str,
        holder: &str,
        store: &Arc<dyn LeaseStore>,
        period: Duration,
    ) -> Self {
        Self {
            name,
            holder: holder.to_owned(),
            store: Arc::clone(store),
            period,
        }
    }

    /// Whether this instance holds the lease now; a failing store says no.
    async fn try_lead(&self) -> bool {
        self.store
            .try_lead(self.name, &self.holder, self.period)
            .await
            .inspect_err(|error| tracing::warn!(lease = self.name, error = %error, "lease not renewed; not leading"))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{MockEventBroker, MockEventLog, MockLeaseStore};
    use goods_domain::{InfraError, LimitedDrop};
    use std::sync::atomic::AtomicUsize;

    /// A lease store that grants what `grant` says when asked, counting the asks per lease.
    struct Granting {
        grant: Arc<AtomicBool>,
        fail: Arc<AtomicBool>,
        asks: Arc<std::sync::Mutex<Vec<&'static str>>>,
    }

    impl Granting {
        fn new() -> Self {
            Self {
                grant: Arc::new(AtomicBool::new(true)),
                fail: Arc::new(AtomicBool::new(false)),
                asks: Arc::default(),
            }
        }

        fn store(&self) -> Arc<dyn LeaseStore> {
            let (grant, fail, asks) = (
                Arc::clone(&self.grant),
                Arc::clone(&self.fail),
                Arc::clone(&self.asks),
            );
            let mut store = MockLeaseStore::new();
            store.expect_try_lead().returning(move |name, holder, _| {
                assert_eq!(holder, "instance-a");
                let name = [BACKGROUND, DRAWS, EVENTS]
                    .into_iter()
                    .find(|known| *known == name)
                    .expect("a known lease");
                asks.lock().unwrap().push(name);
                if fail.load(Ordering::SeqCst) {
                    return Err(InfraError::msg("the lease store is down"));
                }
                Ok(grant.load(Ordering::SeqCst))
            });
            Arc::new(store)
        }

        fn asks_for(&self, name: &str) -> usize {
            self.asks
                .lock()
                .unwrap()
                .iter()
                .filter(|n| **n == name)
                .count()
        }
    }

    /// An app whose healing pass counts itself (each pass lists the unclosed drops once, and
    /// the draws' first tick lists them once more) and holds no draw.
    fn counting_app(passes: &Arc<AtomicUsize>) -> GoodsApp {
        let mut m = Mocks::at(OPEN);
        let counted = Arc::clone(passes);
        m.drops.expect_list_unclosed().returning(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::<LimitedDrop>::new())
        });
        m.outbox.expect_unpublished().returning(|_| Ok(Vec::new()));
        m.drops.expect_get_many().returning(|_| Ok(Vec::new()));
        m.flags.expect_flags().returning(|| Ok(Vec::new()));
        m.app(None)
    }

    fn background(fleet: Option<Arc<dyn LeaseStore>>) -> Background {
        Background {
            holder: "instance-a".into(),
            heal_every: Some(Duration::from_secs(3)),
            refresh_every: Duration::from_secs(3600),
            changed: Arc::default(),
            fleet,
            relay: None,
            webhooks: None,
        }
    }

    async fn passes_between(
        passes: &AtomicUsize,
        from: f64,
        to: f64,
        start: tokio::time::Instant,
    ) -> usize {
        tokio::time::sleep_until(start + Duration::from_secs_f64(from)).await;
        let before = passes.load(Ordering::SeqCst);
        tokio::time::sleep_until(start + Duration::from_secs_f64(to)).await;
        passes.load(Ordering::SeqCst) - before
    }

    #[tokio::test(start_paused = true)]
    async fn the_healing_pass_runs_only_while_this_instance_holds_the_lease() {
        let passes = Arc::new(AtomicUsize::new(0));
        let app = counting_app(&passes);
        let lease = Granting::new();
        let start = tokio::time::Instant::now();
        app.start_background(background(Some(lease.store())));
        // Held from the first renewal (t=0): passes at 3, 6 and 9 s. The draws' first tick
        // lists the drops once too, at t=0, before this window.
        assert_eq!(passes_between(&passes, 0.5, 9.5, start).await, 3);
        // Another instance takes it: this one learns so at its next renewal (t=10), and the
        // passes at 12, 15 and 18 s are skipped.
        lease.grant.store(false, Ordering::SeqCst);
        assert_eq!(passes_between(&passes, 9.5, 20.5, start).await, 0);
        // A failing lease store is a lease not held.
        lease.fail.store(true, Ordering::SeqCst);
        lease.grant.store(true, Ordering::SeqCst);
        assert_eq!(passes_between(&passes, 20.5, 29.5, start).await, 0);
        // Back: renewed at 30 s, passes at 33, 36 and 39 s.
        lease.fail.store(false, Ordering::SeqCst);
        assert_eq!(passes_between(&passes, 30.5, 39.5, start).await, 3);
        // Renewed every third of the period: at 0, 1, ..., 39 s.
        assert_eq!(lease.asks_for(BACKGROUND), 40);
        assert!(app.shutdown(Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn with_an_in_process_gate_every_instance_heals_and_asks_no_lease() {
        let passes = Arc::new(AtomicUsize::new(0));
        let app = counting_app(&passes);
        let start = tokio::time::Instant::now();
        app.start_background(background(None));
        assert_eq!(passes_between(&passes, 0.5, 9.5, start).await, 3);
        assert!(app.shutdown(Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_draws_lease_is_not_asked_for_while_no_draw_is_due_here() {
        let passes = Arc::new(AtomicUsize::new(0));
        let app = counting_app(&passes);
        let lease = Granting::new();
        let mut config = background(Some(lease.store()));
        config.heal_every = None;
        app.start_background(config);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(lease.asks_for(DRAWS), 0);
        assert_eq!(
            lease.asks_for(BACKGROUND),
            0,
            "no healing pass, no lease for it"
        );
        // The unclosed drops were listed once, to hold the draw drops; then never again.
        assert_eq!(passes.load(Ordering::SeqCst), 1);
        assert!(app.shutdown(Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_relay_publishes_only_under_the_events_lease() {
        let passes = Arc::new(AtomicUsize::new(0));
        let app = counting_app(&passes);
        let reads = Arc::new(AtomicUsize::new(0));
        let mut log = MockEventLog::new();
        let counted = Arc::clone(&reads);
        log.expect_pending_events().returning(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::new())
        });
        log.expect_backlog().returning(|| Ok(Default::default()));
        let mut clock = goods_domain::ports::MockClock::new();
        clock.expect_now().return_const(OPEN);
        let relay = Relay::new(
            Arc::new(log),
            Arc::new(MockEventBroker::new()),
            Arc::new(clock),
        );
        let lease = Granting::new();
        lease.grant.store(false, Ordering::SeqCst);
        let mut config = background(None);
        config.heal_every = None;
        config.relay = Some((relay, lease.store()));
        let start = tokio::time::Instant::now();
        app.start_background(config);
        // The lease (3 s, renewed every second) is refused: no round reads the log.
        tokio::time::sleep_until(start + Duration::from_millis(2500)).await;
        assert_eq!(reads.load(Ordering::SeqCst), 0);
        assert_eq!(lease.asks_for(EVENTS), 3);
        // Granted at the renewal at 3 s: a round every 100 ms from then, at 3.0 s (maybe, as
        // it ties with the renewal) and 3.1 .. 4.0 s.
        lease.grant.store(true, Ordering::SeqCst);
        tokio::time::sleep_until(start + Duration::from_millis(3050)).await;
        let first = reads.load(Ordering::SeqCst);
        tokio::time::sleep_until(start + Duration::from_millis(4050)).await;
        assert_eq!(reads.load(Ordering::SeqCst) - first, 10);
        assert!(app.shutdown(Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_notice_refreshes_at_once_and_the_period_is_the_fallback() {
        let refreshes = Arc::new(AtomicUsize::new(0));
        let mut m = Mocks::at(OPEN);
        m.drops.expect_list_unclosed().returning(|_| Ok(Vec::new()));
        m.drops.expect_get_many().returning(|_| Ok(Vec::new()));
        let counted = Arc::clone(&refreshes);
        m.flags.expect_flags().returning(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::new())
        });
        let app = m.app(None);
        let mut config = background(None);
        config.heal_every = None;
        config.refresh_every = Duration::from_secs(10);
        let changed = Arc::clone(&config.changed);
        let start = tokio::time::Instant::now();
        app.start_background(config);
        tokio::time::sleep_until(start + Duration::from_secs(1)).await;
        assert_eq!(
            refreshes.load(Ordering::SeqCst),
            1,
            "the first tick, at once"
        );
        changed.notify_one();
        tokio::time::sleep_until(start + Duration::from_secs(2)).await;
        assert_eq!(
            refreshes.load(Ordering::SeqCst),
            2,
            "the notice, 8 s before the tick"
        );
        tokio::time::sleep_until(start + Duration::from_secs(11)).await;
        assert_eq!(refreshes.load(Ordering::SeqCst), 3, "the period, at 10 s");
        assert!(app.shutdown(Duration::from_secs(1)).await);
    }
}
