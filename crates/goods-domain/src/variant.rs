//! Sizes (variants): a product sold in sizes (or colours, or seat tiers), each with its own
//! stock, and a drop that sells some of them, each with its own limited quantity, a buyer's
//! limit counting across them.
//!
//! A product or drop without sizes is the case of one size without a sku ([`Sizes::whole`]):
//! every rule reads it as it reads a sized one, so there is one path for both.

use crate::batch::FreeUnits;
use crate::name::name_problem;
use crate::{Quantity, ValidationError};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// The most variants a product has (and so the most sizes a drop sells).
pub const MAX_VARIANTS: usize = 100;

/// The longest label, in characters.
const MAX_LABEL: usize = 64;

/// A variant's stock-keeping unit: 1 to 64 characters of `[A-Za-z0-9._-]`, unique within its
/// product. It names the size in purchases, views, events and gate keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sku(Arc<str>);

impl Sku {
    /// Parses a sku for `field`.
    ///
    /// # Errors
    /// Empty, over 64 bytes, or a character outside `[A-Za-z0-9._-]`.
    pub fn parse(field: &'static str, raw: &str) -> Result<Self, ValidationError> {
        sku_problem(raw).map_or_else(
            || Ok(Self(raw.into())),
            |m| Err(ValidationError::new(field, m)),
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sku {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn sku_problem(raw: &str) -> Option<&'static str> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if (1..=64).contains(&raw.len()) && raw.bytes().all(allowed) {
        None
    } else {
        Some("must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
    }
}

/// A variant's name for buyers ("US 9", "Row A"): 1 to 64 characters after trimming, under
/// the rules of product names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantLabel(String);

impl VariantLabel {
    /// Parses a label for `field`.
    ///
    /// # Errors
    /// As [`crate::ProductName::parse`], with at most 64 characters.
    pub fn parse(field: &'static str, raw: &str) -> Result<Self, ValidationError> {
        let trimmed = raw.trim();
        match name_problem(trimmed, MAX_LABEL) {
            None => Ok(Self(trimmed.to_owned())),
            Some(message) => Err(ValidationError::new(field, message)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One variant of a product: its sku, its label and its units on hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductVariant {
    pub sku: Sku,
    pub label: VariantLabel,
    /// Units on hand, never below zero.
    pub stock: u32,
}

/// A product's variant as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantInput {
    pub sku: String,
    pub label: String,
    pub stock_quantity: i64,
}

/// A drop's size as a client sends it: one of the product's skus and its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeInput {
    pub sku: String,
    pub limited_quantity: i64,
}

/// Why a list of variants or sizes is refused: `variants`, each problem with the index of
/// its item (`[2].sku: ...`), as the API names them.
fn item_error(index: usize, field: &str, message: impl fmt::Display) -> ValidationError {
    ValidationError::new("variants", format!("[{index}].{field}: {message}"))
}

/// The skus of a list's items, in order, each parsed and refused when an earlier item has it.
fn unique_skus<'a>(raws: impl Iterator<Item = &'a str>) -> Vec<Result<Sku, ValidationError>> {
    let mut seen = BTreeSet::new();
    raws.enumerate()
        .map(|(index, raw)| match sku_problem(raw) {
            Some(m) => Err(item_error(index, "sku", m)),
            None if !seen.insert(raw) => Err(item_error(index, "sku", "repeats an earlier item's")),
            None => Ok(Sku(raw.into())),
        })
        .collect()
}

/// The count rule both lists share: 1 to [`MAX_VARIANTS`] items.
fn count_problem(len: usize) -> Option<ValidationError> {
    (!(1..=MAX_VARIANTS).contains(&len)).then(|| {
        ValidationError::new(
            "variants",
            format!("must hold 1 to {MAX_VARIANTS} items, not {len}"),
        )
    })
}

/// Parses a product's variants: 1 to [`MAX_VARIANTS`], skus unique, each stock 0 to
/// `i32::MAX`, and their sum (the product's stock) within `i32::MAX` too.
///
/// # Errors
/// Every failing item, each named by its index.
pub fn parse_variants(
    inputs: &[VariantInput],
) -> Result<Vec<ProductVariant>, Vec<ValidationError>> {
    let mut errors: Vec<ValidationError> = count_problem(inputs.len()).into_iter().collect();
    let skus = unique_skus(inputs.iter().map(|input| input.sku.as_str()));
    let mut variants = Vec::with_capacity(inputs.len());
    for ((index, input), sku) in inputs.iter().enumerate().zip(skus) {
        let label = VariantLabel::parse("label", &input.label)
            .map_err(|e| item_error(index, "label", e.message));
        let stock = u32::try_from(input.stock_quantity)
            .ok()
            .filter(|q| i32::try_from(*q).is_ok())
            .ok_or_else(|| {
                item_error(
                    index,
                    "stockQuantity",
                    format_args!("must be between 0 and {}", i32::MAX),
                )
            });
        match (sku, label, stock) {
            (Ok(sku), Ok(label), Ok(stock)) => variants.push(ProductVariant { sku, label, stock }),
            (sku, label, stock) => {
                errors.extend([sku.err(), label.err(), stock.err()].into_iter().flatten())
            }
        }
    }
    if errors.is_empty() && total(variants.iter().map(|v| v.stock)).is_none() {
        errors.push(ValidationError::new(
            "variants",
            format!("stockQuantity must not sum to more than {}", i32::MAX),
        ));
    }
    if errors.is_empty() {
        Ok(variants)
    } else {
        Err(errors)
    }
}

/// The sum of `units`, if it fits the database's INT columns.
fn total(units: impl IntoIterator<Item = u32>) -> Option<u32> {
    units
        .into_iter()
        .try_fold(0u32, u32::checked_add)
        .filter(|sum| i32::try_from(*sum).is_ok())
}

/// One size of a drop: the variant it sells (`None`: the drop has no sizes, and this is all
/// of it) and the units it sells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub sku: Option<Sku>,
    pub limited: Quantity,
    /// The variant's label, once the drop is stored (the product's, read with the drop).
    pub label: Option<VariantLabel>,
}

/// A drop's sizes, in the order its seller listed them: one without a sku for a drop without
/// sizes, else one per variant it sells. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(Arc<[Size]>);

/// Why a purchase's (or an entry's) `sku` does not name one of the drop's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SkuRejection {
    /// The drop has sizes and the request named none (422 naming `sku`).
    #[error("sku is required: the drop sells sizes")]
    Missing,
    /// The drop has sizes and none of them is the one named (422 naming `sku`).
    #[error("sku is not one of the drop's sizes")]
    Unknown,
    /// The drop has no sizes and the request named one (400: a field it does not know).
    #[error("the drop has no sizes: sku is not a field of its purchases")]
    Unsized,
}

impl Sizes {
    /// A drop without sizes: one size of `limited` units.
    pub fn whole(limited: Quantity) -> Self {
        Self(Arc::new([Size {
            sku: None,
            limited,
            label: None,
        }]))
    }

    /// Sizes as they are stored. A stored drop was parsed when created, so this only rebuilds
    /// it; an empty list is the store's fault.
    ///
    /// # Errors
    /// No size at all.
    pub fn from_stored(sizes: Vec<Size>) -> Result<Self, crate::InfraError> {
        if sizes.is_empty() {
            Err(crate::InfraError::msg("a drop without any size"))
        } else {
            Ok(Self(sizes.into()))
        }
    }

    /// The sizes with the labels of the product's `variants` (a size whose variant is not
    /// among them keeps none).
    #[must_use]
    pub fn with_labels(&self, variants: &[ProductVariant]) -> Self {
        Self(
            self.0
                .iter()
                .map(|size| Size {
                    label: variants
                        .iter()
                        .find(|v| size.sku.as_ref() == Some(&v.sku))
                        .map(|v| v.label.clone()),
                    ..size.clone()
                })
                .collect(),
        )
    }

    /// Each size's count: its limit, its units `sold` and the `gate`'s counter for it (a size
    /// missing from `sold` sold nothing; from `gate`, has no counter there).
    pub fn counts(&self, sold: &FreeUnits, gate: Option<&FreeUnits>) -> Vec<SizeCount> {
        self.0
            .iter()
            .map(|size| SizeCount {
                sku: size.sku.clone(),
                limited: size.limited.get(),
                sold: sold.get(&size.sku).copied().unwrap_or(0),
                gate_remaining: gate.and_then(|g| g.get(&size.sku).copied()),
            })
            .collect()
    }

    /// Whether the drop sells sizes (its one size has no sku otherwise).
    pub fn is_sized(&self) -> bool {
        self.0.iter().any(|size| size.sku.is_some())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Size> {
        self.0.iter()
    }

    /// The drop's `limitedQuantity`: the sum of its sizes' (it fits, as parsing checked).
    pub fn total(&self) -> u32 {
        self.0
            .iter()
            .fold(0u32, |sum, size| sum.saturating_add(size.limited.get()))
    }

    /// The size `sku` names (`None`: the drop without sizes's one size).
    pub fn get(&self, sku: Option<&Sku>) -> Option<&Size> {
        self.0.iter().find(|size| size.sku.as_ref() == sku)
    }

    /// The size a purchase or entry asks for by `sku` (as sent, absent or not).
    ///
    /// # Errors
    /// [`SkuRejection`]: a drop with sizes needs one of its skus, a drop without takes none.
    pub fn choose(&self, sku: Option<&str>) -> Result<&Size, SkuRejection> {
        match (self.is_sized(), sku) {
            (false, None) => Ok(&self.0[0]),
            (false, Some(_)) => Err(SkuRejection::Unsized),
            (true, None) => Err(SkuRejection::Missing),
            (true, Some(sku)) => self
                .0
                .iter()
                .find(|size| size.sku.as_ref().is_some_and(|s| s.as_str() == sku))
                .ok_or(SkuRejection::Unknown),
        }
    }

    /// Parses a drop's sizes: `limitedQuantity` for a drop without sizes, or `variants` (1 to
    /// [`MAX_VARIANTS`], skus unique, each with 1 to `i32::MAX` units, the sum within
    /// `i32::MAX`); exactly one of the two.
    ///
    /// # Errors
    /// Both or neither given (naming `variants`), and every failing item.
    pub fn parse(
        limited_quantity: Option<i64>,
        variants: Option<&[SizeInput]>,
    ) -> Result<Self, Vec<ValidationError>> {
        match (limited_quantity, variants) {
            (Some(limited), None) => Quantity::parse("limitedQuantity", limited)
                .map(Self::whole)
                .map_err(|e| vec![e]),
            (None, Some(inputs)) => Self::parse_sizes(inputs),
            (Some(_), Some(_)) => Err(vec![ValidationError::new(
                "variants",
                "is given instead of limitedQuantity, not with it",
            )]),
            (None, None) => Err(vec![ValidationError::new(
                "limitedQuantity",
                "is required (or variants, for a product with variants)",
            )]),
        }
    }

    fn parse_sizes(inputs: &[SizeInput]) -> Result<Self, Vec<ValidationError>> {
        let mut errors: Vec<ValidationError> = count_problem(inputs.len()).into_iter().collect();
        let skus = unique_skus(inputs.iter().map(|input| input.sku.as_str()));
        let mut sizes = Vec::with_capacity(inputs.len());
        for ((index, input), sku) in inputs.iter().enumerate().zip(skus) {
            let limited = Quantity::parse("limitedQuantity", input.limited_quantity)
                .map_err(|e| item_error(index, "limitedQuantity", e.message));
            match (sku, limited) {
                (Ok(sku), Ok(limited)) => sizes.push(Size {
                    sku: Some(sku),
                    limited,
                    label: None,
                }),
                (sku, limited) => errors.extend([sku.err(), limited.err()].into_iter().flatten()),
            }
        }
        if errors.is_empty() && total(sizes.iter().map(|s| s.limited.get())).is_none() {
            errors.push(ValidationError::new(
                "variants",
                format!("limitedQuantity must not sum to more than {}", i32::MAX),
            ));
        }
        if errors.is_empty() {
            Ok(Self(sizes.into()))
        } else {
            Err(errors)
        }
    }

    /// The creation rule that needs the product: a product without variants sells one size of
    /// at most its `stock`; a product with `variants` sells a subset of them, each size at most
    /// its variant's stock.
    ///
    /// # Errors
    /// The first rule broken, naming `limitedQuantity` or `variants`.
    pub fn check_product(
        &self,
        stock: u32,
        variants: &[ProductVariant],
    ) -> Result<(), ValidationError> {
        match (variants.is_empty(), self.is_sized()) {
            (true, false) if self.total() <= stock => Ok(()),
            (true, false) => Err(ValidationError::new(
                "limitedQuantity",
                format!("must not exceed the product's stock ({stock})"),
            )),
            (true, true) => Err(ValidationError::new(
                "variants",
                "the product has no variants: give limitedQuantity",
            )),
            (false, false) => Err(ValidationError::new(
                "variants",
                "is required: the product is sold in variants",
            )),
            (false, true) => self.iter().enumerate().try_for_each(|(index, size)| {
                let sku = size.sku.as_ref().map_or("", Sku::as_str);
                match variants.iter().find(|v| v.sku.as_str() == sku) {
                    None => Err(item_error(
                        index,
                        "sku",
                        "is not one of the product's variants",
                    )),
                    Some(v) if size.limited.get() > v.stock => Err(item_error(
                        index,
                        "limitedQuantity",
                        format_args!("must not exceed the variant's stock ({})", v.stock),
                    )),
                    Some(_) => Ok(()),
                }
            }),
        }
    }
}

/// One size's units as the database counts them, against its limit and, when read, the
/// gate's counter: what reconciliation and healing judge, size by size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeCount {
    /// The size (`None`: the drop has no sizes).
    pub sku: Option<Sku>,
    /// Its `limitedQuantity`.
    pub limited: u32,
    /// Its units in PENDING or PAID orders (cancelled and expired units went back).
    pub sold: u32,
    /// The gate's counter for it; `None` when no gate holds it or none could be read.
    pub gate_remaining: Option<u32>,
}

impl SizeCount {
    /// Units it still sells: none once sold out (or oversold).
    pub fn remaining(&self) -> u32 {
        self.limited.saturating_sub(self.sold)
    }

    /// `sold > limited`: more units sold than the size has. Must never be true.
    pub fn oversold(&self) -> bool {
        self.sold > self.limited
    }

    /// `limited - sold - gateRemaining`: units the gate holds back without a sale (in-flight
    /// purchases, or under-sell after a failure). Positive is safe; negative means the gate
    /// would admit more than the database can sell, the design document's oversell at the gate
    /// (the database still refuses it). `None` without a gate's counter.
    pub fn drift(&self) -> Option<i64> {
        self.gate_remaining
            .map(|g| i64::from(self.limited) - i64::from(self.sold) - i64::from(g))
    }
}

/// Whether a drop is oversold: whether any of its sizes is, even when the drop's total is not.
pub fn any_oversold(sizes: &[SizeCount]) -> bool {
    sizes.iter().any(SizeCount::oversold)
}

/// The oversold sizes of a drop in sizes, each with its limit and its units sold, for the
/// oversell's event and alert (empty for a drop without sizes, whose totals say it all).
pub fn oversold_sizes(sizes: &[SizeCount]) -> Vec<crate::SizeSold> {
    sizes
        .iter()
        .filter(|size| size.oversold())
        .filter_map(|size| {
            Some(crate::SizeSold {
                sku: size.sku.clone()?,
                sold: size.sold,
                limited: size.limited,
            })
        })
        .collect()
}

/// Units a drop still sells, in all: the sum of what each size still sells, so one oversold
/// size never hides another's sold-out (the drop is `SOLD_OUT` when every size is).
pub fn remaining_in_all(sizes: &[SizeCount]) -> u32 {
    sizes
        .iter()
        .fold(0u32, |sum, size| sum.saturating_add(size.remaining()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn q(n: i64) -> Quantity {
        Quantity::parse("q", n).unwrap()
    }

    fn variant(sku: &str, label: &str, stock: i64) -> VariantInput {
        VariantInput {
            sku: sku.to_owned(),
            label: label.to_owned(),
            stock_quantity: stock,
        }
    }

    fn size(sku: &str, limited: i64) -> SizeInput {
        SizeInput {
            sku: sku.to_owned(),
            limited_quantity: limited,
        }
    }

    fn sized(sizes: &[(&str, i64)]) -> Sizes {
        let inputs: Vec<_> = sizes.iter().map(|(s, n)| size(s, *n)).collect();
        Sizes::parse(None, Some(&inputs)).unwrap()
    }

    fn messages(errors: &[ValidationError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[rstest]
    #[case::plain("US-9", true)]
    #[case::every_allowed_character("aZ09._-", true)]
    #[case::sixty_four(&"a".repeat(64), true)]
    #[case::sixty_five(&"a".repeat(65), false)]
    #[case::empty("", false)]
    #[case::a_space("US 9", false)]
    #[case::a_slash("US/9", false)]
    #[case::a_colon_that_would_split_a_key("US:9", false)]
    #[case::a_brace_that_would_move_a_cluster_slot("{9}", false)]
    #[case::non_ascii("\u{D55C}", false)]
    fn a_sku_is_1_to_64_of_letters_digits_dot_underscore_dash(#[case] raw: &str, #[case] ok: bool) {
        assert_eq!(Sku::parse("sku", raw).is_ok(), ok, "{raw:?}");
    }

    #[rstest]
    #[case::plain("US 9", true)]
    #[case::trimmed("  Row A ", true)]
    #[case::sixty_four_characters(&"\u{D55C}".repeat(64), true)]
    #[case::sixty_five(&"a".repeat(65), false)]
    #[case::blank("   ", false)]
    #[case::bidi_override("US \u{202E}9", false)]
    fn a_label_follows_the_name_rules_up_to_64_characters(#[case] raw: &str, #[case] ok: bool) {
        let label = VariantLabel::parse("label", raw);
        let kept = label.as_ref().ok().map(VariantLabel::as_str);
        assert_eq!(kept, ok.then(|| raw.trim()), "{raw:?}");
    }

    #[test]
    fn a_products_variants_are_parsed_in_order() {
        let variants =
            parse_variants(&[variant("US-9", "US 9", 3), variant("US-10", "US 10", 0)]).unwrap();
        let read: Vec<_> = variants
            .iter()
            .map(|v| (v.sku.as_str(), v.label.as_str(), v.stock))
            .collect();
        assert_eq!(read, [("US-9", "US 9", 3), ("US-10", "US 10", 0)]);
    }

    #[rstest]
    #[case::none(vec![], vec!["variants: must hold 1 to 100 items, not 0"])]
    #[case::a_repeated_sku(
        vec![variant("A", "a", 1), variant("A", "b", 1)],
        vec!["variants: [1].sku: repeats an earlier item's"]
    )]
    #[case::every_field_of_an_item(
        vec![variant("A", "a", 1), variant("", " ", -1)],
        vec![
            "variants: [1].sku: must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'",
            "variants: [1].label: must be 1 to 64 characters",
            "variants: [1].stockQuantity: must be between 0 and 2147483647",
        ]
    )]
    #[case::a_stock_past_int(
        vec![variant("A", "a", 2_147_483_648)],
        vec!["variants: [0].stockQuantity: must be between 0 and 2147483647"]
    )]
    #[case::a_sum_past_int(
        vec![variant("A", "a", 2_147_483_647), variant("B", "b", 1)],
        vec!["variants: stockQuantity must not sum to more than 2147483647"]
    )]
    fn a_products_variants_are_refused_naming_each_problem(
        #[case] inputs: Vec<VariantInput>,
        #[case] expected: Vec<&str>,
    ) {
        assert_eq!(messages(&parse_variants(&inputs).unwrap_err()), expected);
    }

    #[test]
    fn a_hundred_variants_are_allowed_and_a_hundred_and_one_are_not() {
        let many = |n: usize| -> Vec<VariantInput> {
            (0..n).map(|i| variant(&format!("S{i}"), "s", 1)).collect()
        };
        assert_eq!(parse_variants(&many(100)).unwrap().len(), 100);
        assert_eq!(
            messages(&parse_variants(&many(101)).unwrap_err()),
            ["variants: must hold 1 to 100 items, not 101"]
        );
    }

    #[rstest]
    #[case::limited_quantity_alone(Some(5), None, Ok(5))]
    #[case::variants_alone(None, Some(vec![size("A", 2), size("B", 3)]), Ok(5))]
    #[case::both(Some(5), Some(vec![size("A", 2)]), Err("variants: is given instead of limitedQuantity, not with it"))]
    #[case::neither(
        None,
        None,
        Err("limitedQuantity: is required (or variants, for a product with variants)")
    )]
    #[case::a_zero_limited_quantity(
        Some(0),
        None,
        Err("limitedQuantity: must be between 1 and 2147483647")
    )]
    #[case::no_sizes(None, Some(vec![]), Err("variants: must hold 1 to 100 items, not 0"))]
    #[case::a_zero_size(None, Some(vec![size("A", 0)]), Err("variants: [0].limitedQuantity: must be between 1 and 2147483647"))]
    #[case::a_repeated_size(None, Some(vec![size("A", 1), size("A", 1)]), Err("variants: [1].sku: repeats an earlier item's"))]
    #[case::a_sum_past_int(None, Some(vec![size("A", 2_147_483_647), size("B", 1)]), Err("variants: limitedQuantity must not sum to more than 2147483647"))]
    fn a_drop_sells_limited_quantity_or_sizes_and_its_total_is_their_sum(
        #[case] limited: Option<i64>,
        #[case] sizes: Option<Vec<SizeInput>>,
        #[case] expected: Result<u32, &str>,
    ) {
        let parsed = Sizes::parse(limited, sizes.as_deref());
        match expected {
            Ok(total) => assert_eq!(parsed.unwrap().total(), total),
            Err(message) => assert_eq!(messages(&parsed.unwrap_err()), [message]),
        }
    }

    #[test]
    fn a_drop_without_sizes_is_one_size_without_a_sku() {
        let whole = Sizes::parse(Some(7), None).unwrap();
        assert!(!whole.is_sized());
        assert_eq!(
            whole.iter().collect::<Vec<_>>(),
            [&Size {
                sku: None,
                limited: q(7),
                label: None,
            }]
        );
        assert_eq!(whole.get(None).map(|s| s.limited), Some(q(7)));
    }

    #[rstest]
    #[case::unsized_without_a_sku(false, None, Ok(None))]
    #[case::unsized_with_a_sku(false, Some("A"), Err(SkuRejection::Unsized))]
    #[case::sized_with_its_sku(true, Some("B"), Ok(Some("B")))]
    #[case::sized_without_a_sku(true, None, Err(SkuRejection::Missing))]
    #[case::sized_with_another_sku(true, Some("C"), Err(SkuRejection::Unknown))]
    #[case::sized_with_a_sku_in_another_case(true, Some("b"), Err(SkuRejection::Unknown))]
    fn a_purchase_names_a_size_exactly_when_the_drop_has_sizes(
        #[case] is_sized: bool,
        #[case] sku: Option<&str>,
        #[case] expected: Result<Option<&str>, SkuRejection>,
    ) {
        let sizes = if is_sized {
            sized(&[("A", 1), ("B", 2)])
        } else {
            Sizes::whole(q(3))
        };
        let chosen = sizes.choose(sku).map(|s| s.sku.as_ref().map(Sku::as_str));
        assert_eq!(chosen, expected);
    }

    fn count(sku: &str, limited: u32, sold: u32, gate: Option<u32>) -> SizeCount {
        SizeCount {
            sku: Some(Sku::parse("sku", sku).unwrap()),
            limited,
            sold,
            gate_remaining: gate,
        }
    }

    #[rstest]
    #[case::untouched(count("S", 5, 0, Some(5)), 5, false, Some(0))]
    #[case::in_flight(count("S", 5, 2, Some(1)), 3, false, Some(2))]
    #[case::sold_out(count("S", 5, 5, Some(0)), 0, false, Some(0))]
    #[case::gate_admits_more_than_the_database_sells(count("S", 5, 4, Some(3)), 1, false, Some(-2))]
    #[case::oversold(count("S", 5, 6, Some(0)), 0, true, Some(-1))]
    #[case::no_gate(count("S", 5, 1, None), 4, false, None)]
    fn a_size_is_judged_by_its_own_units(
        #[case] size: SizeCount,
        #[case] remaining: u32,
        #[case] oversold: bool,
        #[case] drift: Option<i64>,
    ) {
        assert_eq!(
            (size.remaining(), size.oversold(), size.drift()),
            (remaining, oversold, drift)
        );
    }

    #[test]
    fn one_oversold_size_oversells_the_drop_even_when_its_total_is_within_the_limit() {
        // 6 of S's 5 and 1 of M's 5: 7 of 10 in all, and still an oversell.
        let sizes = [count("S", 5, 6, None), count("M", 5, 1, None)];
        assert!(any_oversold(&sizes));
        assert_eq!(remaining_in_all(&sizes), 4);
        let fine = [count("S", 5, 5, None), count("M", 5, 1, None)];
        assert!(!any_oversold(&fine));
    }

    #[test]
    fn the_oversell_names_each_oversold_size_with_its_limit_and_units() {
        let sizes = [
            count("S", 5, 6, None),
            count("M", 5, 5, None),
            count("L", 2, 4, None),
        ];
        let named: Vec<_> = oversold_sizes(&sizes)
            .into_iter()
            .map(|s| (s.sku.as_str().to_owned(), s.limited, s.sold))
            .collect();
        assert_eq!(named, [("S".to_owned(), 5, 6), ("L".to_owned(), 2, 4)]);
        // A drop without sizes names none: its totals are the oversell.
        let whole = [SizeCount {
            sku: None,
            limited: 5,
            sold: 6,
            gate_remaining: None,
        }];
        assert!(any_oversold(&whole));
        assert!(oversold_sizes(&whole).is_empty());
    }

    #[test]
    fn a_drop_sells_nothing_more_once_every_size_is_sold_out() {
        let sizes = [count("S", 5, 5, None), count("M", 2, 2, None)];
        assert_eq!(remaining_in_all(&sizes), 0);
        let one_left = [count("S", 5, 5, None), count("M", 2, 1, None)];
        assert_eq!(remaining_in_all(&one_left), 1);
    }

    fn product_variants() -> Vec<ProductVariant> {
        parse_variants(&[
            variant("A", "a", 5),
            variant("B", "b", 2),
            variant("C", "c", 0),
        ])
        .unwrap()
    }

    #[rstest]
    #[case::unsized_within_stock(Sizes::whole(q(10)), 10, false, Ok(()))]
    #[case::unsized_past_stock(
        Sizes::whole(q(11)),
        10,
        false,
        Err("limitedQuantity: must not exceed the product's stock (10)")
    )]
    #[case::sizes_of_a_product_without(sized(&[("A", 1)]), 10, false, Err("variants: the product has no variants: give limitedQuantity"))]
    #[case::unsized_of_a_product_with(
        Sizes::whole(q(1)),
        7,
        true,
        Err("variants: is required: the product is sold in variants")
    )]
    #[case::a_subset_within_stock(sized(&[("B", 2), ("A", 5)]), 7, true, Ok(()))]
    #[case::a_size_past_its_stock(sized(&[("A", 5), ("B", 3)]), 7, true, Err("variants: [1].limitedQuantity: must not exceed the variant's stock (2)"))]
    #[case::a_size_without_stock(sized(&[("C", 1)]), 7, true, Err("variants: [0].limitedQuantity: must not exceed the variant's stock (0)"))]
    #[case::a_sku_the_product_lacks(sized(&[("A", 1), ("D", 1)]), 7, true, Err("variants: [1].sku: is not one of the product's variants"))]
    fn a_drops_sizes_fit_its_product(
        #[case] sizes: Sizes,
        #[case] stock: u32,
        #[case] with_variants: bool,
        #[case] expected: Result<(), &str>,
    ) {
        let variants = if with_variants {
            product_variants()
        } else {
            Vec::new()
        };
        let checked = sizes
            .check_product(stock, &variants)
            .map_err(|e| e.to_string());
        assert_eq!(checked, expected.map_err(str::to_owned));
    }
}
