//! The deploy files of `deploy/observability/` name only metrics the server exports: every
//! metric in the alert and recording rules and in the dashboard's queries is one of
//! `goods_server::metrics::names()` (a histogram's `_bucket`, `_sum` and `_count` included).
//! promtool checks the rules' syntax and behaviour (scripts/test); this checks their names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// The prefixes of this service's metrics: a token starting with one is a metric name.
const PREFIXES: &[&str] = &[
    "http_",
    "purchase_",
    "gate_",
    "db_",
    "reconcile_",
    "oversell_",
    "stale_",
];

/// The metric names in a PromQL expression: label values (quoted) and recording-rule names
/// (with a colon) left out.
fn metric_names(expr: &str, into: &mut BTreeSet<String>) {
    let mut unquoted = String::new();
    let mut quoted = false;
    for c in expr.chars() {
        if c == '"' {
            quoted = !quoted;
            unquoted.push(' ');
        } else if !quoted {
            unquoted.push(c);
        }
    }
    for token in unquoted.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        if !token.contains(':') && PREFIXES.iter().any(|p| token.starts_with(p)) {
            into.insert(token.to_owned());
        }
    }
}

fn deploy(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/observability");
    std::fs::read_to_string(root.join(path)).unwrap()
}

fn exported(name: &str) -> bool {
    let names = goods_server::metrics::names();
    let base = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .filter(|base| names.contains(base))
        .unwrap_or(name);
    names.contains(&base)
}

#[test]
fn the_rules_and_the_dashboard_use_only_exported_metrics() {
    let mut used = BTreeSet::new();
    for file in ["rules/alerts.yml", "rules/recording.yml"] {
        // Rule expressions, and the rule test inputs too: a test fed a made-up series proves
        // nothing about the server.
        metric_names(&deploy(file), &mut used);
    }
    metric_names(&deploy("tests/alerts_test.yml"), &mut used);
    let dashboard: serde_json::Value =
        serde_json::from_str(&deploy("grafana/limited-drop.json")).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(!panels.is_empty());
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            metric_names(target["expr"].as_str().unwrap(), &mut used);
        }
    }
    assert!(used.len() >= 10, "the check found too few names: {used:?}");
    let unknown: Vec<_> = used.iter().filter(|n| !exported(n)).collect();
    assert!(
        unknown.is_empty(),
        "not exported by the server: {unknown:?}"
    );
}

#[test]
fn the_name_check_catches_a_made_up_metric() {
    let mut used = BTreeSet::new();
    metric_names(
        r#"sum(rate(purchase_made_up_total{code="SOLD_OUT"}[5m])) / goods:x:rate5m"#,
        &mut used,
    );
    assert_eq!(used.iter().collect::<Vec<_>>(), ["purchase_made_up_total"]);
    assert!(!exported("purchase_made_up_total"));
    assert!(exported("http_request_duration_seconds_bucket"));
}
