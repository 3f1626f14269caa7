//! The record of payment events, read side.

use crate::{InfraError, PaymentOutcome, PaymentRecord};
use async_trait::async_trait;

/// Which recorded payment events to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentQuery {
    /// Only events with this outcome.
    pub outcome: Option<PaymentOutcome>,
    /// Only events older than this sequence number (the cursor of the previous page).
    pub before: Option<i64>,
    pub limit: u32,
}

/// Recorded payment events, for the admins who settle refunds and mismatches.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait PaymentRepository: Send + Sync + 'static {
    /// A page of recorded events, newest first.
    async fn list_payments(&self, query: &PaymentQuery) -> Result<Vec<PaymentRecord>, InfraError>;
}
