//! Ports: what the domain needs from outside, as `Send + Sync + 'static` traits behind
//! `Arc<dyn _>`, swapped per deployment or mocked alone (`mock` feature: a `Mock*` each).

mod budget;
mod catalog;
mod changes;
mod clock;
mod draw;
mod event_log;
mod events;
mod flags;
mod gate;
mod lease;
mod ledger;
mod outbox;
mod payments;
mod rate;
mod stats;
mod webhooks;

pub use budget::{WriteBudget, WritePermit};
pub use catalog::{
    CreateDropError, DropRepository, DropUnits, OrderQuery, OrderRepository, ProductRepository,
    UnitsByStatus,
};
pub use changes::ChangeNotifier;
pub use clock::{Clock, SystemClock};
pub use draw::{DrawRepository, EnterError, Entered, NewEntry, SeedVault};
pub use event_log::{Backlog, EventBroker, EventLog, EventQuery, LoggedEvent, Publication};
pub use events::{DomainEvent, DropOperation, EventPublisher};
pub use flags::{Flag, FlagName, FlagStore};
pub use gate::{
    AdmissionGate, GateSeed, HeldOrder, Reservation, ReserveOutcome, StaleReservation,
    from_unix_ms, units_in_all, unix_ms, whole_units,
};
pub use lease::{BACKGROUND, DRAWS, EVENTS, LeaseStore, WEBHOOKS};
pub use ledger::{
    AppliedPayment, CancelOrderError, Cancelled, PaymentEventError, PlaceOrder, PlaceOrderError,
    Placed, Placement, PurchaseLedger, StaleResolution, max_orders_per_buyer,
};
pub use outbox::{EventOutbox, OutboxEntry};
pub use payments::{PaymentQuery, PaymentRepository};
pub use rate::RateLimiter;
pub use stats::{DropOutcomes, OutcomeCounts, PurchaseOutcome, StatsRecorder};
pub use webhooks::{
    AddressResolver, Attempt, CreateEndpointError, Delivery, DeliveryBacklog, DueDelivery,
    Endpoint, EndpointChange, FanOut, NewEndpoint, RetryOutcome, SealedSecret, SecretToSeal,
    SecretVault, WebhookRequest, WebhookSender, WebhookStore,
};

/// Every port a source of truth (the SQL adapters) implements at once.
pub trait SourceOfTruth:
    ProductRepository
    + DropRepository
    + OrderRepository
    + PaymentRepository
    + PurchaseLedger
    + EventOutbox
    + EventLog
    + FlagStore
    + LeaseStore
    + DrawRepository
    + WebhookStore
{
}

impl<T> SourceOfTruth for T where
    T: ProductRepository
        + DropRepository
        + OrderRepository
        + PaymentRepository
        + PurchaseLedger
        + EventOutbox
        + EventLog
        + FlagStore
        + LeaseStore
        + DrawRepository
        + WebhookStore
{
}

#[cfg(feature = "mock")]
pub use budget::MockWriteBudget;
#[cfg(feature = "mock")]
pub use catalog::{MockDropRepository, MockOrderRepository, MockProductRepository};
#[cfg(feature = "mock")]
pub use changes::MockChangeNotifier;
#[cfg(feature = "mock")]
pub use clock::MockClock;
#[cfg(feature = "mock")]
pub use draw::{MockDrawRepository, MockSeedVault};
#[cfg(feature = "mock")]
pub use event_log::{MockEventBroker, MockEventLog};
#[cfg(feature = "mock")]
pub use events::MockEventPublisher;
#[cfg(feature = "mock")]
pub use flags::MockFlagStore;
#[cfg(feature = "mock")]
pub use gate::MockAdmissionGate;
#[cfg(feature = "mock")]
pub use lease::MockLeaseStore;
#[cfg(feature = "mock")]
pub use ledger::MockPurchaseLedger;
#[cfg(feature = "mock")]
pub use outbox::MockEventOutbox;
#[cfg(feature = "mock")]
pub use payments::MockPaymentRepository;
#[cfg(feature = "mock")]
pub use rate::MockRateLimiter;
#[cfg(feature = "mock")]
pub use stats::MockStatsRecorder;
#[cfg(feature = "mock")]
pub use webhooks::{MockAddressResolver, MockSecretVault, MockWebhookSender, MockWebhookStore};
