//! Rate limits (`RATE_LIMIT_PER_BUYER`, `RATE_LIMIT_PER_IP`), whose `X-Forwarded-For` names
//! the client they count by, and the sellers' quota (`SELLER_MAX_ACTIVE_DROPS`).

use super::auth::{Auth, forwarding_proxies};
use super::{ConfigError, bad};
use goods_domain::RateLimit;
use ipnet::IpNet;

/// The token buckets' limits, and the peers trusted to name the client.
#[derive(Debug, Clone)]
pub struct Abuse {
    /// A buyer's purchases, entries and cancels (`RATE_LIMIT_PER_BUYER`, default `20/s`).
    pub per_buyer: Option<RateLimit>,
    /// Requests without an identity, per client address (`RATE_LIMIT_PER_IP`, default
    /// `200/s`).
    pub per_ip: Option<RateLimit>,
    /// Drops a seller may have not yet closed (`SELLER_MAX_ACTIVE_DROPS`, default 100).
    pub seller_max_active_drops: u32,
    /// Peers whose `X-Forwarded-For` names the client (`AUTH_TRUSTED_PROXIES`, in either
    /// identity mode); from any other peer the peer is the client.
    pub forwarders: Vec<IpNet>,
}

impl Abuse {
    pub(super) fn read(
        get: &impl Fn(&str) -> Option<String>,
        auth: &Auth,
    ) -> Result<Self, ConfigError> {
        let limit = |var: &'static str, default: &str| {
            RateLimit::parse(get(var).as_deref().unwrap_or(default)).map_err(|e| bad(var, e))
        };
        Ok(Self {
            per_buyer: limit("RATE_LIMIT_PER_BUYER", "20/s")?,
            per_ip: limit("RATE_LIMIT_PER_IP", "200/s")?,
            seller_max_active_drops: super::number(get, "SELLER_MAX_ACTIVE_DROPS", 100, 1)?,
            forwarders: forwarding_proxies(get, auth)?,
        })
    }
}
