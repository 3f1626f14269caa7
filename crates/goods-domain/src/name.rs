//! The rules of a name shown to buyers (a product's name, a variant's label).

/// What is wrong with a `trimmed` name of at most `max` characters (a product's, a variant's
/// label), if anything.
pub(crate) fn name_problem(trimmed: &str, max: usize) -> Option<String> {
    let len = trimmed.chars().count();
    if len == 0 || len > max {
        return Some(format!("must be 1 to {max} characters"));
    }
    trimmed.chars().find(|&c| unsafe_in_a_name(c)).map(|c| {
        format!(
            "must not contain control or bidirectional formatting characters (U+{:04X})",
            u32::from(c)
        )
    })
}

/// Characters a name may not hold: controls (C0, DEL, C1), the bidirectional embeddings,
/// overrides and isolates, and the line and paragraph separators.
fn unsafe_in_a_name(c: char) -> bool {
    c.is_control()
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
        || c == '\u{2028}'
        || c == '\u{2029}'
}
