//! Request and response bodies (camelCase JSON, RFC 3339 UTC timestamps) and their conversion
//! from and into domain and use-case types.

use crate::problem::Problem;
use goods_app::{DropStats, DropView, Reconciliation};
use goods_domain::{GoodsOrder, Product};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Formats an instant as RFC 3339 in UTC.
pub fn rfc3339(at: OffsetDateTime) -> Option<String> {
    at.to_offset(UtcOffset::UTC).format(&Rfc3339).ok()
}

/// Parses a JSON body, turning every failure into 400 MALFORMED_REQUEST with serde's reason.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    serde_json::from_slice(body).map_err(|e| Problem::malformed(format!("invalid JSON body: {e}")))
}

/// `POST /products`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateProduct {
    /// Display name.
    pub name: String,
    /// Initial stock.
    pub stock_quantity: i64,
}

/// A product.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProductBody {
    product_id: i64,
    name: String,
    stock_quantity: u32,
}

impl From<Product> for ProductBody {
    fn from(p: Product) -> Self {
        Self {
            product_id: p.id.get(),
            name: p.name.as_str().to_owned(),
            stock_quantity: p.stock.quantity(),
        }
    }
}

/// `POST /limited-drops`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateDrop {
    /// Product on sale.
    pub product_id: i64,
    /// Sale start.
    #[serde(with = "time::serde::rfc3339")]
    pub open_at: OffsetDateTime,
    /// Sale end.
    #[serde(with = "time::serde::rfc3339")]
    pub close_at: OffsetDateTime,
    /// Units for sale.
    pub limited_quantity: i64,
    /// Units per buyer; 1 when absent.
    pub per_user_limit: Option<i64>,
}

/// A drop.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DropBody {
    drop_id: i64,
    product_id: i64,
    status: &'static str,
    open_at: Option<String>,
    close_at: Option<String>,
    limited_quantity: u32,
    per_user_limit: u32,
    remaining: u32,
}

impl From<DropView> for DropBody {
    fn from(v: DropView) -> Self {
        Self {
            drop_id: v.drop.id.get(),
            product_id: v.drop.product_id.get(),
            status: v.status.as_str(),
            open_at: rfc3339(v.drop.window.open_at()),
            close_at: rfc3339(v.drop.window.close_at()),
            limited_quantity: v.drop.limited_quantity.get(),
            per_user_limit: v.drop.per_user_limit.get(),
            remaining: v.remaining,
        }
    }
}

/// `POST /limited-drops/{dropId}/orders`.
#[derive(Debug, Deserialize)]
pub struct Purchase {
    /// Units.
    pub quantity: i64,
}

/// An order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderBody {
    order_id: i64,
    drop_id: i64,
    product_id: i64,
    user_id: i64,
    quantity: u32,
    status: &'static str,
    created_at: Option<String>,
}

impl From<GoodsOrder> for OrderBody {
    fn from(o: GoodsOrder) -> Self {
        Self {
            order_id: o.id.get(),
            drop_id: o.drop_id.get(),
            product_id: o.product_id.get(),
            user_id: o.user_id.get(),
            quantity: o.quantity.get(),
            status: o.status.as_str(),
            created_at: rfc3339(o.created_at),
        }
    }
}

/// A drop's stats.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsBody {
    drop_id: i64,
    success_count: u64,
    sold_out_reject_count: u64,
    too_early_reject_count: u64,
    closed_reject_count: u64,
    per_user_limit_reject_count: u64,
    throttled_count: u64,
    sold_quantity: u32,
    remaining: u32,
}

impl From<DropStats> for StatsBody {
    fn from(s: DropStats) -> Self {
        Self {
            drop_id: s.drop_id.get(),
            success_count: s.counts.success,
            sold_out_reject_count: s.counts.sold_out,
            too_early_reject_count: s.counts.too_early,
            closed_reject_count: s.counts.closed,
            per_user_limit_reject_count: s.counts.per_user_limit,
            throttled_count: s.counts.throttled,
            sold_quantity: s.sold_quantity,
            remaining: s.remaining,
        }
    }
}

/// A drop's reconciliation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationBody {
    drop_id: i64,
    limited_quantity: u32,
    sold_quantity: u32,
    gate_remaining: Option<u32>,
    drift: Option<i64>,
    oversold: bool,
    checked_at: Option<String>,
}

impl From<Reconciliation> for ReconciliationBody {
    fn from(r: Reconciliation) -> Self {
        Self {
            drop_id: r.drop_id.get(),
            limited_quantity: r.limited_quantity,
            sold_quantity: r.sold_quantity,
            gate_remaining: r.gate_remaining,
            drift: r.drift,
            oversold: r.oversold,
            checked_at: rfc3339(r.checked_at),
        }
    }
}
