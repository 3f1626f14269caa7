//! Health and metrics.

use crate::ApiState;
use actix_web::{HttpResponse, web};
use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;

/// A readiness check: `Ok` when the dependency answers, else why not.
pub type Probe = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// How long one readiness check answers every probe: a flood of `/health/ready` costs the
/// database at most one check per this interval.
pub const READY_CACHE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a readiness check found.
#[derive(Clone)]
struct Checked {
    database: Result<(), String>,
    gate: Option<Result<(), String>>,
}

/// What `/health/ready` checks, and its last answer (reused for [`READY_CACHE`]).
#[derive(Clone)]
pub struct Readiness {
    database: Probe,
    gate: Option<Probe>,
    gate_kind: &'static str,
    last: Arc<tokio::sync::Mutex<Option<(std::time::Instant, Checked)>>>,
    /// Set when shutdown begins: not ready, whatever the checks say.
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

impl Readiness {
    /// Checks `database` (down means not ready) and `gate`, if one is configured (down means
    /// degraded: still ready, since the database-only path serves); `gate_kind` names the gate
    /// in the report (`redis`, `memory`, `off`).
    pub fn new(database: Probe, gate: Option<Probe>, gate_kind: &'static str) -> Self {
        Self {
            database,
            gate,
            gate_kind,
            last: Arc::default(),
            stopping: Arc::default(),
        }
    }

    /// From now on `/health/ready` answers 503 `stopping`: the instance is draining, and a
    /// balancer that still probes it sends its traffic elsewhere.
    pub fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The last check if it is fresh, else a new one. Probes arriving during a check wait for
    /// it: one check at a time, whatever the rate.
    async fn check(&self) -> Checked {
        let mut last = self.last.lock().await;
        if let Some((at, checked)) = last.as_ref()
            && at.elapsed() < READY_CACHE
        {
            return checked.clone();
        }
        let database = (self.database)().await;
        let gate = match &self.gate {
            Some(probe) => Some(probe().await),
            None => None,
        };
        let checked = Checked { database, gate };
        *last = Some((std::time::Instant::now(), checked.clone()));
        checked
    }
}

/// `GET /health/live`.
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "up"}))
}

/// `GET /health/ready`: 503 when the database is down or the instance is shutting down; 200
/// `degraded` when only the gate is.
pub async fn ready(state: web::Data<ApiState>) -> HttpResponse {
    let readiness = &state.readiness;
    if readiness.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return HttpResponse::ServiceUnavailable().json(json!({
            "status": "stopping",
            "gate": { "kind": readiness.gate_kind },
        }));
    }
    let Checked { database, gate } = readiness.check().await;
    let gate_status = match &gate {
        None => "off",
        Some(Ok(())) => "up",
        Some(Err(_)) => "degraded",
    };
    let status = match (&database, &gate) {
        (Err(_), _) => "down",
        (Ok(()), Some(Err(_))) => "degraded",
        (Ok(()), _) => "up",
    };
    let body = json!({
        "status": status,
        "database": if database.is_ok() { "up" } else { "down" },
        "gate": { "kind": readiness.gate_kind, "status": gate_status },
    });
    if database.is_ok() {
        HttpResponse::Ok().json(body)
    } else {
        if let Err(reason) = &database {
            tracing::warn!(reason, "readiness: database down");
        }
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// `GET /metrics`.
pub async fn metrics(state: web::Data<ApiState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body((state.metrics)())
}
