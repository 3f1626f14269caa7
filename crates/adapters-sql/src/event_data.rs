//! The CloudEvents `data` of each fact, as JSON: the order or drop as the API shows it (the same
//! members, camelCase, RFC 3339 in UTC), plus what the type adds. An end-to-end test compares an
//! order's event data with `GET /orders/{id}`, so the two cannot drift apart.

use goods_domain::{Fact, GoodsOrder, LimitedDrop, PaymentEvent};
use serde_json::{Map, Value, json};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

fn instant(at: OffsetDateTime) -> Value {
    at.checked_to_offset(UtcOffset::UTC)
        .and_then(|utc| utc.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

fn order(o: &GoodsOrder) -> Map<String, Value> {
    let mut view = Map::new();
    view.insert("orderId".into(), json!(o.id.get()));
    view.insert("dropId".into(), json!(o.drop_id.get()));
    view.insert("productId".into(), json!(o.product_id.get()));
    view.insert("userId".into(), json!(o.user_id.get()));
    if let Some(sku) = &o.sku {
        view.insert("sku".into(), json!(sku.as_str()));
    }
    view.insert("quantity".into(), json!(o.quantity.get()));
    view.insert("amountMinor".into(), json!(o.amount.minor()));
    view.insert("currency".into(), json!(o.amount.currency().as_str()));
    view.insert("status".into(), json!(o.status.as_str()));
    view.insert("createdAt".into(), instant(o.created_at));
    if let Some(deadline) = o.deadline {
        view.insert("expiresAt".into(), instant(deadline));
    }
    if let Some(payment) = &o.payment {
        view.insert("paidAt".into(), instant(payment.at));
        view.insert("paymentReference".into(), json!(payment.reference.as_str()));
    }
    view
}

fn drop(d: &LimitedDrop) -> Map<String, Value> {
    let mut view = Map::new();
    view.insert("dropId".into(), json!(d.id.get()));
    view.insert("productId".into(), json!(d.product_id.get()));
    view.insert("openAt".into(), instant(d.window.open_at()));
    view.insert("closeAt".into(), instant(d.ends_at()));
    view.insert("limitedQuantity".into(), json!(d.limited_quantity.get()));
    view.insert("perUserLimit".into(), json!(d.per_user_limit.get()));
    view.insert("priceMinor".into(), json!(d.price.minor()));
    view.insert("currency".into(), json!(d.price.currency().as_str()));
    view.insert("mode".into(), json!(d.mode.as_str()));
    if let Some(window) = d.payment_window {
        view.insert("paymentWindowSeconds".into(), json!(window.as_seconds()));
    }
    if d.sizes.is_sized() {
        let sizes: Vec<Value> = d
            .sizes
            .iter()
            .map(|size| {
                json!({
                    "sku": size.sku.as_ref().map(|s| s.as_str()),
                    "limitedQuantity": size.limited.get(),
                })
            })
            .collect();
        view.insert("variants".into(), Value::Array(sizes));
    }
    view
}

/// The payment that came for an order and was not applied to it.
fn refused(mut view: Map<String, Value>, p: &PaymentEvent) -> Map<String, Value> {
    view.insert(
        "payment".into(),
        json!({
            "eventId": p.id.as_str(),
            "amountMinor": p.amount.minor(),
            "currency": p.amount.currency().as_str(),
            "paymentReference": p.reference.as_str(),
        }),
    );
    view
}

/// The fact's `data`, as JSON text.
pub fn render(fact: &Fact) -> String {
    let data = match fact {
        Fact::DropCreated(d) | Fact::DropClosed(d) => drop(d),
        Fact::DropSoldOut { drop, limited } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("limitedQuantity".into(), json!(limited));
            view.insert("remaining".into(), json!(0));
            view
        }
        Fact::VariantSoldOut { drop, sku, limited } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("sku".into(), json!(sku.as_str()));
            view.insert("limitedQuantity".into(), json!(limited));
            view.insert("remaining".into(), json!(0));
            view
        }
        Fact::OrderPlaced(o)
        | Fact::OrderPaid(o)
        | Fact::OrderCancelled(o)
        | Fact::OrderExpired(o) => order(o),
        Fact::RefundRequired { order: o, payment } | Fact::AmountMismatch { order: o, payment } => {
            refused(order(o), payment)
        }
        Fact::DrawCompleted {
            drop,
            seed,
            cutoff,
            size_cutoffs,
            root,
            entries,
            winners,
        } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("drawSeed".into(), json!(seed.to_hex()));
            if let Some(cutoff) = cutoff {
                view.insert("winningRankCutoff".into(), json!(cutoff.to_hex()));
            }
            if !size_cutoffs.is_empty() {
                // As the drop view: the sizes somebody won, each with its own cutoff.
                let cutoffs: Map<String, Value> = size_cutoffs
                    .iter()
                    .filter_map(|(sku, cutoff)| {
                        cutoff.map(|c| (sku.as_str().to_owned(), json!(c.to_hex())))
                    })
                    .collect();
                view.insert("winningRankCutoffs".into(), Value::Object(cutoffs));
            }
            if let Some(root) = root {
                view.insert("entriesRoot".into(), json!(root.to_hex()));
            }
            view.insert("entryCount".into(), json!(entries));
            view.insert("winnerCount".into(), json!(winners));
            view
        }
        Fact::EntryWon {
            drop,
            user,
            sku,
            order,
            promoted,
        } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("userId".into(), json!(user.get()));
            if let Some(sku) = sku {
                view.insert("sku".into(), json!(sku.as_str()));
            }
            view.insert("status".into(), json!("WON"));
            view.insert("orderId".into(), json!(order.get()));
            view.insert("promoted".into(), json!(promoted));
            view
        }
        Fact::EntryVoided {
            drop,
            user,
            sku,
            reason,
        } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("userId".into(), json!(user.get()));
            if let Some(sku) = sku {
                view.insert("sku".into(), json!(sku.as_str()));
            }
            view.insert("status".into(), json!("VOID"));
            view.insert("reason".into(), json!(reason));
            view
        }
        Fact::DropOversold {
            drop,
            limited,
            sold,
            sizes,
        } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("limitedQuantity".into(), json!(limited));
            view.insert("soldQuantity".into(), json!(sold));
            if !sizes.is_empty() {
                let sizes: Vec<_> = sizes
                    .iter()
                    .map(|size| {
                        json!({
                            "sku": size.sku.as_str(),
                            "limitedQuantity": size.limited,
                            "soldQuantity": size.sold,
                        })
                    })
                    .collect();
                view.insert("variants".into(), json!(sizes));
            }
            view.insert("severity".into(), json!("critical"));
            view.insert("source".into(), json!("oversell"));
            view
        }
        Fact::GateDegraded { drop } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("severity".into(), json!("warning"));
            view.insert("source".into(), json!("redis-degraded"));
            view
        }
        Fact::GateRecovered { drop } => {
            let mut view = Map::new();
            view.insert("dropId".into(), json!(drop.get()));
            view.insert("severity".into(), json!("info"));
            view.insert("source".into(), json!("redis-degraded"));
            view
        }
    };
    Value::Object(data).to_string()
}
