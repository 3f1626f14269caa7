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

fn repo(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// The lines of the markdown section whose heading starts with `heading`, up to the next
/// heading of any level.
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    doc.lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .collect()
}

/// `{"A", "B"}` of every quoted string in `text`.
fn quoted(text: &str) -> BTreeSet<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The `(code, class)` rows of the outcome table under `heading` in docs/observability.md.
fn outcome_table(doc: &str, heading: &str) -> Vec<(String, String)> {
    section(doc, heading)
        .iter()
        .filter_map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((code.to_owned(), (*cells.get(2)?).to_owned()))
        })
        .collect()
}

/// Every `A|B|C` set the recording rules match after `selector` (e.g. `code=~"`).
fn rule_sets(rules: &str, selector: &str) -> Vec<BTreeSet<String>> {
    rules
        .split(selector)
        .skip(1)
        .map(|rest| {
            rest.split('"')
                .next()
                .unwrap()
                .split('|')
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// The codes of one class in docs/observability.md's outcome table.
fn class(table: &[(String, String)], name: &str) -> BTreeSet<String> {
    table
        .iter()
        .filter(|(_, c)| c == name)
        .map(|(code, _)| code.clone())
        .collect()
}

#[test]
fn the_outcome_table_is_what_the_rules_and_k6_classify_by() {
    let doc = repo("docs/observability.md");
    let table = outcome_table(&doc, "### Outcome classes");
    assert!(table.len() >= 19, "the table was not found: {table:?}");
    let classes = ["good", "bad", "domain", "input", "test-data"];
    for (code, c) in &table {
        assert!(classes.contains(&c.as_str()), "{code}: unknown class {c}");
    }

    // Every purchase answer docs/api.md names has a class.
    let api = repo("docs/api.md");
    let mut named = BTreeSet::from(["SUCCESS".to_owned(), "REPLAYED".to_owned()]);
    for row in section(&api, "## Purchase:") {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if let Some(codes) = cells.get(2) {
            for code in codes.split(" / ") {
                if !code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    named.insert(code.to_owned());
                }
            }
        }
    }
    assert!(
        named.len() >= 19,
        "the purchase table was not found: {named:?}"
    );
    let classified: BTreeSet<String> = table.iter().map(|(code, _)| code.clone()).collect();
    assert_eq!(
        named, classified,
        "docs/api.md's purchase codes against the outcome table"
    );

    // The recording rules: the good and the bad sets, and no code set that counts an excluded
    // class (the throttled ratio's admitted purchases, SUCCESS and THROTTLED, are valid too).
    let (good, bad) = (class(&table, "good"), class(&table, "bad"));
    let valid: BTreeSet<String> = good.union(&bad).cloned().collect();
    let rules = deploy("rules/recording.yml");
    let sets = rule_sets(&rules, "code=~\"");
    assert!(sets.len() >= 8, "{sets:?}");
    assert!(sets.contains(&good) && sets.contains(&bad), "{sets:?}");
    assert!(
        sets.contains(&valid),
        "no rule divides by the valid events: {sets:?}"
    );
    for set in &sets {
        assert!(
            set.is_subset(&valid),
            "a code set of the recording rules counts a code that is not a valid event: {set:?}"
        );
    }

    // k6's classification.
    let k6 = repo("loadtest/k6/lib/sli.js");
    let k6_set = |name: &str| {
        let start = k6.find(&format!("const {name} = new Set([")).unwrap();
        let end = start + k6[start..].find("]);").unwrap();
        quoted(&k6[start..end])
    };
    assert_eq!(k6_set("DOMAIN_REJECTIONS"), class(&table, "domain"));
    assert_eq!(k6_set("INPUT_ERRORS"), class(&table, "input"));
    assert_eq!(k6_set("TEST_DATA_ERRORS"), class(&table, "test-data"));
}

#[test]
fn the_entry_outcome_table_is_what_the_rules_classify_by() {
    let doc = repo("docs/observability.md");
    let table = outcome_table(&doc, "### Entry outcome classes");
    assert_eq!(table.len(), 10, "the table was not found: {table:?}");
    // The outcomes the metric's row lists, every one classed.
    let listed: BTreeSet<String> = doc
        .lines()
        .find(|l| l.starts_with("| `draw_entries_total`"))
        .unwrap()
        .split('(')
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .split(", ")
        .map(|o| o.trim_matches('`').to_owned())
        .collect();
    let classified: BTreeSet<String> = table.iter().map(|(o, _)| o.clone()).collect();
    assert_eq!(listed, classified);
    let rules = deploy("rules/recording.yml");
    let sets = rule_sets(&rules, "draw_entries_total{outcome=~\"");
    assert_eq!(
        sets,
        [class(&table, "good"), class(&table, "bad")],
        "the entry rules' good and bad sets"
    );
}

/// docs/observability.md: every alert has a promtool case where it fires and one where it
/// stays quiet.
#[test]
fn every_alert_has_a_firing_and_a_quiet_promtool_case() {
    let alerts: BTreeSet<String> = deploy("rules/alerts.yml")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect();
    assert!(alerts.len() >= 11, "{alerts:?}");
    let tests = deploy("tests/alerts_test.yml");
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("alertname: ") {
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => quiet.insert(name.to_owned()),
                Some(&"exp_alerts:") => firing.insert(name.to_owned()),
                other => panic!("{name}: unexpected {other:?}"),
            };
        }
    }
    assert_eq!(firing, alerts, "alerts without a firing case");
    assert_eq!(quiet, alerts, "alerts without a quiet case");
}
