//! Reading the parts of a JSON answer that a test compares.

use serde_json::Value;

/// The `fields` of each item of the array `items`, one array per item, in order: the
/// `variants` of a view, stats or reconciliation compared as `[["S", 10, false], …]`.
/// Not an array: an empty list; a missing field: `null`.
pub fn pick(items: &Value, fields: &[&str]) -> Value {
    let rows = items.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        rows.iter()
            .map(|item| Value::Array(fields.iter().map(|f| item[*f].clone()).collect()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_item_gives_its_fields_in_the_order_asked() {
        let variants = json!([
            {"sku": "S", "soldQuantity": 3, "oversold": false},
            {"sku": "M", "oversold": true}
        ]);
        assert_eq!(
            pick(&variants, &["oversold", "sku", "soldQuantity"]),
            json!([[false, "S", 3], [true, "M", null]])
        );
        assert_eq!(pick(&json!(null), &["sku"]), json!([]));
    }
}
