//! Sellers' webhook endpoints, stored in the source of truth with their secrets sealed.

use crate::webhook::{EndpointDescription, EndpointUrl, EventTypes};
use crate::{EndpointId, InfraError, SealError, UserId};
use async_trait::async_trait;
use std::fmt;
use time::OffsetDateTime;

/// An endpoint's secret as the database keeps it: sealed under the service's seal key, bound
/// to the endpoint's id (moved to another endpoint, it does not open).
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret {
    /// Names the key that sealed it, so secrets sealed before a key rotation stay readable.
    pub key_id: String,
    /// Nonce and ciphertext with its tag.
    pub sealed: Vec<u8>,
}

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SealedSecret({}, {} bytes)",
            self.key_id,
            self.sealed.len()
        )
    }
}

/// A new endpoint's secret, sealed once the store has numbered the endpoint (the seal binds
/// its id), in the creating transaction.
#[derive(Clone)]
pub struct SecretToSeal {
    seal: std::sync::Arc<dyn Fn(EndpointId) -> Result<SealedSecret, SealError> + Send + Sync>,
}

impl SecretToSeal {
    pub fn new(
        seal: impl Fn(EndpointId) -> Result<SealedSecret, SealError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            seal: std::sync::Arc::new(seal),
        }
    }

    /// The secret sealed for `endpoint`.
    pub fn seal(&self, endpoint: EndpointId) -> Result<SealedSecret, SealError> {
        (self.seal)(endpoint)
    }
}

impl fmt::Debug for SecretToSeal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretToSeal(..)")
    }
}

/// An endpoint to create: the seller's checked fields and its secret.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub seller: UserId,
    pub url: EndpointUrl,
    pub types: EventTypes,
    pub description: Option<EndpointDescription>,
    pub secret: SecretToSeal,
}

/// A stored endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: EndpointId,
    pub seller: UserId,
    /// As checked at creation or at its last change (normalized).
    pub url: String,
    pub types: EventTypes,
    pub description: Option<String>,
    pub enabled: bool,
    pub created_at: OffsetDateTime,
    pub secret: SealedSecret,
    /// The secret before the last rotation, which signs beside the new one until
    /// `previous_until`.
    pub previous_secret: Option<(SealedSecret, OffsetDateTime)>,
    /// The first failure after the last success, while every delivery since has failed.
    pub failing_since: Option<OffsetDateTime>,
}

/// What a PATCH changes: each field given, and only those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointChange {
    pub url: Option<EndpointUrl>,
    pub types: Option<EventTypes>,
    /// `Some(None)`: the description is removed.
    pub description: Option<Option<EndpointDescription>>,
    pub enabled: Option<bool>,
}

/// What one fan-out round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FanOut {
    /// Events marked as fanned out.
    pub events: usize,
    /// Deliveries made of them.
    pub deliveries: usize,
}

/// A delivery due now: the request to make, and whom to sign it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    pub id: i64,
    pub endpoint: Endpoint,
    /// The `webhook-id`: the event's id.
    pub event_id: String,
    /// The CloudEvent JSON, byte for byte as `/admin/events` serves it.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// What an attempt came to, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub outcome: crate::webhook::AttemptOutcome,
    /// When to try again after a failure; `None`: the retries are spent, the delivery FAILED.
    pub next_attempt_at: Option<OffsetDateTime>,
}

/// A delivery as its seller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub event_id: String,
    pub event_type: String,
    pub status: crate::webhook::DeliveryStatus,
    pub attempts: u32,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub delivered_at: Option<OffsetDateTime>,
}

/// Why an endpoint was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateEndpointError {
    /// The seller has `limit` endpoints already (`WEBHOOK_MAX_ENDPOINTS`).
    #[error("the seller has {limit} webhook endpoints already")]
    QuotaExceeded { limit: u32 },
    /// No seal key: secrets cannot be kept.
    #[error("webhook secrets cannot be sealed: no seal key")]
    NotConfigured,
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Sellers' endpoints. Every read and change names the seller: another seller's endpoint is
/// not found, as a missing one.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Creates `endpoint` (enabled) at `now` unless its seller has `max_per_seller` already,
    /// counted under a lock of the seller's endpoints so that racing creations cannot pass it
    /// together.
    async fn create_endpoint(
        &self,
        endpoint: &NewEndpoint,
        now: OffsetDateTime,
        max_per_seller: u32,
    ) -> Result<Endpoint, CreateEndpointError>;

    /// `seller`'s endpoints, oldest first.
    async fn endpoints_of(&self, seller: UserId) -> Result<Vec<Endpoint>, InfraError>;

    /// `seller`'s endpoint `id`.
    async fn endpoint_of(
        &self,
        seller: UserId,
        id: EndpointId,
    ) -> Result<Option<Endpoint>, InfraError>;

    /// Applies `change` to `seller`'s endpoint `id`: the endpoint as it is now, `None` when
    /// the seller has no such endpoint. Enabling it again clears its failing time.
    async fn update_endpoint(
        &self,
        seller: UserId,
        id: EndpointId,
        change: &EndpointChange,
    ) -> Result<Option<Endpoint>, InfraError>;

    /// Makes `secret` the endpoint's, keeping the one it replaces to sign beside it until
    /// `previous_until`: `false` when the seller has no such endpoint.
    async fn rotate_secret(
        &self,
        seller: UserId,
        id: EndpointId,
        secret: &SealedSecret,
        previous_until: OffsetDateTime,
    ) -> Result<bool, InfraError>;

    /// Deletes `seller`'s endpoint `id`: `false` when there was none.
    async fn delete_endpoint(&self, seller: UserId, id: EndpointId) -> Result<bool, InfraError>;

    /// Makes the deliveries of up to `limit` events not fanned out yet, oldest first, at
    /// `now`: one for each endpoint that [`delivers`](crate::webhook::delivers) the event,
    /// PENDING and due at once; the events are marked in the same transaction, so each event
    /// is fanned out once and each delivery made once.
    async fn fan_out(&self, limit: u32, now: OffsetDateTime) -> Result<FanOut, InfraError>;

    /// Up to `limit` PENDING deliveries due at `now` to enabled endpoints but those of
    /// `except` (the ones being delivered to already), oldest first.
    async fn due_deliveries(
        &self,
        now: OffsetDateTime,
        limit: u32,
        except: &[EndpointId],
    ) -> Result<Vec<DueDelivery>, InfraError>;

    /// Records `attempt` of delivery `id` at `now`: DELIVERED on a 2xx, PENDING until
    /// `next_attempt_at`, else FAILED. The endpoint's failing time starts at its first failure
    /// after a success and ends at its next success. `false` when the delivery is no longer
    /// PENDING, and nothing is recorded: another instance recorded it (the lease passed on while
    /// this one was paused), or its endpoint was deleted.
    async fn record_attempt(
        &self,
        id: i64,
        attempt: &Attempt,
        now: OffsetDateTime,
    ) -> Result<bool, InfraError>;

    /// `seller`'s endpoint `endpoint`'s deliveries, newest first, `status` alone when given,
    /// up to `limit` before the delivery numbered `before`: `None` when the seller has no such
    /// endpoint.
    async fn deliveries_of(
        &self,
        seller: UserId,
        endpoint: EndpointId,
        status: Option<crate::webhook::DeliveryStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Option<Vec<(i64, Delivery)>>, InfraError>;

    /// Makes the delivery of event `event_id` to `seller`'s endpoint `endpoint` due again at
    /// `now`, whatever its state (a FAILED or DELIVERED one is sent again, with its attempts
    /// counted on).
    async fn retry_delivery(
        &self,
        seller: UserId,
        endpoint: EndpointId,
        event_id: &str,
        now: OffsetDateTime,
    ) -> Result<RetryOutcome, InfraError>;

    /// Disables at `now` every enabled endpoint whose deliveries have all failed for
    /// `disable_after` ([`due_to_disable`](crate::webhook::due_to_disable)): the ones it
    /// disabled.
    async fn disable_failing(
        &self,
        now: OffsetDateTime,
        disable_after: time::Duration,
    ) -> Result<Vec<EndpointId>, InfraError>;

    /// How many deliveries are PENDING, counted up to `up_to` (a count that reaches it stops
    /// there: a backlog that large is an incident already, and counting it all every few seconds
    /// would read the whole backlog), and since when the oldest of those due at `now` to an
    /// enabled endpoint has been due.
    async fn delivery_backlog(
        &self,
        now: OffsetDateTime,
        up_to: u64,
    ) -> Result<DeliveryBacklog, InfraError>;
}

/// The deliveries waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryBacklog {
    /// PENDING deliveries, at most the `up_to` asked for.
    pub pending: u64,
    /// When the delivery due the longest became due; `None` when none is due.
    pub oldest_due: Option<OffsetDateTime>,
}

/// What a manual retry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOutcome {
    Scheduled,
    /// No such endpoint, or another seller's.
    EndpointNotFound,
    /// The endpoint has no delivery of that event.
    DeliveryNotFound,
}

/// Where endpoints' secrets come from and how they are kept: drawn from the operating system's
/// CSPRNG, sealed under the service's seal key for one endpoint, opened only to sign.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait SecretVault: Send + Sync + 'static {
    /// A fresh secret; an error rather than a weak one.
    fn secret(&self) -> Result<crate::webhook::WebhookSecret, InfraError>;

    /// `secret` sealed with the current key, bound to `endpoint`.
    fn seal_secret(
        &self,
        endpoint: EndpointId,
        secret: &crate::webhook::WebhookSecret,
    ) -> Result<SealedSecret, SealError>;

    /// The secret in `sealed`, checked against `endpoint`: one sealed for another endpoint
    /// does not open.
    fn open_secret(
        &self,
        endpoint: EndpointId,
        sealed: &SealedSecret,
    ) -> Result<crate::webhook::WebhookSecret, InfraError>;
}

/// The addresses a host name stands for now (the system's resolver); a literal address is
/// itself.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait AddressResolver: Send + Sync + 'static {
    /// Every address of `host`, to connect to on `port`; an error when it has none.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<std::net::IpAddr>, InfraError>;
}

/// One webhook request, signed, to the address that was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// The endpoint's URL (its host names the TLS server and the `Host` header).
    pub url: String,
    /// Where to connect: an address of the URL's host that passed the check, and its port.
    pub address: std::net::SocketAddr,
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`: unix seconds of this attempt.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The CloudEvent JSON.
    pub body: String,
}

/// Sends webhook requests: a POST of the body as `application/json` with the three headers,
/// connected to the given address, redirects not followed, waiting at most the configured
/// time, reading at most 1 KiB of the answer.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait WebhookSender: Send + Sync + 'static {
    async fn send(&self, request: &WebhookRequest) -> crate::webhook::AttemptOutcome;
}
