//! What admins and sellers run a sale with: runtime flags and a drop's reconciliation.

pub(crate) mod flags;
pub(crate) mod reconcile;
