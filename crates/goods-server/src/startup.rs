//! Wiring: configuration in, a running HTTP server out. Nothing here decides behaviour; it
//! only picks adapters.

mod app;
mod events;
mod listeners;
mod shared;
mod signals;
mod store;

pub use store::migrate;

use crate::config::{Auth, Config, GateKind};
use api_actix::{ApiState, Readiness};
use goods_app::GoodsApp;
use goods_domain::ports::{Clock, LeaseStore, SystemClock};
use listeners::Listeners;
use shared::Redis;
use signals::StopSignals;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A built, not yet running, service.
pub struct Application {
    bound: Bound,
    app: GoodsApp,
    /// The loops started with the server.
    background: goods_app::Background,
    /// The Redis connection, closed last.
    redis: Option<Redis>,
    readiness: Readiness,
    /// The metrics recorder, whose histograms are folded in periodically.
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
}

struct Bound {
    server: actix_web::dev::Server,
    address: SocketAddr,
    /// `/metrics` and the probes, on `OPS_BIND_ADDR`.
    ops: actix_web::dev::Server,
    ops_address: SocketAddr,
    shutdown_grace: Duration,
    signals: StopSignals,
}

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

    /// [`build`](Self::build) with another clock, so tests move time instead of sleeping (the
    /// database keeps its own for admission leases).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub async fn build_with_clock(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let signals = StopSignals::listen();
        // Bound first: the first two log lines name the addresses (scripts and tests read the
        // chosen ports from them), whatever the store or Redis say while they are opened.
        // Connections wait in the backlog until the server runs.
        let listeners = Listeners::bind(&config.http)?;
        // Before the store opens, so a writer's move past a dead first host is counted.
        let prometheus = crate::metrics::recorder(config.background.reconcile_interval);
        // The database's identity names the gate's keys in Redis (RedisConnection::mirroring).
        let (sql, identity) = store::open(&config.database).await?;
        signals::on_hangup(sql.reset_writer.clone());
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
        let readiness = Readiness::new(sql.probe.clone(), gate.probe.clone(), config.gate.name());
        let relay = events::relay(&config.events, sql.store.clone(), Arc::clone(&clock))
            .await?
            .map(|relay| (relay, sql.store.clone() as Arc<dyn LeaseStore>));
        let app = app::app(&config, &sql, gate, Arc::clone(&clock));
        if !config.flags_at_first_start {
            // Before the listener opens: a dark release never serves a drop route.
            app.flags().ship_dark().await?;
        }
        let state = app::api_state(&config, &app, &sql, readiness.clone(), prometheus.clone());
        let background = goods_app::Background {
            holder: holder(),
            heal_every: config.background.reconcile_interval,
            refresh_every: config.background.drop_refresh,
            changed,
            fleet: (config.gate.kind() == GateKind::Shared)
                .then(|| sql.store.clone() as Arc<dyn LeaseStore>),
            relay,
            webhooks: config.webhooks.poll.map(|every| goods_app::Delivering {
                deliverer: app::deliverer(&config, &sql, Arc::clone(&clock)),
                store: sql.store.clone() as Arc<dyn LeaseStore>,
                every,
                disable_after: config.webhooks.disable_after,
            }),
        };
        Ok(Self {
            bound: Self::serve_on(&config, listeners, state, signals)?,
            app,
            background,
            redis,
            readiness,
            prometheus,
        })
    }

    /// The servers over `state` on the listeners bound at the start.
    fn serve_on(
        config: &Config,
        listeners: Listeners,
        state: ApiState,
        signals: StopSignals,
    ) -> anyhow::Result<Bound> {
        let http = &config.http;
        if let Some(broker) = &config.events.broker {
            tracing::info!(stream = %broker.stream, "events are published to NATS JetStream");
        }
        let ops = api_actix::ops_server(listeners.ops, state.clone())?;
        let server = api_actix::server(listeners.api, state, http.workers, http.shutdown_grace)?;
        if let Auth::TrustedHeader { proxies } = &config.auth {
            let proxies: Vec<String> = proxies.iter().map(ToString::to_string).collect();
            tracing::warn!(
                proxies = %proxies.join(","),
                "AUTH_MODE=trusted-header: X-User-Id is trusted as sent by these peers only; run this behind a gateway that sets it"
            );
        }
        Ok(Bound {
            server,
            address: listeners.address,
            ops,
            ops_address: listeners.ops_address,
            shutdown_grace: http.shutdown_grace,
            signals,
        })
    }

    /// The bound address (the real port when configured with port 0).
    pub fn address(&self) -> SocketAddr {
        self.bound.address
    }

    /// The ops listener's bound address (`/metrics`, the probes).
    pub fn ops_address(&self) -> SocketAddr {
        self.bound.ops_address
    }

    /// A handle to stop the server gracefully, as SIGTERM does.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.bound.server.handle()
    }

    /// [`serve`](Self::serve), for callers that only need to know it ended.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.serve().await.map(drop)
    }

    /// Serves until SIGTERM, SIGINT or [`handle`](Self::handle)`.stop(true)`, then shuts down
    /// within `SHUTDOWN_GRACE_MS` in docs/configuration.md's order ("Shutdown"): requests
    /// answered, committers drained, loops stopped, counters flushed, the ops listener last.
    pub async fn serve(self) -> std::io::Result<Stopped> {
        let Self {
            bound:
                Bound {
                    server,
                    ops,
                    shutdown_grace,
                    signals,
                    ..
                },
            app,
            background,
            redis,
            readiness,
            prometheus,
        } = self;
        app.start_background(background);
        // Histogram samples wait in lock-free buckets until upkeep folds them in; scrapes run
        // it too, but a server nobody scrapes must not keep every sample.
        app.tasks().every(crate::metrics::UPKEEP, None, move || {
            prometheus.run_upkeep();
            std::future::ready(())
        });
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
}

/// This instance's name in the fleet's leases: unique across the fleet and its restarts.
fn holder() -> String {
    format!(
        "{}:{}:{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "goods-server".into()),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}
