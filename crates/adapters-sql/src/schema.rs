//! The tables whose rows are read through diesel's derives (`rows.rs`), the same on every
//! backend (migrations differ per backend; the shapes do not). The others are reached by SQL
//! text alone (`raw.rs`). Timestamps are UTC; amounts are in minor units of their `currency`
//! (ISO 4217). Columns named for what they hold are left without a comment.

diesel::table! {
    /// Limited drops, with the running count of units sold.
    limited_drops (id) {
        id -> BigInt,
        product_id -> BigInt,
        open_at -> Timestamp,
        close_at -> Timestamp,
        limited_quantity -> Integer,
        per_user_limit -> Integer,
        /// Units in live orders; kept `<= limited_quantity` by a conditional update.
        sold_quantity -> Integer,
        /// Purchases refused with DROP_PAUSED while true.
        paused -> Bool,
        /// When it was closed before `close_at` (UTC); no order commits after it.
        closed_at -> Nullable<Timestamp>,
        price_minor -> BigInt,
        currency -> Text,
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
        id -> BigInt,
        drop_id -> BigInt,
        product_id -> BigInt,
        user_id -> BigInt,
        quantity -> Integer,
        status -> Text,
        idempotency_key -> Text,
        created_at -> Timestamp,
        paid_at -> Nullable<Timestamp>,
        /// The idempotency key of the payment that paid it.
        payment_key -> Nullable<Text>,
        payment_reference -> Nullable<Text>,
        /// What the order costs, in minor units (quantity x the drop's price at purchase).
        amount_minor -> BigInt,
        currency -> Text,
        /// When its payment window ends (UTC); `NULL` for orders made before deadlines were
        /// stored (their window is the service's default).
        expires_at -> Nullable<Timestamp>,
        /// The size it bought; `NULL` for an order of a drop without sizes.
        sku -> Nullable<Text>,
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
        amount_minor -> BigInt,
        currency -> Text,
        payment_reference -> Text,
        /// What it did (`PAID`, `REFUND_REQUIRED`, ...).
        outcome -> Text,
        received_at -> Timestamp,
    }
}
