//! Notices that operational state changed (a flag, a drop's pause, resume or close), so the
//! other instances of a fleet re-read it now instead of at their next poll.

use crate::InfraError;
use async_trait::async_trait;

/// Tells the fleet that flags or drops changed in the source of truth. Best effort: the notice
/// carries nothing but the fact, every instance re-reads the source of truth on receipt, and a
/// lost notice only delays the change until the instances' next poll.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait ChangeNotifier: Send + Sync + 'static {
    /// Announces a change that is already committed.
    async fn changed(&self) -> Result<(), InfraError>;
}
