//! Wiring: configuration in, a running HTTP server out. Nothing here decides behaviour; it
//! only picks adapters.

mod events;
mod shared;
mod store;

pub use store::migrate;

use crate::config::{Auth, Background, Config, GateKind};
use adapters_memory::LogEventPublisher;
use anyhow::Context as _;
use api_actix::{ApiState, AuthMode, Readiness};
use goods_app::{GoodsApp, Ports, WriteBuffer};
use goods_domain::ports::{BACKGROUND, Clock, DRAWS, EVENTS, LeaseStore, SystemClock};
use secrecy::ExposeSecret as _;
use shared::Redis;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// A built, not yet running, service.
pub struct Application {
    server: actix_web::dev::Server,
    address: SocketAddr,
    /// `/metrics` and the probes, on `OPS_BIND_ADDR`.
    ops: actix_web::dev::Server,
    ops_address: SocketAddr,
    app: GoodsApp,
    background: Background,
    /// Woken by a change notice: the refresher runs at once instead of at its next tick.
    changed: Arc<tokio::sync::Notify>,
    /// The lease the background work runs under when the gate's state is the fleet's; `None`
    /// with an in-process gate, which every instance must heal itself.
    lease: Option<Arc<dyn LeaseStore>>,
    /// The Redis connection, closed last.
    redis: Option<Redis>,
    /// Publishes the event log, when a broker is configured; under the store's `events` lease.
    relay: Option<(goods_app::Relay, Arc<dyn LeaseStore>)>,
    readiness: Readiness,
    /// The metrics recorder, whose histograms are folded in periodically.
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
    shutdown_grace: Duration,
    signals: StopSignals,
}

/// How a server stopped.
#[derive(Debug, Clone, Copy)]
pub struct Stopped {
    /// The moment by which the process must have exited (`SHUTDOWN_GRACE_MS` after the signal
    /// or the stop); what is left of it is for flushing traces.
    pub deadline: tokio::time::Instant,
    /// Whether every in-flight request was answered, every committer drained and every
    /// background task ended within the bound.
    pub clean: bool,
}

impl Application {
    /// Opens the database (migrating it unless disabled), picks the gate, binds the listener.
    ///
    /// # Errors
    /// When the database cannot be opened or the address cannot be bound.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        Self::build_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`build`](Self::build) with another clock: tests move time (payment windows, a drop's
    /// opening and closing) instead of sleeping. The database keeps its own clock for
    /// admission leases, which only decides when a stuck reservation is given up.
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub async fn build_with_clock(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let db = &config.database;
        // The database's identity names the gate's keys in Redis (RedisConnection::mirroring).
        let (sql, identity) = store::open(db).await?;
        let redis = match &config.redis {
            Some(redis) => Some(shared::connect(redis, &identity).await?),
            None => None,
        };
        // With a shared Redis, a flag or drop change reaches the fleet by a notice at once;
        // the refresh every DROP_REFRESH_MS is the fallback when a notice is lost.
        let changed = Arc::new(tokio::sync::Notify::new());
        let gate = shared::gate_ports(&config, redis.as_ref(), {
            let wake = Arc::clone(&changed);
            move || wake.notify_one()
        });
        let purchases = &config.purchases;
        let relay = events::relay(&config.events, sql.store.clone(), Arc::clone(&clock))
            .await?
            .map(|relay| (relay, sql.store.clone() as Arc<dyn LeaseStore>));
        let mut ports = Ports::from_store(
            &sql.store,
            gate.gate,
            clock,
            Arc::new(LogEventPublisher),
            gate.stats,
            Arc::new(config.draw_seal.vault()),
        );
        if let Some(budget) = gate.budget {
            // A permit outlives the longest a purchase transaction may take.
            ports.ledger = Arc::new(goods_app::Budgeted::new(
                ports.ledger,
                budget,
                purchases.write_wait,
                db.acquire_timeout + db.tx_timeout + Duration::from_secs(2),
            ));
        }
        let app = GoodsApp::new(
            ports,
            WriteBuffer::new(purchases.write_permits, purchases.write_wait),
        )
        .with_lease(purchases.lease)
        .with_group_commit(purchases.group_commit)
        .with_payment_window(purchases.payment_window)
        .with_event_retention(goods_app::Retention {
            keep: config.events.retention,
            published_only: config.events.broker.is_some(),
        });
        let app = match gate.notifier {
            Some(notifier) => app.with_change_notifier(notifier),
            None => app,
        };
        let app = app.with_seller_quota(config.abuse.seller_max_active_drops);
        let app = app.with_rate_limits(goods_app::RateLimits::new(
            config.abuse.per_buyer,
            config.abuse.per_ip,
            Arc::new(adapters_memory::MemoryRateLimiter::new()),
            gate.rate,
        ));
        if !config.flags_at_first_start {
            // Before the listener opens: a dark release never serves a drop route.
            app.ship_dark().await?;
        }
        let auth = match &config.auth {
            Auth::Jwt {
                secret,
                issuer,
                audience,
                max_ttl,
            } => AuthMode::jwt(
                secret.expose_secret().as_bytes(),
                issuer.as_deref(),
                audience.as_deref(),
                *max_ttl,
            ),
            Auth::TrustedHeader { proxies } => AuthMode::trusted_header(proxies.clone()),
        };
        let readiness = Readiness::new(sql.probe, gate.probe, config.gate.name());
        let prometheus = crate::metrics::recorder(config.background.reconcile_interval);
        let state = ApiState {
            app: app.clone(),
            auth,
            readiness: readiness.clone(),
            metrics: {
                let (prometheus, app) = (prometheus.clone(), app.clone());
                let pool = Arc::clone(&sql.pool);
                Arc::new(move || {
                    app.record_gauges();
                    pool().record();
                    prometheus.run_upkeep();
                    prometheus.render()
                })
            },
            forwarders: Arc::new(config.abuse.forwarders.clone()),
            loopback_hosts_only: config.embedded(),
            payment_secret: config
                .payment_secret
                .as_ref()
                .map(|secret| api_actix::WebhookSecret::new(secret.expose_secret().as_bytes())),
        };
        let http = &config.http;
        let signals = StopSignals::listen();
        let listener = TcpListener::bind(http.bind_addr)
            .with_context(|| format!("binding {}", http.bind_addr))?;
        let address = listener.local_addr()?;
        let ops_listener = TcpListener::bind(http.ops_addr)
            .with_context(|| format!("binding OPS_BIND_ADDR {}", http.ops_addr))?;
        let ops_address = ops_listener.local_addr()?;
        // The first two log lines; scripts and tests read the chosen ports from them.
        tracing::info!("listening on {address}");
        tracing::info!("ops listening on {ops_address}");
        if let Some(broker) = &config.events.broker {
            tracing::info!(stream = %broker.stream, "events are published to NATS JetStream");
        }
        let ops = api_actix::ops_server(ops_listener, state.clone())?;
        let server = api_actix::server(listener, state, http.workers, http.shutdown_grace)?;
        if let Auth::TrustedHeader { proxies } = &config.auth {
            let proxies: Vec<String> = proxies.iter().map(ToString::to_string).collect();
            tracing::warn!(
                proxies = %proxies.join(","),
                "AUTH_MODE=trusted-header: X-User-Id is trusted as sent by these peers only; run this behind a gateway that sets it"
            );
        }
        Ok(Self {
            server,
            address,
            ops,
            ops_address,
            app,
            background: config.background.clone(),
            changed,
            lease: (config.gate.kind() == GateKind::Shared)
                .then(|| sql.store.clone() as Arc<dyn LeaseStore>),
            redis,
            relay,
            readiness,
            prometheus,
            shutdown_grace: http.shutdown_grace,
            signals,
        })
    }

    /// The bound address (the real port when configured with port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The ops listener's bound address (`/metrics`, the probes).
    pub fn ops_address(&self) -> SocketAddr {
        self.ops_address
    }

    /// A handle to stop the server gracefully, as SIGTERM does.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// [`serve`](Self::serve), for callers that only need to know it ended.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.serve().await.map(drop)
    }

    /// Serves until SIGTERM, SIGINT or [`handle`](Self::handle)`.stop(true)`, with the
    /// background work (healing, refresh, the background lease) alongside, then shuts down
    /// within `SHUTDOWN_GRACE_MS`: no new connection is accepted and `/health/ready` answers
    /// 503; in-flight requests are answered (a purchase's 202 only once its order is
    /// committed); each drop's committer commits what it holds; the loops stop after the pass
    /// under way; the outcome counters are flushed to Redis; the ops listener stops last.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn serve(self) -> std::io::Result<Stopped> {
        self.start_background();
        let Self {
            server,
            ops,
            app,
            redis,
            readiness,
            shutdown_grace,
            signals,
            ..
        } = self;
        // The ops listener serves from now until the very end of the shutdown.
        let ops_handle = ops.handle();
        let ops_task = tokio::spawn(ops);
        let handle = server.handle();
        let mut server = std::pin::pin!(server);
        let (served, deadline, mut clean) = tokio::select! {
            result = &mut server => (result, tokio::time::Instant::now() + shutdown_grace, true),
            signal = signals.recv() => {
                let deadline = tokio::time::Instant::now() + shutdown_grace;
                tracing::info!(
                    signal,
                    grace_ms = shutdown_grace.as_millis(),
                    "shutting down: no new connections, answering the requests in flight"
                );
                readiness.stop();
                // The stop is sent at once; the server's own future carries it out.
                drop(handle.stop(true));
                // The requests get the grace but a fifth, kept for the rest of the shutdown.
                match tokio::time::timeout_at(deadline - shutdown_grace / 5, &mut server).await {
                    Ok(result) => (result, deadline, true),
                    Err(_) => {
                        tracing::warn!("requests still in flight at the end of their grace; cut");
                        (Ok(()), deadline, false)
                    }
                }
            }
        };
        readiness.stop();
        let began = deadline - shutdown_grace;
        let elapsed_ms = || began.elapsed().as_millis();
        tracing::info!(
            elapsed_ms = elapsed_ms(),
            "requests answered; draining the committers"
        );
        let rest = deadline.saturating_duration_since(tokio::time::Instant::now());
        if !app.shutdown(rest * 4 / 5).await {
            tracing::warn!(
                tasks = app.tasks().len(),
                "background tasks still running at the end of the grace"
            );
            clean = false;
        }
        tracing::info!(
            elapsed_ms = elapsed_ms(),
            "committers drained, background tasks ended"
        );
        if let Some(redis) = redis {
            let rest = deadline.saturating_duration_since(tokio::time::Instant::now());
            clean &= redis.close(rest / 2).await;
            tracing::info!(
                elapsed_ms = elapsed_ms(),
                "Redis counters flushed, connection closed"
            );
        }
        let _ = tokio::time::timeout_at(deadline, async {
            ops_handle.stop(true).await;
            let _ = ops_task.await;
        })
        .await;
        tracing::info!(clean, elapsed_ms = elapsed_ms(), "stopped");
        served.map(|()| Stopped { deadline, clean })
    }

    /// Starts the ops listener and the loops, all owned by the application's tracker.
    fn start_background(&self) {
        let tasks = self.app.tasks();
        let leading = Arc::new(std::sync::atomic::AtomicBool::new(self.lease.is_none()));
        if let Some(period) = self.background.reconcile_interval {
            if let Some(lease) = &self.lease {
                keep_lease(
                    tasks,
                    BACKGROUND,
                    Arc::clone(lease),
                    period,
                    Arc::clone(&leading),
                    None,
                );
            }
            let app = self.app.clone();
            tasks.every(period, None, move || {
                let (app, leading) = (app.clone(), Arc::clone(&leading));
                async move {
                    if !leading.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    match app.heal_all().await {
                        Ok(report) if report != goods_app::HealReport::default() => {
                            tracing::debug!(?report, "healing pass");
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(error = %error, "healing pass failed"),
                    }
                }
            });
        }
        // Draws keep their own schedule, whatever the healing pass's period (0 included), on
        // one instance of the fleet at a time.
        let drawing = Arc::new(std::sync::atomic::AtomicBool::new(self.lease.is_none()));
        if let Some(lease) = &self.lease {
            // Taken only while this instance holds a draw whose entries have closed: a fleet
            // without one renews no lease for draws.
            let app = self.app.clone();
            keep_lease(
                tasks,
                DRAWS,
                Arc::clone(lease),
                3 * goods_app::DRAW_TICK,
                Arc::clone(&drawing),
                Some(Arc::new(move || app.holds_draws_to_tend())),
            );
        }
        let app = self.app.clone();
        tasks.every(goods_app::DRAW_TICK, None, move || {
            let (app, drawing) = (app.clone(), Arc::clone(&drawing));
            async move {
                if let Err(error) = app.hold_draw_drops().await {
                    tracing::warn!(error = %error, "listing draw drops failed; next tick tries again");
                }
                if !drawing.load(std::sync::atomic::Ordering::SeqCst) {
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
        // The event log to the broker, one instance of the fleet at a time, whatever the gate.
        if let Some((relay, lease)) = &self.relay {
            let relaying = Arc::new(std::sync::atomic::AtomicBool::new(false));
            keep_lease(
                tasks,
                EVENTS,
                Arc::clone(lease),
                30 * events::RELAY_TICK,
                Arc::clone(&relaying),
                None,
            );
            let relay = relay.clone();
            tasks.every(events::RELAY_TICK, None, move || {
                let (relay, relaying) = (relay.clone(), Arc::clone(&relaying));
                async move {
                    if !relaying.load(std::sync::atomic::Ordering::SeqCst) {
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
        // Notices that arrive during a refresh leave one permit: one more refresh.
        let app = self.app.clone();
        tasks.every(
            self.background.drop_refresh,
            Some(Arc::clone(&self.changed)),
            move || {
                let app = app.clone();
                async move {
                    if let Err(error) = app.refresh().await {
                        tracing::warn!(error = %error, "drop refresh failed; the cache keeps what it had");
                    }
                }
            },
        );
        // Histogram samples wait in lock-free buckets until upkeep folds them in; scrapes run
        // it too, but a server nobody scrapes must not keep every sample.
        let prometheus = self.prometheus.clone();
        tasks.every(crate::metrics::UPKEEP, None, move || {
            prometheus.run_upkeep();
            std::future::ready(())
        });
    }
}

/// SIGTERM (what an orchestrator sends) and SIGINT (Ctrl-C), both graceful stops. Listened for
/// from the start, before the first log line: a signal sent as soon as the server said where it
/// listens is not lost (or fatal, as it would be without a handler).
struct StopSignals {
    terminate: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn listen() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind, name| {
            signal(kind)
                .inspect_err(|error| tracing::warn!(error = %error, "{name} handler not installed"))
                .ok()
        };
        Self {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// The first of them to arrive.
    async fn recv(mut self) -> &'static str {
        tokio::select! {
            () = next(self.terminate.as_mut()) => "SIGTERM",
            () = next(self.interrupt.as_mut()) => "SIGINT",
        }
    }
}

/// The next delivery of `signal`; never, when it has no handler.
async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => drop(signal.recv().await),
        None => std::future::pending().await,
    }
}

/// Takes and renews the background lease for as long as this instance runs: every third of
/// `period`, for `period`. A leader that dies loses it at most `period` after its last renewal,
/// and another instance takes it within a third of a period after that: the background work
/// moves within two periods. Every step of that work is idempotent, so the rare overlap (a pass
/// longer than the lease) does no harm.
fn keep_lease(
    tasks: &goods_app::Tasks,
    name: &'static str,
    lease: Arc<dyn LeaseStore>,
    period: Duration,
    leading: Arc<std::sync::atomic::AtomicBool>,
    wanted: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
) {
    let holder = format!(
        "{}:{}:{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "goods-server".into()),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let renew = (period / 3).max(Duration::from_millis(10));
    tasks.every(renew, None, move || {
        let (lease, holder, leading) = (Arc::clone(&lease), holder.clone(), Arc::clone(&leading));
        let wanted = wanted.as_ref().is_none_or(|wanted| wanted());
        async move {
            if !wanted {
                leading.store(false, std::sync::atomic::Ordering::SeqCst);
                return;
            }
            let now = match lease.try_lead(name, &holder, period).await {
                Ok(held) => held,
                Err(error) => {
                    tracing::warn!(error = %error, "background lease not renewed; not leading");
                    false
                }
            };
            let was = leading.swap(now, std::sync::atomic::Ordering::SeqCst);
            if now != was {
                tracing::info!(holder = %holder, lease = name, leading = now, "lease changed hands");
            }
            if name == BACKGROUND {
                metrics::gauge!(goods_app::telemetry::BACKGROUND_LEADER).set(if now {
                    1.0
                } else {
                    0.0
                });
            }
        }
    });
}
