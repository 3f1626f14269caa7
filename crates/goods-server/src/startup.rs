//! Wiring: configuration in, a running HTTP server out. Nothing here decides behaviour; it
//! only picks adapters.

use crate::config::{Auth, Config, Database, Gate};
use adapters_memory::{LogEventPublisher, MemoryGate, MemoryStats};
use adapters_redis::{
    RedisChanges, RedisConfig, RedisConnection, RedisGate, RedisStats, RedisWriteBudget,
};
use anyhow::Context as _;
use api_actix::{ApiState, AuthMode, Probe, Readiness};
use futures::FutureExt as _;
use goods_app::{GoodsApp, Ports, WriteBuffer};
use goods_domain::InfraError;
use goods_domain::ports::{
    AdmissionGate, BACKGROUND, Clock, DropRepository, EventOutbox, LeaseStore, OrderRepository,
    PaymentRepository, ProductRepository, PurchaseLedger, StatsRecorder, SystemClock, WriteBudget,
};
use secrecy::ExposeSecret as _;
use std::future::Future;
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
    reconcile_interval: Option<Duration>,
    drop_refresh: Duration,
    /// Woken by a change notice: the refresher runs at once instead of at its next tick.
    changed: Arc<tokio::sync::Notify>,
    /// The lease the background work runs under when the fleet shares its gate (Redis) or has
    /// none; `None` with an in-process gate, which every instance must heal itself.
    lease: Option<Arc<dyn LeaseStore>>,
}

/// The SQL ports of one store, plus its health check.
struct SqlPorts {
    products: Arc<dyn ProductRepository>,
    drops: Arc<dyn DropRepository>,
    orders: Arc<dyn OrderRepository>,
    payments: Arc<dyn PaymentRepository>,
    ledger: Arc<dyn PurchaseLedger>,
    outbox: Arc<dyn EventOutbox>,
    flags: Arc<dyn goods_domain::ports::FlagStore>,
    leases: Arc<dyn LeaseStore>,
    probe: Probe,
}

fn sql_ports<S, F>(store: S, ping: fn(S) -> F) -> SqlPorts
where
    S: goods_domain::ports::SourceOfTruth + Clone,
    F: Future<Output = Result<(), InfraError>> + Send + 'static,
{
    let probe_store = store.clone();
    let store = Arc::new(store);
    SqlPorts {
        products: store.clone(),
        drops: store.clone(),
        orders: store.clone(),
        payments: store.clone(),
        outbox: store.clone(),
        flags: store.clone(),
        leases: store.clone(),
        ledger: store,
        probe: Arc::new(move || {
            ping(probe_store.clone())
                .map(|r| r.map_err(|e| e.to_string()))
                .boxed()
        }),
    }
}

/// The gate, the outcome counters that go with it, and the gate's health check.
struct GatePorts {
    gate: Option<Arc<dyn AdmissionGate>>,
    stats: Arc<dyn StatsRecorder>,
    probe: Option<Probe>,
    kind: &'static str,
    /// Change notices between instances, when they share a Redis.
    changes: Option<RedisChanges>,
    /// The fleet's write budget, when configured (`DB_WRITE_PERMITS_GLOBAL`).
    budget: Option<Arc<dyn WriteBudget>>,
}

async fn gate_ports(config: &Config) -> anyhow::Result<GatePorts> {
    Ok(match &config.gate {
        Gate::Memory => GatePorts {
            gate: Some(Arc::new(MemoryGate::default())),
            stats: Arc::new(MemoryStats::default()),
            probe: Some(Arc::new(|| async { Ok(()) }.boxed())),
            kind: "memory",
            changes: None,
            budget: None,
        },
        Gate::Off => GatePorts {
            gate: None,
            stats: Arc::new(MemoryStats::default()),
            probe: None,
            kind: "off",
            changes: None,
            budget: None,
        },
        Gate::Redis(url) => {
            let redis = RedisConfig {
                url: url.expose_secret().to_owned(),
                prefix: config.redis_prefix.clone(),
                pool_size: 8,
                command_timeout: Duration::from_millis(500),
                tls_ca_file: config.redis_tls_ca_file.clone(),
            };
            let conn = RedisConnection::connect(&redis, Duration::from_secs(2)).await?;
            let probe_conn = conn.clone();
            GatePorts {
                gate: Some(Arc::new(RedisGate::new(conn.clone(), SOLD_OUT_FLAG_TTL))),
                stats: Arc::new(RedisStats::new(conn.clone())),
                probe: Some(Arc::new(move || {
                    let conn = probe_conn.clone();
                    async move { conn.ping().await }.boxed()
                })),
                kind: "redis",
                budget: config.write_permits_global.map(|permits| {
                    Arc::new(RedisWriteBudget::new(conn.clone(), permits)) as Arc<dyn WriteBudget>
                }),
                changes: Some(RedisChanges::new(conn)),
            }
        }
    })
}

/// How long an instance answers SOLD_OUT alone at most before asking Redis again, should a
/// restock message be lost.
const SOLD_OUT_FLAG_TTL: Duration = Duration::from_secs(2);

/// Applies the pending migrations to `database`, all of them or up to and including `to`, and
/// returns the ones applied (`goods-server migrate [--to VERSION]`).
///
/// # Errors
/// When the database cannot be opened, `to` names no migration, or a migration fails.
pub async fn migrate(
    database: &Database,
    tls: &adapters_mysql::MysqlTls,
    to: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    match database {
        Database::Sqlite(url) => adapters_sqlite::migrate_database(url, to).await,
        Database::Mysql(url) => {
            adapters_mysql::migrate_database(url.expose_secret(), to, tls).await
        }
    }
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
        let bounds = adapters_sql::Bounds {
            acquire: config.acquire_timeout,
            transaction: config.tx_timeout,
        };
        let sql = match &config.database {
            Database::Sqlite(url) => {
                let store = adapters_sqlite::Sqlite::open_with(url, config.migrate, bounds).await?;
                sql_ports(store, |s| async move { s.ping().await })
            }
            Database::Mysql(url) => {
                let store = adapters_mysql::Mysql::connect_with(
                    url.expose_secret(),
                    config.pool_size,
                    config.migrate,
                    bounds,
                    &config.database_tls,
                )
                .await?;
                sql_ports(store, |s| async move { s.ping().await })
            }
        };
        let gate = gate_ports(&config).await?;
        let gate_kind = gate.kind;
        let app = GoodsApp::new(
            Ports {
                products: sql.products,
                drops: sql.drops,
                orders: sql.orders,
                payments: sql.payments,
                ledger: match gate.budget {
                    // A permit outlives the longest a purchase transaction may take.
                    Some(budget) => Arc::new(goods_app::Budgeted::new(
                        sql.ledger,
                        budget,
                        config.write_wait,
                        config.acquire_timeout + config.tx_timeout + Duration::from_secs(2),
                    )),
                    None => sql.ledger,
                },
                gate: gate.gate,
                clock,
                events: Arc::new(LogEventPublisher),
                outbox: sql.outbox,
                stats: gate.stats,
                flags: sql.flags,
            },
            WriteBuffer::new(config.write_permits, config.write_wait),
        )
        .with_lease(config.lease)
        .with_group_commit(config.group_commit)
        .with_payment_window(config.payment_window);
        // With a shared Redis, a flag or drop change reaches the fleet by a notice at once;
        // the refresh every DROP_REFRESH_MS is the fallback when a notice is lost.
        let changed = Arc::new(tokio::sync::Notify::new());
        let app = match gate.changes {
            Some(changes) => {
                let wake = Arc::clone(&changed);
                changes.listen(move || wake.notify_one());
                app.with_change_notifier(Arc::new(changes))
            }
            None => app,
        };
        let auth = match &config.auth {
            Auth::Jwt {
                secret,
                issuer,
                audience,
            } => AuthMode::jwt(
                secret.expose_secret().as_bytes(),
                issuer.as_deref(),
                audience.as_deref(),
            ),
            Auth::TrustedHeader { proxies } => AuthMode::trusted_header(proxies.clone()),
        };
        let state = ApiState {
            app: app.clone(),
            auth,
            readiness: Readiness::new(sql.probe, gate.probe, gate.kind),
            metrics: {
                let prometheus = crate::metrics::recorder(config.reconcile_interval);
                let app = app.clone();
                Arc::new(move || {
                    app.record_gauges();
                    prometheus.run_upkeep();
                    prometheus.render()
                })
            },
            payment_secret: config
                .payment_secret
                .as_ref()
                .map(|secret| api_actix::WebhookSecret::new(secret.expose_secret().as_bytes())),
        };
        let listener = TcpListener::bind(config.bind_addr)
            .with_context(|| format!("binding {}", config.bind_addr))?;
        let address = listener.local_addr()?;
        let ops_listener = TcpListener::bind(config.ops_addr)
            .with_context(|| format!("binding OPS_BIND_ADDR {}", config.ops_addr))?;
        let ops_address = ops_listener.local_addr()?;
        // The first two log lines; scripts and tests read the chosen ports from them.
        tracing::info!("listening on {address}");
        tracing::info!("ops listening on {ops_address}");
        let ops = api_actix::ops_server(ops_listener, state.clone())?;
        let server = api_actix::server(listener, state, config.http_workers)?;
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
            reconcile_interval: config.reconcile_interval,
            drop_refresh: config.drop_refresh,
            changed,
            lease: (gate_kind != "memory").then_some(sql.leases),
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

    /// A handle to stop the server gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM/SIGINT or [`handle`](Self::handle)`.stop()`; in-flight requests
    /// finish first. Runs the reconciliation and healing pass alongside.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let leading = Arc::new(std::sync::atomic::AtomicBool::new(self.lease.is_none()));
        let keeper = self
            .reconcile_interval
            .zip(self.lease.clone())
            .map(|(period, lease)| keep_lease(lease, period, Arc::clone(&leading)));
        let reconciler = self.reconcile_interval.map(|period| {
            let app = self.app.clone();
            let leading = Arc::clone(&leading);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticker.tick().await;
                    if !leading.load(std::sync::atomic::Ordering::SeqCst) {
                        continue;
                    }
                    match app.heal_all().await {
                        Ok(report) if report != goods_app::HealReport::default() => {
                            tracing::debug!(?report, "healing pass");
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(error = %error, "healing pass failed"),
                    }
                }
            })
        });
        let refresher = {
            let app = self.app.clone();
            let period = self.drop_refresh;
            let changed = Arc::clone(&self.changed);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    // Notices that arrive during a refresh leave one permit: one more refresh.
                    tokio::select! {
                        _ = ticker.tick() => {}
                        () = changed.notified() => {}
                    }
                    if let Err(error) = app.refresh().await {
                        tracing::warn!(error = %error, "drop refresh failed; the cache keeps what it had");
                    }
                }
            })
        };
        let ops = self.ops.handle();
        let ops_task = tokio::spawn(self.ops);
        let result = self.server.await;
        ops.stop(true).await;
        let _ = ops_task.await;
        if let Some(task) = reconciler {
            task.abort();
        }
        if let Some(task) = keeper {
            task.abort();
        }
        refresher.abort();
        result
    }
}

/// Takes and renews the background lease for as long as this instance runs: every third of
/// `period`, for `period`. A leader that dies loses it at most `period` after its last renewal,
/// and another instance takes it within a third of a period after that: the background work
/// moves within two periods. Every step of that work is idempotent, so the rare overlap (a pass
/// longer than the lease) does no harm.
fn keep_lease(
    lease: Arc<dyn LeaseStore>,
    period: Duration,
    leading: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let holder = format!(
        "{}:{}:{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "goods-server".into()),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval((period / 3).max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let now = match lease.try_lead(BACKGROUND, &holder, period).await {
                Ok(held) => held,
                Err(error) => {
                    tracing::warn!(error = %error, "background lease not renewed; not leading");
                    false
                }
            };
            let was = leading.swap(now, std::sync::atomic::Ordering::SeqCst);
            if now != was {
                tracing::info!(holder = %holder, leading = now, "background lease changed hands");
            }
            metrics::gauge!(goods_app::telemetry::BACKGROUND_LEADER).set(if now {
                1.0
            } else {
                0.0
            });
        }
    })
}
