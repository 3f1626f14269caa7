//! How outbox events are stored: a kind and a JSON payload.

use goods_domain::ports::{DomainEvent, DropOperation, FlagName};
use goods_domain::{DropId, InfraError, SizeSold, Sku, UserId};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Oversold {
    drop_id: i64,
    limited_quantity: u32,
    sold_quantity: u32,
    /// A drop in sizes' oversold sizes (absent in alerts recorded before sizes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sizes: Vec<OversoldSize>,
}

#[derive(Serialize, Deserialize)]
struct OversoldSize {
    sku: String,
    limited_quantity: u32,
    sold_quantity: u32,
}

#[derive(Serialize, Deserialize)]
struct GateDegraded {
    reason: String,
}

#[derive(Serialize, Deserialize)]
struct FlagSet {
    name: String,
    enabled: bool,
    by: i64,
}

#[derive(Serialize, Deserialize)]
struct DropOperated {
    drop_id: i64,
    operation: String,
    by: i64,
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
            sizes,
        } => (
            "oversold",
            serde_json::to_string(&Oversold {
                drop_id: drop_id.get(),
                limited_quantity: *limited_quantity,
                sold_quantity: *sold_quantity,
                sizes: sizes
                    .iter()
                    .map(|size| OversoldSize {
                        sku: size.sku.as_str().to_owned(),
                        limited_quantity: size.limited,
                        sold_quantity: size.sold,
                    })
                    .collect(),
            }),
        ),
        DomainEvent::GateDegraded { reason } => (
            "gate_degraded",
            serde_json::to_string(&GateDegraded {
                reason: reason.clone(),
            }),
        ),
        DomainEvent::DropOperated {
            drop_id,
            operation,
            by,
        } => (
            "drop_operated",
            serde_json::to_string(&DropOperated {
                drop_id: drop_id.get(),
                operation: operation.as_str().to_owned(),
                by: by.get(),
            }),
        ),
        DomainEvent::FlagSet { name, enabled, by } => (
            "flag_set",
            serde_json::to_string(&FlagSet {
                name: name.as_str().to_owned(),
                enabled: *enabled,
                by: by.get(),
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
            let sizes = o
                .sizes
                .into_iter()
                .map(|size| {
                    Ok(SizeSold {
                        sku: Sku::parse("sku", &size.sku)
                            .map_err(|e| InfraError::new("corrupt oversold event", e))?,
                        limited: size.limited_quantity,
                        sold: size.sold_quantity,
                    })
                })
                .collect::<Result<_, InfraError>>()?;
            Ok(DomainEvent::Oversold {
                drop_id: DropId::parse(o.drop_id)
                    .map_err(|e| InfraError::new("corrupt oversold event", e))?,
                limited_quantity: o.limited_quantity,
                sold_quantity: o.sold_quantity,
                sizes,
            })
        }
        "gate_degraded" => {
            let g: GateDegraded = serde_json::from_str(payload).map_err(corrupt)?;
            Ok(DomainEvent::GateDegraded { reason: g.reason })
        }
        "drop_operated" => {
            let d: DropOperated = serde_json::from_str(payload).map_err(corrupt)?;
            let bad = |what: &str| InfraError::msg(format!("corrupt drop_operated event: {what}"));
            Ok(DomainEvent::DropOperated {
                drop_id: DropId::parse(d.drop_id).map_err(|_| bad("dropId"))?,
                operation: DropOperation::parse(&d.operation).ok_or_else(|| bad("operation"))?,
                by: UserId::parse(d.by).map_err(|_| bad("by"))?,
            })
        }
        "flag_set" => {
            let f: FlagSet = serde_json::from_str(payload).map_err(corrupt)?;
            let bad = |what: &str| InfraError::msg(format!("corrupt flag_set event: {what}"));
            Ok(DomainEvent::FlagSet {
                name: FlagName::parse(&f.name).ok_or_else(|| bad("name"))?,
                enabled: f.enabled,
                by: UserId::parse(f.by).map_err(|_| bad("by"))?,
            })
        }
        other => Err(InfraError::msg(format!("unknown event kind {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_back_as_written() {
        let drop_id = DropId::parse(7).unwrap_or_else(|_| unreachable!());
        let mut events = vec![
            DomainEvent::Oversold {
                drop_id,
                limited_quantity: 10,
                sold_quantity: 11,
                sizes: vec![],
            },
            DomainEvent::Oversold {
                drop_id,
                limited_quantity: 10,
                sold_quantity: 9,
                sizes: vec![SizeSold {
                    sku: Sku::parse("sku", "US-9").unwrap_or_else(|_| unreachable!()),
                    limited: 3,
                    sold: 4,
                }],
            },
            DomainEvent::GateDegraded {
                reason: "timeout".into(),
            },
        ];
        for operation in [
            DropOperation::Paused,
            DropOperation::Resumed,
            DropOperation::Closed,
        ] {
            events.push(DomainEvent::DropOperated {
                drop_id,
                operation,
                by: UserId::MIN,
            });
        }
        events.push(DomainEvent::FlagSet {
            name: FlagName::RedisGate,
            enabled: false,
            by: UserId::MIN,
        });
        for event in events {
            let (kind, payload) = encode_event(&event).unwrap_or_else(|_| unreachable!());
            assert_eq!(decode_event(kind, &payload).ok(), Some(event));
        }
        assert!(decode_event("nope", "{}").is_err());
        assert!(
            decode_event(
                "drop_operated",
                r#"{"drop_id":7,"operation":"exploded","by":1}"#
            )
            .is_err()
        );
    }
}
