//! Identifiers. Every id is a positive integer; an `IdempotencyKey` is 1-255 printable ASCII.

use crate::ValidationError;
use std::fmt;

macro_rules! positive_id {
    ($(#[$meta:meta])* $name:ident, $field:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(i64);

        impl $name {
            pub const MIN: Self = Self(1);

            /// Parses a positive integer id.
            pub fn parse(raw: i64) -> Result<Self, ValidationError> {
                if raw > 0 {
                    Ok(Self(raw))
                } else {
                    Err(ValidationError::new($field, "must be a positive integer"))
                }
            }

            pub fn get(self) -> i64 {
                self.0
            }
        }

        impl TryFrom<i64> for $name {
            type Error = ValidationError;
            fn try_from(raw: i64) -> Result<Self, Self::Error> {
                Self::parse(raw)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

positive_id!(ProductId, "productId");
positive_id!(DropId, "dropId");
positive_id!(OrderId, "orderId");
positive_id!(
    /// Identifies a seller's webhook endpoint.
    EndpointId,
    "endpointId"
);
positive_id!(
    /// Identifies a user (buyer or seller).
    UserId,
    "userId"
);

/// The client's `Idempotency-Key`: 1 to 255 printable ASCII characters (0x21-0x7E and space,
/// but not only spaces at either end, since proxies may trim them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Longest accepted key, in bytes.
    pub const MAX_LEN: usize = 255;

    /// Parses a key: 1 to 255 bytes of printable ASCII, no space at either end.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let field = "Idempotency-Key";
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(ValidationError::new(field, "must be 1 to 255 characters"));
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ValidationError::new(field, "must be printable ASCII"));
        }
        if raw.starts_with(' ') || raw.ends_with(' ') {
            return Err(ValidationError::new(
                field,
                "must not start or end with a space",
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The key of a draw's order for a buyer of `drop` (one per buyer and draw, so a second
    /// award replays the first). It starts with 0x01, which no client's key may hold.
    pub fn for_draw(drop: crate::DropId) -> Self {
        Self(format!("{SERVICE_KEY_PREFIX}draw:{drop}"))
    }

    /// A key as stored with an order: a client's, or one the service made for itself.
    pub fn stored(raw: &str) -> Result<Self, ValidationError> {
        match raw.strip_prefix(SERVICE_KEY_PREFIX) {
            Some(rest) => Self::parse(rest).map(|_| Self(raw.to_owned())),
            None => Self::parse(raw),
        }
    }

    /// Whether the service made this key for itself (no client can send one).
    pub fn is_service_key(&self) -> bool {
        self.0.starts_with(SERVICE_KEY_PREFIX)
    }

    /// The key as sent by the client.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What starts every key the service makes: outside the printable ASCII of clients' keys.
const SERVICE_KEY_PREFIX: char = '\u{1}';

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn a_draws_key_is_one_no_client_can_send() {
        let drop = crate::DropId::parse(42).unwrap();
        let key = IdempotencyKey::for_draw(drop);
        assert!(key.is_service_key());
        assert!(
            IdempotencyKey::parse(key.as_str()).is_err(),
            "refused from a client"
        );
        assert_eq!(
            IdempotencyKey::stored(key.as_str()).unwrap(),
            key,
            "read back"
        );
        for planted in ["draw-42", "draw:42", "\\u0001draw:42", "\\x01draw:42"] {
            let client = IdempotencyKey::parse(planted).unwrap();
            assert_ne!(client, key, "{planted}");
            assert!(!client.is_service_key());
        }
    }

    #[rstest]
    #[case(1, true)]
    #[case(i64::MAX, true)]
    #[case(0, false)]
    #[case(-5, false)]
    fn ids_accept_only_positive_integers(#[case] raw: i64, #[case] ok: bool) {
        assert_eq!(DropId::parse(raw).is_ok(), ok);
        assert_eq!(UserId::parse(raw).is_ok(), ok);
    }

    #[rstest]
    #[case("a", true)]
    #[case("order-2026-12-01T09:00:00Z#1", true)]
    #[case("with inner space", true)]
    #[case(&"k".repeat(255), true)]
    #[case("", false)]
    #[case(&"k".repeat(256), false)]
    #[case("tab\there", false)]
    #[case("new\nline", false)]
    #[case("ünïcode", false)]
    #[case(" leading", false)]
    #[case("trailing ", false)]
    fn idempotency_key_is_one_to_255_printable_ascii(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(IdempotencyKey::parse(raw).is_ok(), ok, "{raw:?}");
    }
}
