//! Orders created by a successful purchase.

use crate::{DropId, IdempotencyKey, OrderId, ProductId, Quantity, UserId};
use time::OffsetDateTime;

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    /// Created by a purchase: the unit is the buyer's, payment is a separate flow.
    Pending,
    /// Reserved for the payment flow, which is not part of this service yet.
    Paid,
    /// Cancelled by its owner: the unit went back to the stock, the drop and the buyer.
    Cancelled,
}

impl OrderStatus {
    /// The stored and serialised name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Paid => "PAID",
            Self::Cancelled => "CANCELLED",
        }
    }

    /// Parses a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "PENDING" => Some(Self::Pending),
            "PAID" => Some(Self::Paid),
            "CANCELLED" => Some(Self::Cancelled),
            _ => None,
        }
    }

    /// Whether the order's units count against the drop, the stock and the buyer's limit.
    pub fn is_live(self) -> bool {
        !matches!(self, Self::Cancelled)
    }

    /// Whether an owner may cancel an order in this state (a cancelled order may be cancelled
    /// again, which changes nothing).
    pub fn can_cancel(self) -> bool {
        matches!(self, Self::Pending | Self::Cancelled)
    }
}

/// An order for units of a drop's product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoodsOrder {
    /// Identity.
    pub id: OrderId,
    /// The drop it was bought in.
    pub drop_id: DropId,
    /// The product bought.
    pub product_id: ProductId,
    /// The buyer.
    pub user_id: UserId,
    /// Units bought.
    pub quantity: Quantity,
    /// Life-cycle state.
    pub status: OrderStatus,
    /// The buyer's idempotency key; unique per buyer.
    pub idempotency_key: IdempotencyKey,
    /// When the purchase committed.
    pub created_at: OffsetDateTime,
}

impl GoodsOrder {
    /// Whether a request with this drop and quantity is the same request that created this
    /// order (an idempotent replay) rather than a reuse of the key for something else.
    pub fn matches_request(&self, drop_id: DropId, quantity: Quantity) -> bool {
        self.drop_id == drop_id && self.quantity == quantity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(OrderStatus::Pending)]
    #[case(OrderStatus::Paid)]
    #[case(OrderStatus::Cancelled)]
    fn order_status_round_trips_through_its_name(#[case] status: OrderStatus) {
        assert_eq!(OrderStatus::parse(status.as_str()), Some(status));
    }

    #[rstest]
    #[case(OrderStatus::Pending, true, true)]
    #[case(OrderStatus::Paid, true, false)]
    #[case(OrderStatus::Cancelled, false, true)]
    fn only_cancelled_orders_stop_counting_and_paid_ones_cannot_be_cancelled(
        #[case] status: OrderStatus,
        #[case] live: bool,
        #[case] cancellable: bool,
    ) {
        assert_eq!(status.is_live(), live);
        assert_eq!(status.can_cancel(), cancellable);
    }
}
