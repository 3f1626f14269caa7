//! The application over the chosen adapters, and the HTTP layer's state over the application.

use super::shared::GatePorts;
use super::store::SqlPorts;
use crate::config::{Auth, Config};
use adapters_memory::LogEventPublisher;
use api_actix::{ApiState, AuthMode, Readiness};
use goods_app::{GoodsApp, Ports, WriteBuffer};
use goods_domain::ports::Clock;
use secrecy::ExposeSecret as _;
use std::sync::Arc;
use std::time::Duration;

/// The application `config` describes over `sql` and the gate's ports.
pub(super) fn app(
    config: &Config,
    sql: &SqlPorts,
    gate: GatePorts,
    clock: Arc<dyn Clock>,
) -> GoodsApp {
    let (db, purchases) = (&config.database, &config.purchases);
    let vault = Arc::new(config.draw_seal.vault());
    let webhooks = goods_app::Webhooks::new(
        sql.store.clone(),
        vault.clone(),
        Arc::new(adapters_memory::SystemResolver),
        Arc::clone(&clock),
        config.webhooks.settings,
    );
    let mut ports = Ports::from_store(
        &sql.store,
        gate.gate,
        clock,
        Arc::new(LogEventPublisher),
        gate.stats,
        vault,
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
    })
    .with_seller_quota(config.abuse.seller_max_active_drops)
    .with_webhooks(webhooks)
    .with_rate_limits(goods_app::RateLimits::new(
        config.abuse.per_buyer,
        config.abuse.per_ip,
        Arc::new(adapters_memory::MemoryRateLimiter::new()),
        gate.rate,
    ));
    match gate.notifier {
        Some(notifier) => app.with_change_notifier(notifier),
        None => app,
    }
}

/// Sellers' webhook deliveries over `sql`, sent over HTTP(S) by this instance.
pub(super) fn deliverer(
    config: &Config,
    sql: &SqlPorts,
    clock: Arc<dyn Clock>,
) -> goods_app::Deliverer {
    let webhooks = &config.webhooks;
    goods_app::Deliverer::new(
        sql.store.clone(),
        Arc::new(config.draw_seal.vault()),
        Arc::new(adapters_memory::SystemResolver),
        Arc::new(adapters_http::HttpSender::new(webhooks.timeout)),
        clock,
        webhooks.settings.reach,
        webhooks.concurrency,
        Arc::new(jitter),
    )
}

/// A number in `[0, 1)` from the OS's generator, for a retry's jitter (0 if it fails: the
/// wait is then the schedule's own).
fn jitter() -> f64 {
    let mut bytes = [0_u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.0,
    }
}

/// What every request handler reads: the application, authentication, readiness, metrics.
pub(super) fn api_state(
    config: &Config,
    app: &GoodsApp,
    sql: &SqlPorts,
    readiness: Readiness,
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
) -> ApiState {
    ApiState {
        app: app.clone(),
        auth: auth(&config.auth),
        readiness,
        metrics: {
            let (app, pool) = (app.clone(), Arc::clone(&sql.pool));
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
    }
}

fn auth(auth: &Auth) -> AuthMode {
    match auth {
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
    }
}
