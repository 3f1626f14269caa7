//! Tables, the same on every backend (migrations differ per backend; the shapes do not).

diesel::table! {
    /// Products.
    products (id) {
        /// Identity.
        id -> BigInt,
        /// Display name.
        name -> Text,
        /// The seller who created it; 0 for products from before ownership (admins only).
        owner_id -> BigInt,
    }
}

diesel::table! {
    /// One stock row per product: the units on hand, never negative.
    stocks (product_id) {
        /// The product.
        product_id -> BigInt,
        /// Units on hand.
        quantity -> Integer,
        /// Bumped by every change.
        version -> BigInt,
    }
}

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
    /// A draw drop's draw: the seed sealed once at creation with its commitment (a trigger
    /// refuses to change either), the entry set's root, when it was drawn (the clear seed
    /// written then) and the winning cutoff, and its counts.
    drop_draws (drop_id) {
        drop_id -> BigInt,
        /// 64 hex digits, written at the reveal (draws made before sealing: at creation).
        seed -> Nullable<Text>,
        /// Hex of the nonce and the ciphertext under the key `seal_key_id`.
        sealed_seed -> Nullable<Text>,
        seal_key_id -> Nullable<Text>,
        /// SHA-256 of the seed, 64 hex digits.
        commitment -> Text,
        /// Set as the draw begins: from then on no entry commits.
        entries_closed_at -> Nullable<Timestamp>,
        /// RFC 6962 Merkle tree hash of the entrants, 64 hex digits.
        entries_root -> Nullable<Text>,
        drawn_at -> Nullable<Timestamp>,
        /// The largest winning rank key, 64 hex digits.
        cutoff -> Nullable<Text>,
        entry_count -> Integer,
        winner_count -> Integer,
        promoted_count -> Integer,
        voided_count -> Integer,
    }
}

diesel::table! {
    /// A draw drop's entries, one row per buyer.
    draw_entries (drop_id, user_id) {
        drop_id -> BigInt,
        user_id -> BigInt,
        entered_at -> Timestamp,
        /// The random token of the batch that wrote it.
        entry_token -> BigInt,
        /// 1-based rank by rank key, set by the draw.
        draw_rank -> Nullable<Integer>,
        /// HMAC-SHA256(seed, user id), 64 hex digits, set by the draw.
        rank_key -> Nullable<Text>,
        /// The order the draw or a promotion gave it.
        order_id -> Nullable<BigInt>,
        /// Its order came from a promotion off the waitlist.
        promoted -> Bool,
        promoted_at -> Nullable<Timestamp>,
        /// Why its award was refused.
        void_reason -> Nullable<Text>,
    }
}

diesel::table! {
    /// Units each buyer holds in each drop; kept `<= per_user_limit` by a conditional update.
    drop_holdings (drop_id, user_id) {
        /// The drop.
        drop_id -> BigInt,
        /// The buyer.
        user_id -> BigInt,
        /// Units in the buyer's live orders.
        quantity -> Integer,
        /// Orders the buyer placed in the drop, cancelled ones included.
        orders_placed -> Integer,
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

diesel::joinable!(stocks -> products (product_id));
diesel::allow_tables_to_appear_in_same_query!(
    products,
    stocks,
    limited_drops,
    drop_holdings,
    orders
);

diesel::table! {
    /// Durable events (the outbox), one per key.
    outbox_events (id) {
        /// Identity, and the event's id for consumers.
        id -> BigInt,
        /// What makes the event unique (`oversell:{dropId}`).
        event_key -> Text,
        /// The event's kind.
        kind -> Text,
        /// The event's fields, as `name=value` lines.
        payload -> Text,
        /// When it was recorded.
        created_at -> Timestamp,
        /// When the relay handed it over; `NULL` until then.
        published_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    /// Runtime feature flags that were set; a flag without a row is on.
    feature_flags (name) {
        /// The flag's name (`limited-drop.enabled`).
        name -> Text,
        /// Its value.
        enabled -> Bool,
        /// When it was last set (UTC).
        updated_at -> Timestamp,
        /// Who set it.
        updated_by -> BigInt,
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
