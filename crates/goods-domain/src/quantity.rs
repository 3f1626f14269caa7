//! A positive number of units.

use crate::ValidationError;

/// A number of units in an order or a drop: at least 1 and at most `i32::MAX`, so it always
/// fits the database's INT columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Quantity(u32);

impl Quantity {
    pub const ONE: Self = Self(1);

    /// Parses a quantity, 1 to `i32::MAX`.
    pub fn parse(field: &'static str, raw: i64) -> Result<Self, ValidationError> {
        if (1..=i64::from(i32::MAX)).contains(&raw) {
            u32::try_from(raw)
                .map(Self)
                .map_err(|_| ValidationError::new(field, "out of range"))
        } else {
            Err(ValidationError::new(
                field,
                format!("must be between 1 and {}", i32::MAX),
            ))
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(1, true)]
    #[case(2_147_483_647, true)]
    #[case(0, false)]
    #[case(-1, false)]
    #[case(2_147_483_648, false)]
    fn quantity_is_between_one_and_i32_max(#[case] raw: i64, #[case] ok: bool) {
        assert_eq!(Quantity::parse("quantity", raw).is_ok(), ok);
    }
}
