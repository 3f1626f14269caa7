//! Sellers' webhook endpoints (`/webhook-endpoints`): created with a fresh secret shown once,
//! read, changed, rotated and deleted by their seller alone. A URL is checked by goods-domain's
//! rules, and a host name is resolved and every address it stands for checked, at creation and
//! at each change of the URL (and again at every delivery).

mod delivery;

pub use delivery::{Deliverer, RoundReport};

use goods_domain::ports::{
    AddressResolver, Clock, CreateEndpointError, Endpoint, EndpointChange, NewEndpoint,
    RetryOutcome, SecretToSeal, SecretVault, WebhookStore,
};
use goods_domain::webhook::{
    EndpointDescription, EndpointUrl, EventTypes, ROTATION_OVERLAP, Reach, WebhookSecret,
    check_address,
};
use goods_domain::{EndpointId, InfraError, SealError, UserId, ValidationError};
use std::sync::Arc;

/// `WEBHOOK_ALLOW_HTTP`, `WEBHOOK_ALLOW_PRIVATE` and `WEBHOOK_MAX_ENDPOINTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookSettings {
    pub reach: Reach,
    pub max_endpoints: u32,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            reach: Reach::default(),
            max_endpoints: 10,
        }
    }
}

/// A page of an endpoint's deliveries, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPage {
    pub items: Vec<goods_domain::ports::Delivery>,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<i64>,
}

/// What the seller sends to create an endpoint.
#[derive(Debug, Clone, Default)]
pub struct EndpointInput {
    pub url: String,
    /// `None`: every type of a drop's events.
    pub types: Option<Vec<String>>,
    pub description: Option<String>,
}

/// What the seller sends to change one: each field given, and only those.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub types: Option<Vec<String>>,
    /// `Some(None)`: remove it.
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
}

/// Why a call on endpoints did not do what it asked.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("invalid endpoint")]
    Invalid(Vec<ValidationError>),
    /// No such endpoint, or another seller's.
    #[error("webhook endpoint not found")]
    NotFound,
    /// The endpoint has no delivery of that event.
    #[error("webhook delivery not found")]
    DeliveryNotFound,
    #[error("the seller has {limit} webhook endpoints already")]
    QuotaExceeded { limit: u32 },
    /// No seal key: secrets cannot be kept (`DRAW_SEAL_KEY`).
    #[error("webhook secrets cannot be sealed: no seal key is configured")]
    NotConfigured,
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<CreateEndpointError> for WebhookError {
    fn from(e: CreateEndpointError) -> Self {
        match e {
            CreateEndpointError::QuotaExceeded { limit } => Self::QuotaExceeded { limit },
            CreateEndpointError::NotConfigured => Self::NotConfigured,
            CreateEndpointError::Infra(e) => Self::Infra(e),
        }
    }
}

impl From<SealError> for WebhookError {
    fn from(e: SealError) -> Self {
        match e {
            SealError::NotConfigured => Self::NotConfigured,
            SealError::Infra(e) => Self::Infra(e),
        }
    }
}

/// The webhook feature's ports and settings.
#[derive(Clone)]
pub struct Webhooks {
    store: Arc<dyn WebhookStore>,
    vault: Arc<dyn SecretVault>,
    resolver: Arc<dyn AddressResolver>,
    clock: Arc<dyn Clock>,
    settings: WebhookSettings,
}

impl Webhooks {
    pub fn new(
        store: Arc<dyn WebhookStore>,
        vault: Arc<dyn SecretVault>,
        resolver: Arc<dyn AddressResolver>,
        clock: Arc<dyn Clock>,
        settings: WebhookSettings,
    ) -> Self {
        Self {
            store,
            vault,
            resolver,
            clock,
            settings,
        }
    }

    /// Creates an endpoint of `seller`'s: the endpoint and its secret, which the seller sees
    /// this once.
    #[tracing::instrument(skip_all)]
    pub async fn create(
        &self,
        seller: UserId,
        input: EndpointInput,
    ) -> Result<(Endpoint, WebhookSecret), WebhookError> {
        let mut errors = Vec::new();
        let url = self
            .checked_url(&input.url)
            .await
            .map_err(|e| errors.push(e));
        let types = match &input.types {
            None => Ok(EventTypes::all()),
            Some(names) => EventTypes::parse(names).map_err(|e| errors.push(e)),
        };
        let description = input
            .description
            .as_deref()
            .map(EndpointDescription::parse)
            .transpose()
            .map_err(|e| errors.push(e));
        let (Ok(url), Ok(types), Ok(description)) = (url, types, description) else {
            return Err(WebhookError::Invalid(errors));
        };
        let secret = self.vault.secret()?;
        let vault = Arc::clone(&self.vault);
        let sealing = secret.clone();
        let new = NewEndpoint {
            seller,
            url,
            types,
            description,
            secret: SecretToSeal::new(move |id| vault.seal_secret(id, &sealing)),
        };
        let endpoint = self
            .store
            .create_endpoint(&new, self.clock.now(), self.settings.max_endpoints)
            .await?;
        tracing::info!(endpoint.id = %endpoint.id, seller = %seller, "webhook endpoint created");
        Ok((endpoint, secret))
    }

    /// `seller`'s endpoints, oldest first.
    pub async fn list(&self, seller: UserId) -> Result<Vec<Endpoint>, WebhookError> {
        Ok(self.store.endpoints_of(seller).await?)
    }

    /// `seller`'s endpoint `id`.
    pub async fn get(&self, seller: UserId, id: EndpointId) -> Result<Endpoint, WebhookError> {
        self.store
            .endpoint_of(seller, id)
            .await?
            .ok_or(WebhookError::NotFound)
    }

    /// Changes the fields `patch` gives of `seller`'s endpoint `id`.
    #[tracing::instrument(skip_all, fields(endpoint.id = %id))]
    pub async fn update(
        &self,
        seller: UserId,
        id: EndpointId,
        patch: EndpointPatch,
    ) -> Result<Endpoint, WebhookError> {
        let mut errors = Vec::new();
        let url = match &patch.url {
            Some(raw) => self
                .checked_url(raw)
                .await
                .map(Some)
                .map_err(|e| errors.push(e)),
            None => Ok(None),
        };
        let types = match &patch.types {
            Some(names) => EventTypes::parse(names)
                .map(Some)
                .map_err(|e| errors.push(e)),
            None => Ok(None),
        };
        let description = match &patch.description {
            Some(Some(raw)) => EndpointDescription::parse(raw)
                .map(|d| Some(Some(d)))
                .map_err(|e| errors.push(e)),
            Some(None) => Ok(Some(None)),
            None => Ok(None),
        };
        let (Ok(url), Ok(types), Ok(description)) = (url, types, description) else {
            return Err(WebhookError::Invalid(errors));
        };
        let change = EndpointChange {
            url,
            types,
            description,
            enabled: patch.enabled,
        };
        self.store
            .update_endpoint(seller, id, &change)
            .await?
            .ok_or(WebhookError::NotFound)
    }

    /// A new secret for `seller`'s endpoint `id`, shown this once; the one it replaces signs
    /// beside it for [`ROTATION_OVERLAP`].
    #[tracing::instrument(skip_all, fields(endpoint.id = %id))]
    pub async fn rotate(
        &self,
        seller: UserId,
        id: EndpointId,
    ) -> Result<WebhookSecret, WebhookError> {
        // Another seller's endpoint is not found before a secret is drawn for it.
        self.get(seller, id).await?;
        let secret = self.vault.secret()?;
        let sealed = self.vault.seal_secret(id, &secret)?;
        let until = self.clock.now() + ROTATION_OVERLAP;
        if !self.store.rotate_secret(seller, id, &sealed, until).await? {
            return Err(WebhookError::NotFound);
        }
        Ok(secret)
    }

    /// Deletes `seller`'s endpoint `id`.
    #[tracing::instrument(skip_all, fields(endpoint.id = %id))]
    pub async fn delete(&self, seller: UserId, id: EndpointId) -> Result<(), WebhookError> {
        if self.store.delete_endpoint(seller, id).await? {
            Ok(())
        } else {
            Err(WebhookError::NotFound)
        }
    }

    /// Deliveries per page at most, and by default.
    pub const MAX_DELIVERIES: u32 = 100;
    pub const DEFAULT_DELIVERIES: u32 = 20;

    /// A page of `seller`'s endpoint `id`'s deliveries, newest first, `status` alone when
    /// given, before `cursor` (the `next` of an earlier page).
    pub async fn deliveries(
        &self,
        seller: UserId,
        id: EndpointId,
        status: Option<goods_domain::webhook::DeliveryStatus>,
        cursor: Option<i64>,
        limit: u32,
    ) -> Result<DeliveryPage, WebhookError> {
        let limit = limit.clamp(1, Self::MAX_DELIVERIES);
        let rows = self
            .store
            .deliveries_of(seller, id, status, cursor, limit)
            .await?
            .ok_or(WebhookError::NotFound)?;
        let next = (rows.len() == limit as usize)
            .then(|| rows.last().map(|(n, _)| *n))
            .flatten();
        Ok(DeliveryPage {
            items: rows.into_iter().map(|(_, d)| d).collect(),
            next,
        })
    }

    /// Sends the delivery of `event_id` to `seller`'s endpoint `id` again, as soon as a round
    /// comes.
    pub async fn retry(
        &self,
        seller: UserId,
        id: EndpointId,
        event_id: &str,
    ) -> Result<(), WebhookError> {
        match self
            .store
            .retry_delivery(seller, id, event_id, self.clock.now())
            .await?
        {
            RetryOutcome::Scheduled => Ok(()),
            RetryOutcome::EndpointNotFound => Err(WebhookError::NotFound),
            RetryOutcome::DeliveryNotFound => Err(WebhookError::DeliveryNotFound),
        }
    }

    /// `raw` by goods-domain's rules, its host resolved and every address checked.
    async fn checked_url(&self, raw: &str) -> Result<EndpointUrl, ValidationError> {
        let url = EndpointUrl::parse(raw, self.settings.reach)?;
        let addresses = self
            .resolver
            .resolve(url.host(), url.port())
            .await
            .map_err(|e| ValidationError::new("url", format!("does not resolve: {e}")))?;
        for address in addresses {
            check_address(address, self.settings.reach)?;
        }
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::ports::{
        MockAddressResolver, MockClock, MockSecretVault, MockWebhookStore, SealedSecret,
    };
    use std::net::IpAddr;
    use time::macros::datetime;

    const NOW: time::OffsetDateTime = datetime!(2026-12-06 12:00 UTC);

    fn seller() -> UserId {
        UserId::parse(7).unwrap()
    }

    fn resolving(addresses: &'static [&'static str]) -> MockAddressResolver {
        let mut r = MockAddressResolver::new();
        r.expect_resolve().returning(move |_, _| {
            Ok(addresses
                .iter()
                .map(|a| a.parse::<IpAddr>().unwrap())
                .collect())
        });
        r
    }

    fn vault() -> MockSecretVault {
        let mut v = MockSecretVault::new();
        v.expect_secret()
            .returning(|| Ok(WebhookSecret::from_bytes([9; 32])));
        v.expect_seal_secret().returning(|id, _| {
            Ok(SealedSecret {
                key_id: "k".into(),
                sealed: id.get().to_be_bytes().to_vec(),
            })
        });
        v
    }

    fn clock() -> MockClock {
        let mut c = MockClock::new();
        c.expect_now().return_const(NOW);
        c
    }

    fn endpoint(new: &NewEndpoint) -> Endpoint {
        let id = EndpointId::parse(3).unwrap();
        Endpoint {
            id,
            seller: new.seller,
            url: new.url.as_str().to_owned(),
            types: new.types.clone(),
            description: new.description.as_ref().map(|d| d.as_str().to_owned()),
            enabled: true,
            created_at: NOW,
            secret: new.secret.seal(id).unwrap(),
            previous_secret: None,
            failing_since: None,
        }
    }

    fn webhooks(store: MockWebhookStore, resolver: MockAddressResolver) -> Webhooks {
        Webhooks::new(
            Arc::new(store),
            Arc::new(vault()),
            Arc::new(resolver),
            Arc::new(clock()),
            WebhookSettings::default(),
        )
    }

    fn input(url: &str) -> EndpointInput {
        EndpointInput {
            url: url.into(),
            ..EndpointInput::default()
        }
    }

    #[tokio::test]
    async fn an_endpoint_is_created_with_its_secret_sealed_for_its_id_and_shown_once() {
        let mut store = MockWebhookStore::new();
        store
            .expect_create_endpoint()
            .withf(|new, at, max| {
                new.url.as_str() == "https://shop.example/h" && *at == NOW && *max == 10
            })
            .times(1)
            .returning(|new, _, _| Ok(endpoint(new)));
        let (created, secret) = webhooks(store, resolving(&["93.184.215.14"]))
            .create(seller(), input("https://shop.example/h"))
            .await
            .unwrap();
        assert_eq!(secret, WebhookSecret::from_bytes([9; 32]));
        assert_eq!(created.secret.sealed, 3_i64.to_be_bytes());
        assert_eq!(created.types, EventTypes::all());
    }

    /// A name that resolves to any refused address is refused naming `url`, whatever else it
    /// resolves to; nothing is stored.
    #[rstest::rstest]
    #[case::loopback(&["127.0.0.1"], "url: reaches a loopback address: 127.0.0.1")]
    #[case::one_of_two(&["93.184.215.14", "10.1.2.3"], "url: reaches a private address: 10.1.2.3")]
    #[case::metadata(&["169.254.169.254"], "url: reaches the instance metadata address: 169.254.169.254")]
    #[case::v6_unique_local(&["fd12::1"], "url: reaches a unique local address: fd12::1")]
    #[tokio::test]
    async fn a_host_resolving_to_a_refused_address_is_refused(
        #[case] addresses: &'static [&'static str],
        #[case] why: &str,
    ) {
        let err = webhooks(MockWebhookStore::new(), resolving(addresses))
            .create(seller(), input("https://shop.example/h"))
            .await
            .unwrap_err();
        let WebhookError::Invalid(errors) = err else {
            panic!("{err:?}")
        };
        let said: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(said, [why]);
    }

    #[tokio::test]
    async fn every_field_wrong_is_named_at_once_and_nothing_is_stored() {
        let mut resolver = MockAddressResolver::new();
        resolver
            .expect_resolve()
            .returning(|host, _| Err(InfraError::msg(format!("{host} has no address"))));
        let err = webhooks(MockWebhookStore::new(), resolver)
            .create(
                seller(),
                EndpointInput {
                    url: "https://nowhere.invalid/h".into(),
                    types: Some(vec!["goods.gate.degraded".into()]),
                    description: Some("  ".into()),
                },
            )
            .await
            .unwrap_err();
        let WebhookError::Invalid(errors) = err else {
            panic!("{err:?}")
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["url", "types", "description"]);
        assert_eq!(
            errors[0].message,
            "does not resolve: nowhere.invalid has no address"
        );
    }

    #[tokio::test]
    async fn a_new_url_is_checked_as_at_creation() {
        let err = webhooks(MockWebhookStore::new(), resolving(&["192.168.0.9"]))
            .update(
                seller(),
                EndpointId::parse(3).unwrap(),
                EndpointPatch {
                    url: Some("https://shop.example/new".into()),
                    ..EndpointPatch::default()
                },
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, WebhookError::Invalid(ref e) if e[0].field == "url"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_rotation_keeps_the_old_secret_for_24_hours() {
        let mut store = MockWebhookStore::new();
        let created = endpoint(&NewEndpoint {
            seller: seller(),
            url: EndpointUrl::parse("https://shop.example/h", Reach::default()).unwrap(),
            types: EventTypes::all(),
            description: None,
            secret: SecretToSeal::new(|_| {
                Ok(SealedSecret {
                    key_id: "k".into(),
                    sealed: vec![1],
                })
            }),
        });
        store
            .expect_endpoint_of()
            .returning(move |_, _| Ok(Some(created.clone())));
        store
            .expect_rotate_secret()
            .withf(|_, id, sealed, until| {
                id.get() == 3
                    && sealed.sealed == 3_i64.to_be_bytes()
                    && *until == NOW + time::Duration::hours(24)
            })
            .times(1)
            .returning(|_, _, _, _| Ok(true));
        let secret = webhooks(store, MockAddressResolver::new())
            .rotate(seller(), EndpointId::parse(3).unwrap())
            .await
            .unwrap();
        assert_eq!(secret, WebhookSecret::from_bytes([9; 32]));
    }

    #[tokio::test]
    async fn another_sellers_endpoint_is_not_found_and_gets_no_secret() {
        let mut store = MockWebhookStore::new();
        store.expect_endpoint_of().returning(|_, _| Ok(None));
        store.expect_delete_endpoint().returning(|_, _| Ok(false));
        let mut vault = MockSecretVault::new();
        vault.expect_secret().never();
        let webhooks = Webhooks::new(
            Arc::new(store),
            Arc::new(vault),
            Arc::new(MockAddressResolver::new()),
            Arc::new(clock()),
            WebhookSettings::default(),
        );
        let id = EndpointId::parse(3).unwrap();
        assert!(matches!(
            webhooks.rotate(seller(), id).await,
            Err(WebhookError::NotFound)
        ));
        assert!(matches!(
            webhooks.delete(seller(), id).await,
            Err(WebhookError::NotFound)
        ));
        assert!(matches!(
            webhooks.get(seller(), id).await,
            Err(WebhookError::NotFound)
        ));
    }
}
