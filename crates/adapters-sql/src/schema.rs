//! The tables whose rows are read through diesel's derives (`rows.rs`), the same on every
//! backend (migrations differ per backend; the shapes do not). The others are reached by SQL
//! text alone (`raw.rs`).

diesel::table! {
    /// Limited drops, with the running count of units sold.
    limited_drops (id) {
        /// Identity.
        id -> BigInt,
        /// The product on sale.
        product_id -> BigInt,
        /// Sale start (UTC).
        open_at -> Timestamp,
        /// Sale end (UTC).
        close_at -> Timestamp,
        /// Units for sale.
        limited_quantity -> Integer,
        /// Units per buyer.
        per_user_limit -> Integer,
        /// Units in live orders; kept `<= limited_quantity` by a conditional update.
        sold_quantity -> Integer,
        /// Purchases refused with DROP_PAUSED while true.
        paused -> Bool,
        /// When it was closed before `close_at` (UTC); no order commits after it.
        closed_at -> Nullable<Timestamp>,
        /// Unit price in minor units.
        price_minor -> BigInt,
        /// ISO 4217 code of the price.
        currency -> Text,
        /// `FIRST_COME` or `DRAW`.
        mode -> Text,
        /// When a draw's entries close (UTC); `NULL` for a first-come drop.
        entry_close_at -> Nullable<Timestamp>,
        /// Its orders' payment window in seconds; `NULL`: the service's default.
        payment_window_s -> Nullable<Integer>,
    }
}

diesel::table! {
    /// Orders; `(user_id, idempotency_key)` is unique.
    orders (id) {
        /// Identity.
        id -> BigInt,
        /// The drop.
        drop_id -> BigInt,
        /// The product.
        product_id -> BigInt,
        /// The buyer.
        user_id -> BigInt,
        /// Units.
        quantity -> Integer,
        /// PENDING, PAID, CANCELLED or EXPIRED.
        status -> Text,
        /// The buyer's key.
        idempotency_key -> Text,
        /// Commit time (UTC).
        created_at -> Timestamp,
        /// When it was paid (UTC).
        paid_at -> Nullable<Timestamp>,
        /// The idempotency key of the payment that paid it.
        payment_key -> Nullable<Text>,
        /// The payment provider's reference.
        payment_reference -> Nullable<Text>,
        /// What the order costs, in minor units (quantity x the drop's price at purchase).
        amount_minor -> BigInt,
        /// ISO 4217 code of the amount.
        currency -> Text,
        /// When its payment window ends (UTC); `NULL` for orders made before deadlines were
        /// stored (their window is the service's default).
        expires_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    /// The payment provider's events, each applied once, with its outcome.
    payment_events (id) {
        /// Sequence: newer events have larger ids.
        id -> BigInt,
        /// The provider's id; unique.
        event_id -> Text,
        /// `payment.succeeded` or `payment.failed`.
        kind -> Text,
        /// The order it names (which may not exist).
        order_id -> BigInt,
        /// The amount paid, in minor units.
        amount_minor -> BigInt,
        /// ISO 4217 code of the amount.
        currency -> Text,
        /// The provider's reference of the payment.
        payment_reference -> Text,
        /// What it did (`PAID`, `REFUND_REQUIRED`, ...).
        outcome -> Text,
        /// When it was applied (UTC).
        received_at -> Timestamp,
    }
}
