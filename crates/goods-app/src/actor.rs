//! Who is calling.

use goods_domain::UserId;

/// A caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Buys in drops; the default.
    Buyer,
    /// Creates products and drops, reads stats.
    Seller,
}

/// An authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    /// The caller's user id.
    pub user_id: UserId,
    /// The caller's role.
    pub role: Role,
}
