//! The fleet's budget of concurrent purchase transactions (`DB_WRITE_PERMITS_GLOBAL`).

use crate::InfraError;
use async_trait::async_trait;
use std::time::Duration;

/// A permit: one purchase transaction may run in the database while it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePermit(pub String);

/// Permits shared by every instance, so the database never runs more purchase transactions at
/// once than the budget, however many instances there are. Each permit has a lease: the permit
/// of an instance that died comes back when its lease ends.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait WriteBudget: Send + Sync + 'static {
    /// Takes a permit for at most `lease`: `Some` with the permits held now (this one
    /// included), or `None` when every permit is held.
    async fn try_acquire(&self, lease: Duration) -> Result<Option<(WritePermit, u32)>, InfraError>;

    /// Gives a permit back (if the store does not answer, its lease does).
    async fn release(&self, permit: WritePermit) -> Result<(), InfraError>;
}
