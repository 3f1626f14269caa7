//! Products and their stock.

use crate::name::name_problem;
use crate::variant::{ProductVariant, VariantInput, parse_variants};
use crate::{ProductId, UserId, ValidationError};

/// A product name: 1 to 200 characters after trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductName(String);

impl ProductName {
    /// Parses a product name.
    ///
    /// # Errors
    /// Empty or over 200 characters trimmed, or a control, bidi (U+202A-E, U+2066-9: text
    /// that shows other than it reads), line or paragraph separator character.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let trimmed = raw.trim();
        match name_problem(trimmed, 200) {
            None => Ok(Self(trimmed.to_owned())),
            Some(message) => Err(ValidationError::new("name", message)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A product's stock. `quantity` never goes below zero; `version` grows with every change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stock {
    quantity: u32,
    version: i64,
}

impl Stock {
    pub fn new(quantity: u32, version: i64) -> Self {
        Self { quantity, version }
    }

    pub fn quantity(self) -> u32 {
        self.quantity
    }

    /// Optimistic version, bumped by every change.
    pub fn version(self) -> i64 {
        self.version
    }

    /// Whether `units` can be taken.
    pub fn covers(self, units: u32) -> bool {
        self.quantity >= units
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Product {
    pub id: ProductId,
    pub name: ProductName,
    /// Its units on hand: the sum of its variants' when it has variants.
    pub stock: Stock,
    /// Its variants (sizes), in the order its seller listed them; empty without variants.
    pub variants: Vec<ProductVariant>,
    /// The seller who created it; `None` for a product created before products had owners
    /// (managed by admins only, see docs/migrations.md).
    pub owner: Option<UserId>,
}

/// A product to create: a name and an initial stock (zero allowed), kept per variant when it
/// is sold in variants (sizes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProduct {
    pub name: ProductName,
    /// Initial units on hand: the sum of its variants' when it has variants.
    pub stock_quantity: u32,
    /// Its variants, each with its own stock; empty for a product without variants.
    pub variants: Vec<ProductVariant>,
    /// The seller creating it; `None` leaves it to admins.
    pub owner: Option<UserId>,
}

impl NewProduct {
    /// A product without variants: [`NewProduct::from_input`] with `stock_quantity` alone.
    ///
    /// # Errors
    /// Every failing field.
    pub fn parse(name: &str, stock_quantity: i64) -> Result<Self, Vec<ValidationError>> {
        Self::from_input(name, Some(stock_quantity), None)
    }

    /// Parses the creation input, collecting every failing field: a name, and either
    /// `stockQuantity` or `variants` ([`parse_variants`]), not both.
    ///
    /// # Errors
    /// Every failing field.
    pub fn from_input(
        name: &str,
        stock_quantity: Option<i64>,
        variants: Option<&[VariantInput]>,
    ) -> Result<Self, Vec<ValidationError>> {
        let name = ProductName::parse(name).map_err(|e| vec![e]);
        let stock = match (stock_quantity, variants) {
            (Some(stock), None) => u32::try_from(stock)
                .ok()
                .filter(|q| i32::try_from(*q).is_ok())
                .map(|stock| (stock, Vec::new()))
                .ok_or_else(|| {
                    vec![ValidationError::new(
                        "stockQuantity",
                        format!("must be between 0 and {}", i32::MAX),
                    )]
                }),
            (None, Some(inputs)) => parse_variants(inputs).map(|variants| {
                let sum = variants.iter().map(|v| v.stock).sum();
                (sum, variants)
            }),
            (Some(_), Some(_)) => Err(vec![ValidationError::new(
                "variants",
                "is given instead of stockQuantity, not with it",
            )]),
            (None, None) => Err(vec![ValidationError::new(
                "stockQuantity",
                "is required (or variants, for a product sold in variants)",
            )]),
        };
        match (name, stock) {
            (Ok(name), Ok((stock_quantity, variants))) => Ok(Self {
                name,
                stock_quantity,
                variants,
                owner: None,
            }),
            (name, stock) => Err([name.err(), stock.err()]
                .into_iter()
                .flatten()
                .flatten()
                .collect()),
        }
    }

    /// The same product, owned by `seller`.
    #[must_use]
    pub fn owned_by(self, seller: UserId) -> Self {
        Self {
            owner: Some(seller),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("Sneaker", 0, true)]
    #[case("  Sneaker  ", 100, true)]
    #[case("", 1, false)]
    #[case("   ", 1, false)]
    #[case("Sneaker", -1, false)]
    #[case("Sneaker", 2_147_483_648, false)]
    fn new_product_needs_a_name_and_a_non_negative_stock(
        #[case] name: &str,
        #[case] stock: i64,
        #[case] ok: bool,
    ) {
        assert_eq!(NewProduct::parse(name, stock).is_ok(), ok);
    }

    #[rstest]
    #[case::right_to_left_override("Sneaker \u{202E}gpj.exe")]
    #[case::left_to_right_isolate("\u{2066}Sneaker")]
    #[case::pop_directional_formatting("Sneaker\u{202C}")]
    #[case::a_newline("Snea\nker")]
    #[case::an_escape("Sneaker \u{1B}[31m")]
    #[case::a_c1_control("Sneaker\u{85}x")]
    #[case::a_line_separator("Sneaker\u{2028}x")]
    fn a_name_with_control_or_bidirectional_formatting_is_refused(#[case] name: &str) {
        let error = ProductName::parse(name).unwrap_err();
        assert_eq!(error.field, "name");
        assert!(error.message.contains("U+"), "{}", error.message);
    }

    #[rstest]
    #[case("Air Max 90 \u{2014} \u{00E9}dition limit\u{00E9}e")]
    #[case("\u{C2A4}\u{B2C8}\u{CEE4}\u{C988} \u{D55C}\u{C815}\u{D310}")]
    #[case("\u{05E0}\u{05E2}\u{05DC} \u{0627}\u{0644}\u{062D}\u{0630}\u{0627}\u{0621}")]
    fn names_in_any_script_are_kept(#[case] name: &str) {
        assert_eq!(ProductName::parse(name).unwrap().as_str(), name);
    }

    #[test]
    fn new_product_reports_every_failing_field() {
        let errors = NewProduct::parse("", -1).unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["name", "stockQuantity"]);
    }

    fn variant(sku: &str, stock: i64) -> VariantInput {
        VariantInput {
            sku: sku.to_owned(),
            label: sku.to_owned(),
            stock_quantity: stock,
        }
    }

    #[test]
    fn a_product_in_variants_keeps_each_stock_and_their_sum() {
        let product =
            NewProduct::from_input("Sneaker", None, Some(&[variant("A", 3), variant("B", 4)]))
                .unwrap();
        let stocks: Vec<_> = product
            .variants
            .iter()
            .map(|v| (v.sku.as_str(), v.stock))
            .collect();
        assert_eq!(stocks, [("A", 3), ("B", 4)]);
        assert_eq!(product.stock_quantity, 7);
    }

    #[rstest]
    #[case::both(Some(1), Some(vec![variant("A", 1)]), "variants: is given instead of stockQuantity, not with it")]
    #[case::neither(
        None,
        None,
        "stockQuantity: is required (or variants, for a product sold in variants)"
    )]
    #[case::a_bad_variant(None, Some(vec![variant("A", -1)]), "variants: [0].stockQuantity: must be between 0 and 2147483647")]
    fn a_product_takes_stock_quantity_or_variants(
        #[case] stock: Option<i64>,
        #[case] variants: Option<Vec<VariantInput>>,
        #[case] expected: &str,
    ) {
        let errors = NewProduct::from_input("Sneaker", stock, variants.as_deref()).unwrap_err();
        let read: Vec<_> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(read, [expected]);
    }

    #[test]
    fn stock_covers_only_what_it_holds() {
        let stock = Stock::new(3, 0);
        assert!(stock.covers(3));
        assert!(!stock.covers(4));
    }
}
