//! Drops: creation, the view buyers read, the seller's operations and stats, draw drops'
//! entries and draws, and the cache of drop definitions the purchase path reads them from.

pub(crate) mod cache;
pub(crate) mod create;
pub(crate) mod draw;
pub(crate) mod operate;
pub(crate) mod stats;
pub(crate) mod view;
