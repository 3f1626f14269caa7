//! Leases: which instance of a fleet runs a piece of background work right now.

use crate::InfraError;
use async_trait::async_trait;
use std::time::Duration;

/// The lease of the background work (healing, reconciliation, expiry of unpaid orders).
pub const BACKGROUND: &str = "background";

/// The lease of the draws' schedule (draws, promotions), apart from the healing pass so that
/// draws run whatever the pass's period is.
pub const DRAWS: &str = "draws";

/// The lease of the events' relay to the broker: one publisher at a time across the fleet, so
/// a drop's events reach the broker in order.
pub const EVENTS: &str = "events";

/// The lease of sellers' webhooks: one instance at a time fans events out to endpoints and
/// delivers them, so an endpoint gets one request at a time.
pub const WEBHOOKS: &str = "webhooks";

/// Named leases with one holder at a time, timed by the store's own clock, so instances whose
/// clocks disagree still never hold one together.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes or renews lease `name` for `holder` until `ttl` from now (store time): `true` when
    /// `holder` holds it now. It is taken only when free (never held, or lapsed), so a holder
    /// that stops renewing (it died) loses it `ttl` after its last renewal.
    async fn try_lead(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, InfraError>;
}
