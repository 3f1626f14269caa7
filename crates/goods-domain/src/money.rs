//! Prices and amounts: whole minor units (cents, won) of one ISO 4217 currency, never floats.

use crate::{Quantity, ValidationError};
use std::fmt;

/// An ISO 4217 alphabetic code: three ASCII capital letters. `XXX` ("no currency") is the
/// default of a drop that gives no price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency([u8; 3]);

impl Currency {
    /// ISO 4217's code for "no currency involved".
    pub const NONE: Self = Self(*b"XXX");

    /// Parses a code: three capital letters A-Z.
    pub fn parse(field: &'static str, raw: &str) -> Result<Self, ValidationError> {
        match raw.as_bytes() {
            &[a, b, c] if [a, b, c].iter().all(u8::is_ascii_uppercase) => Ok(Self([a, b, c])),
            _ => Err(ValidationError::new(
                field,
                "must be an ISO 4217 code: three capital letters",
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        // Three ASCII capitals, by construction.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The largest amount anywhere: 2^53 - 1, what a JSON number carries exactly, so no client
/// ever reads a rounded amount.
pub const MAX_AMOUNT_MINOR: u64 = 9_007_199_254_740_991;

/// The highest unit price a drop may ask: 10^12 minor units.
pub const MAX_PRICE_MINOR: u64 = 1_000_000_000_000;

/// An amount of money in minor units, at most [`MAX_AMOUNT_MINOR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Money {
    minor: u64,
    currency: Currency,
}

impl Money {
    /// Parses an amount as a client or a provider sends it, 0 to [`MAX_AMOUNT_MINOR`].
    pub fn parse(
        field: &'static str,
        minor: i64,
        currency: Currency,
    ) -> Result<Self, ValidationError> {
        u64::try_from(minor)
            .ok()
            .filter(|m| *m <= MAX_AMOUNT_MINOR)
            .map(|minor| Self { minor, currency })
            .ok_or_else(|| ValidationError::new(field, "must be a whole number from 0 to 2^53 - 1"))
    }

    pub fn minor(self) -> u64 {
        self.minor
    }

    pub fn currency(self) -> Currency {
        self.currency
    }
}

/// A drop's unit price: 0 to [`MAX_PRICE_MINOR`] minor units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Price(Money);

impl Default for Price {
    /// Free, in no currency: a drop created without a price.
    fn default() -> Self {
        Self(Money {
            minor: 0,
            currency: Currency::NONE,
        })
    }
}

impl Price {
    /// Parses a unit price, 0 to [`MAX_PRICE_MINOR`].
    pub fn parse(minor: i64, currency: Currency) -> Result<Self, ValidationError> {
        u64::try_from(minor)
            .ok()
            .filter(|m| *m <= MAX_PRICE_MINOR)
            .map(|minor| Self(Money { minor, currency }))
            .ok_or_else(|| {
                ValidationError::new("priceMinor", "must be a whole number from 0 to 10^12")
            })
    }

    /// Minor units per unit.
    pub fn minor(self) -> u64 {
        self.0.minor
    }

    pub fn currency(self) -> Currency {
        self.0.currency
    }

    /// What `quantity` units cost; `None` above [`MAX_AMOUNT_MINOR`] (a drop's creation refuses
    /// a price whose per-buyer limit could get there).
    pub fn amount_for(self, quantity: Quantity) -> Option<Money> {
        self.0
            .minor
            .checked_mul(u64::from(quantity.get()))
            .filter(|m| *m <= MAX_AMOUNT_MINOR)
            .map(|minor| Money {
                minor,
                currency: self.0.currency,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("EUR", true)]
    #[case("KRW", true)]
    #[case("XXX", true)]
    #[case("eur", false)]
    #[case("EU", false)]
    #[case("EURO", false)]
    #[case("E1R", false)]
    #[case("ÉUR", false)]
    fn a_currency_is_three_capital_letters(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(Currency::parse("currency", raw).is_ok(), ok, "{raw}");
    }

    #[rstest]
    #[case(0, true)]
    #[case(1_000_000_000_000, true)]
    #[case(1_000_000_000_001, false)]
    #[case(-1, false)]
    fn a_price_is_0_to_10_to_the_12_minor_units(#[case] minor: i64, #[case] ok: bool) {
        assert_eq!(Price::parse(minor, Currency::NONE).is_ok(), ok);
    }

    #[test]
    fn an_amount_is_the_unit_price_times_the_quantity_and_never_past_2_to_the_53() {
        let eur = Currency::parse("currency", "EUR").unwrap();
        let price = Price::parse(1999, eur).unwrap();
        let three = Quantity::parse("quantity", 3).unwrap();
        assert_eq!(
            price.amount_for(three),
            Some(Money {
                minor: 5997,
                currency: eur
            })
        );
        let dear = Price::parse(1_000_000_000_000, eur).unwrap();
        assert!(
            dear.amount_for(Quantity::parse("q", 9007).unwrap())
                .is_some()
        );
        assert_eq!(dear.amount_for(Quantity::parse("q", 9008).unwrap()), None);
        assert!(Money::parse("amountMinor", 9_007_199_254_740_991, eur).is_ok());
        assert!(Money::parse("amountMinor", 9_007_199_254_740_992, eur).is_err());
        assert!(Money::parse("amountMinor", -1, eur).is_err());
    }
}
