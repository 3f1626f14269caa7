//! Who is calling.

use goods_domain::ports::ProductRepository;
use goods_domain::{InfraError, ProductId, UserId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Buys in drops; the default.
    Buyer,
    /// Creates products and drops, and manages its own.
    Seller,
    /// Manages every product and drop.
    Admin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    pub user_id: UserId,
    pub role: Role,
}

impl Actor {
    /// Whether the caller manages a product owned by `owner` (and its drops): its seller, or
    /// any admin. A product without an owner is managed by admins only.
    pub fn manages(&self, owner: Option<UserId>) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Seller => owner == Some(self.user_id),
            Role::Buyer => false,
        }
    }

    /// Whether the caller creates products and drops (a seller or an admin).
    pub fn sells(&self) -> bool {
        matches!(self.role, Role::Seller | Role::Admin)
    }
}

/// Whether `actor` manages `product` (its seller, or an admin); `false` when it does not
/// exist.
pub(crate) async fn manages_product(
    products: &dyn ProductRepository,
    product: ProductId,
    actor: Actor,
) -> Result<bool, InfraError> {
    if actor.role == Role::Admin {
        return Ok(true);
    }
    Ok(products
        .get(product)
        .await?
        .is_some_and(|p| actor.manages(p.owner)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn user(id: i64) -> UserId {
        UserId::parse(id).unwrap_or_else(|_| unreachable!())
    }

    #[rstest]
    #[case(Role::Seller, Some(7), true)]
    #[case(Role::Seller, Some(8), false)]
    #[case(Role::Seller, None, false)]
    #[case(Role::Admin, Some(8), true)]
    #[case(Role::Admin, None, true)]
    #[case(Role::Buyer, Some(7), false)]
    fn who_manages_a_product(#[case] role: Role, #[case] owner: Option<i64>, #[case] ok: bool) {
        let actor = Actor {
            user_id: user(7),
            role,
        };
        assert_eq!(actor.manages(owner.map(user)), ok);
    }
}
