//! The HTTP edge (docs/api.md, docs/openapi.yaml): handlers parse into domain types, call one
//! use case, and map its result; statuses are chosen only in `problem`.

mod auth;
mod body;
mod dto;
mod host;
mod metrics;
mod panics;
mod problem;
mod rate;
mod refusals;
mod request_id;
mod rfc3339;
mod routes;
pub mod signature;
mod timeout;

pub use auth::AuthMode;
pub use auth::hs256::install as install_jwt_crypto;
pub use metrics::{NAMES as HTTP_METRIC_NAMES, Render, describe as describe_http_metrics};
pub use routes::ops::{Probe, READY_CACHE, Readiness};

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use goods_app::GoodsApp;
use std::net::TcpListener;

/// Everything the handlers share.
#[derive(Clone)]
pub struct ApiState {
    pub app: GoodsApp,
    /// How callers are identified.
    pub auth: AuthMode,
    /// What `/health/ready` checks.
    pub readiness: Readiness,
    /// Renders `/metrics` (the recorder the binary installed).
    pub metrics: Render,
    /// The secret the payment provider signs its events with; `None`: payments are not
    /// configured and `/payments/events` answers 503.
    pub payment_secret: Option<WebhookSecret>,
    /// Peers whose `X-Forwarded-For` names the client (`AUTH_TRUSTED_PROXIES`).
    pub forwarders: std::sync::Arc<Vec<ipnet::IpNet>>,
    /// Answer `421` to a `Host` that is not a loopback name (the embedded mode: DNS
    /// rebinding).
    pub loopback_hosts_only: bool,
}

/// The payment provider's signing secret. Its `Debug` never shows it.
#[derive(Clone)]
pub struct WebhookSecret(std::sync::Arc<[u8]>);

impl WebhookSecret {
    pub fn new(secret: &[u8]) -> Self {
        Self(secret.into())
    }

    /// The secret's bytes, for the HMAC.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// Registers every route of the API contract on `cfg`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    routes::configure(cfg);
}

/// Builds the ops server (`/metrics`, `/health/*`) on its own listener, one worker, no signal
/// handling of its own: the caller stops it with the API server.
pub fn ops_server(listener: TcpListener, state: ApiState) -> std::io::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .wrap(
                actix_web::middleware::ErrorHandlers::new()
                    .default_handler(problem::framework_errors),
            )
            .configure(routes::configure_ops)
    })
    .workers(1)
    .disable_signals()
    .client_request_timeout(std::time::Duration::from_secs(5))
    .shutdown_timeout(1)
    .listen(listener)?
    .run();
    Ok(server)
}

/// Builds the HTTP server on an already bound listener (port 0 in tests). It handles no
/// signal itself: the binary stops it (`ServerHandle::stop(true)`), after which it accepts no
/// connection and gives in-flight requests up to `shutdown` to be answered.
pub fn server(
    listener: TcpListener,
    state: ApiState,
    workers: usize,
    shutdown: std::time::Duration,
) -> std::io::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .app_data(web::PayloadConfig::new(64 * 1024))
            .wrap(
                actix_web::middleware::ErrorHandlers::new()
                    .default_handler(problem::framework_errors),
            )
            .wrap(actix_web::middleware::from_fn(rate::anonymous))
            .wrap(actix_web::middleware::from_fn(host::loopback_only))
            .wrap(actix_web::middleware::from_fn(request_id::middleware))
            .configure(configure)
    })
    .workers(workers)
    .disable_signals()
    // The request head must arrive within 5 s (then 408), an idle keep-alive connection is
    // closed after 30 s, and a closing connection gets 1 s to go.
    .client_request_timeout(std::time::Duration::from_secs(5))
    .keep_alive(std::time::Duration::from_secs(30))
    .client_disconnect_timeout(std::time::Duration::from_secs(1))
    .shutdown_timeout(shutdown.as_secs().max(1))
    .listen(listener)?
    .run();
    Ok(server)
}
