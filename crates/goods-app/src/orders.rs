//! An order after its purchase: reading it, cancelling it, paying it (by the provider's
//! verified events), its expiry, and the buyer's listing.

pub(crate) mod cancel;
pub(crate) mod lifecycle;
pub(crate) mod payments;
pub(crate) mod view;
