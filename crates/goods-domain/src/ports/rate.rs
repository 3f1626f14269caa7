//! Token buckets: who may send how many requests (see [`crate::rate`]).

use crate::InfraError;
use crate::rate::{RateDecision, RateKey, RateLimit};
use async_trait::async_trait;

/// Keeps the buckets: one per key, under `limit`.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request of `key` against its bucket under `limit`: allowed (and spent) or
    /// refused (and nothing spent).
    async fn admit(&self, key: RateKey, limit: RateLimit) -> Result<RateDecision, InfraError>;
}
