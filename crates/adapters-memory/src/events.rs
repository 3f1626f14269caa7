//! Domain events as structured log lines (the alerting pipeline reads them).

use async_trait::async_trait;
use goods_domain::InfraError;
use goods_domain::ports::{DomainEvent, EventPublisher};

/// Publishes domain events to the log: oversell at error level with `source=oversell`,
/// `severity=critical`; gate degradation at warn level.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogEventPublisher;

#[async_trait]
impl EventPublisher for LogEventPublisher {
    async fn publish(&self, event: DomainEvent) -> Result<(), InfraError> {
        match event {
            DomainEvent::Oversold {
                drop_id,
                limited_quantity,
                sold_quantity,
                sizes,
            } => tracing::error!(
                source = "oversell",
                severity = "critical",
                drop.id = %drop_id,
                limited_quantity,
                sold_quantity,
                skus = %sizes
                    .iter()
                    .map(|size| size.sku.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                "LimitedDropOversold"
            ),
            DomainEvent::GateDegraded { reason } => {
                tracing::warn!(severity = "warning", reason, "gate_degraded");
            }
            DomainEvent::DropOperated {
                drop_id,
                operation,
                by,
            } => {
                tracing::info!(
                    severity = "info",
                    drop.id = %drop_id,
                    operation = operation.as_str(),
                    by = %by,
                    "drop_operated"
                );
            }
            DomainEvent::FlagSet { name, enabled, by } => {
                tracing::info!(
                    severity = "info",
                    flag = name.as_str(),
                    enabled,
                    by = %by,
                    "flag_set"
                );
            }
        }
        Ok(())
    }
}
