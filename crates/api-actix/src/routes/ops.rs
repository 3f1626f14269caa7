//! Health and metrics.

use crate::ApiState;
use actix_web::{HttpResponse, web};
use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;

/// A readiness check: `Ok` when the dependency answers, else why not.
pub type Probe = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What `/health/ready` checks.
#[derive(Clone)]
pub struct Readiness {
    /// The source of truth; down means not ready.
    pub database: Probe,
    /// The admission gate, if one is configured; down means degraded (still ready, since the
    /// database-only path serves).
    pub gate: Option<Probe>,
    /// The gate's name for the report (`redis`, `memory`, `off`).
    pub gate_kind: &'static str,
}

/// `GET /health/live`.
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "up"}))
}

/// `GET /health/ready`: 503 when the database is down; 200 `degraded` when only the gate is.
pub async fn ready(state: web::Data<ApiState>) -> HttpResponse {
    let readiness = &state.readiness;
    let database = (readiness.database)().await;
    let gate = match &readiness.gate {
        Some(probe) => Some(probe().await),
        None => None,
    };
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
