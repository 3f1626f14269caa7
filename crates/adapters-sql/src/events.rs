//! How outbox events are stored: a kind and a JSON payload.

use goods_domain::ports::DomainEvent;
use goods_domain::{DropId, InfraError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Oversold {
    drop_id: i64,
    limited_quantity: u32,
    sold_quantity: u32,
}

#[derive(Serialize, Deserialize)]
struct GateDegraded {
    reason: String,
}

/// The stored `(kind, payload)` of `event`.
///
/// # Errors
/// [`InfraError`] when the payload cannot be written (it always can).
pub fn encode_event(event: &DomainEvent) -> Result<(&'static str, String), InfraError> {
    let encoded = match event {
        DomainEvent::Oversold {
            drop_id,
            limited_quantity,
            sold_quantity,
        } => (
            "oversold",
            serde_json::to_string(&Oversold {
                drop_id: drop_id.get(),
                limited_quantity: *limited_quantity,
                sold_quantity: *sold_quantity,
            }),
        ),
        DomainEvent::GateDegraded { reason } => (
            "gate_degraded",
            serde_json::to_string(&GateDegraded {
                reason: reason.clone(),
            }),
        ),
    };
    Ok((
        encoded.0,
        encoded.1.map_err(|e| InfraError::new("event payload", e))?,
    ))
}

/// The event stored as `(kind, payload)`.
///
/// # Errors
/// [`InfraError`] for an unknown kind or a payload that does not parse (corrupt data).
pub fn decode_event(kind: &str, payload: &str) -> Result<DomainEvent, InfraError> {
    let corrupt = |e: serde_json::Error| InfraError::new(format!("corrupt {kind} event"), e);
    match kind {
        "oversold" => {
            let o: Oversold = serde_json::from_str(payload).map_err(corrupt)?;
            Ok(DomainEvent::Oversold {
                drop_id: DropId::parse(o.drop_id)
                    .map_err(|e| InfraError::new("corrupt oversold event", e))?,
                limited_quantity: o.limited_quantity,
                sold_quantity: o.sold_quantity,
            })
        }
        "gate_degraded" => {
            let g: GateDegraded = serde_json::from_str(payload).map_err(corrupt)?;
            Ok(DomainEvent::GateDegraded { reason: g.reason })
        }
        other => Err(InfraError::msg(format!("unknown event kind {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reads_back_as_written() {
        let event = DomainEvent::Oversold {
            drop_id: DropId::parse(7).unwrap_or_else(|_| unreachable!()),
            limited_quantity: 10,
            sold_quantity: 11,
        };
        let (kind, payload) = encode_event(&event).unwrap_or_else(|_| unreachable!());
        assert_eq!(decode_event(kind, &payload).ok(), Some(event));
        assert!(decode_event("nope", "{}").is_err());
    }
}
