//! What docs/openapi.yaml calls valid, the service accepts: the description's patterns held
//! against the domain's rules, character by character.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use goods_domain::ProductName;

/// The `pattern` of a property in one of the description's component schemas.
fn pattern(schema: &str, property: &str) -> regex::Regex {
    let spec = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.yaml"),
    )
    .unwrap();
    let mut lines = spec
        .lines()
        .skip_while(|l| l.trim() != format!("{schema}:"))
        .skip_while(|l| l.trim() != format!("{property}:"));
    let raw = lines
        .find_map(|l| l.trim().strip_prefix("pattern: "))
        .unwrap_or_else(|| panic!("{schema}.{property} has no pattern"));
    regex::Regex::new(raw.trim_matches('\'')).unwrap()
}

/// Every Unicode scalar value.
fn every_char() -> impl Iterator<Item = char> {
    (0..=0x10_FFFF).filter_map(char::from_u32)
}

#[test]
fn a_product_name_matches_the_described_pattern_exactly_when_the_domain_accepts_it() {
    let described = pattern("CreateProduct", "name");
    let mut checked = 0;
    for c in every_char() {
        for name in [
            format!("a{c}b"),
            format!("{c}"),
            format!(" {c} "),
            format!("{c}{c}"),
        ] {
            assert_eq!(
                described.is_match(&name),
                ProductName::parse(&name).is_ok(),
                "{name:?} (U+{:04X})",
                u32::from(c)
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * 1_112_064);
}
