//! Key names. The `{id}` hash tag keeps a drop's keys in one cluster slot.

use goods_domain::{DropId, IdempotencyKey, UserId};

/// The keys of one drop, under a prefix (one per deployment, or per test).
#[derive(Debug, Clone)]
pub struct DropKeys {
    /// Units the gate still admits.
    pub remaining: String,
    /// Units held per buyer.
    pub held: String,
    /// Idempotency markers per (buyer, key).
    pub idem: String,
    /// Units left per size (a drop in sizes only; `remaining` is their sum).
    pub sizes: String,
    pub stats: String,
}

impl DropKeys {
    /// The keys of `drop` under `prefix`.
    pub fn new(prefix: &str, drop: DropId) -> Self {
        // A sku is a field of `sizes`, never part of a key: the service's keys stay its own.
        let base = format!("{prefix}drop:{{{drop}}}:");
        Self {
            remaining: format!("{base}remaining"),
            held: format!("{base}held"),
            idem: format!("{base}idem"),
            sizes: format!("{base}sizes"),
            stats: format!("{base}stats"),
        }
    }
}

/// The marker field of a (buyer, key) pair. The buyer id comes first and never contains `|`,
/// so two pairs never share a field whatever the key holds.
pub fn marker_field(user: UserId, key: &IdempotencyKey) -> String {
    format!("{user}|{key}")
}

/// The channel on which instances hear that a drop got units back.
pub fn restock_channel(prefix: &str) -> String {
    format!("{prefix}gate:restock")
}

/// The channel on which instances hear that a flag or a drop changed in the database.
pub fn changes_channel(prefix: &str) -> String {
    format!("{prefix}ops:changed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_drop_carries_its_hash_tag() {
        let keys = DropKeys::new("goods:", DropId::parse(42).unwrap());
        for key in [
            &keys.remaining,
            &keys.held,
            &keys.idem,
            &keys.sizes,
            &keys.stats,
        ] {
            assert!(key.starts_with("goods:drop:{42}:"), "{key}");
        }
    }
}
