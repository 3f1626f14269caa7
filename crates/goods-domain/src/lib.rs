//! The limited-drop domain, pure (no I/O, no runtime): everything outside is a trait in
//! [`ports`], implemented by the adapters and mocked through the `mock` feature.

pub mod batch;
pub mod draw;
pub mod drop;
pub mod error;
pub mod event;
pub mod ids;
pub mod money;
mod name;
pub mod order;
pub mod payment;
pub mod ports;
pub mod product;
pub mod quantity;
pub mod rate;
pub mod variant;
pub mod webhook;

pub use draw::{
    Draw, DrawCommitment, DrawCounts, DrawSecret, DrawSeed, DrawToSeal, Entrant, EntriesRoot,
    EntriesTree, Entry, EntryRejection, EntryStatus, InclusionProof, RankKey, SealError,
    SealedSeed, SizeCutoff, SizeDraw,
};
pub use drop::{
    Closing, CreateDropError, DropInput, DropMode, DropStatus, DropTransitionError, LimitedDrop,
    MAX_WINDOW, NewLimitedDrop, OPEN_AT_MAX_AHEAD, OPEN_AT_MAX_PAST, PurchaseRejection, SaleWindow,
};
pub use error::{InfraError, ValidationError};
pub use event::{EventType, Fact, SizeSold};
pub use ids::{DropId, EndpointId, IdempotencyKey, OrderId, ProductId, UserId};
pub use money::{Currency, MAX_AMOUNT_MINOR, MAX_PRICE_MINOR, Money, Price};
pub use order::{
    CancelOrderError, CancelTransition, Expiry, GoodsOrder, OrderStatus, Payment, PaymentReference,
    PaymentWindow,
};
pub use payment::{
    PaymentDecision, PaymentEvent, PaymentEventId, PaymentEventKind, PaymentOutcome, PaymentRecord,
    PaymentTransition,
};
pub use product::{NewProduct, Product, ProductName, Stock};
pub use quantity::Quantity;
pub use rate::{RateDecision, RateKey, RateLimit};
pub use variant::{
    ProductVariant, Size, SizeCount, SizeInput, Sizes, Sku, SkuRejection, VariantInput,
    VariantLabel,
};
