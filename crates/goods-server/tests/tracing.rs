//! Traces join up: a request carrying a W3C `traceparent` is traced as a child of the caller's
//! span, and the spans under it (the use case, the gate, the database) are exported in the same
//! trace, through the server's own export layer (`telemetry::exporting`) into the SDK's
//! in-memory exporter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use goods_server::config::DEFAULT_TRACES_FILTER;
use goods_server::{Application, Config};
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use std::collections::HashMap;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn attribute(span: &opentelemetry_sdk::trace::SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_traceparent_is_the_parent_of_the_exported_server_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(goods_server::telemetry::exporting(
        &provider,
        EnvFilter::new(DEFAULT_TRACES_FILTER),
    ));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let env: HashMap<&str, String> = HashMap::from([
        ("BIND_ADDR", "127.0.0.1:0".to_owned()),
        (
            "DATABASE_URL",
            format!("sqlite://{}/goods.db", dir.path().display()),
        ),
        ("RECONCILE_INTERVAL_MS", "0".to_owned()),
    ]);
    let config = Config::from_lookup(|name| env.get(name).cloned()).unwrap();
    let app = Application::build(config).await.unwrap();
    let base = format!("http://{}", app.address());
    tokio::spawn(app.run_until_stopped());

    let client = reqwest::Client::new();
    let answer = client
        .post(format!("{base}/products"))
        .header("X-User-Id", "1")
        .header("X-User-Role", "seller")
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .header("X-Load-Test-Run-Id", "run-42")
        .json(&serde_json::json!({"name": "traced", "stockQuantity": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let product: serde_json::Value = answer.json().await.unwrap();
    let now = time::OffsetDateTime::now_utc();
    let rfc = &time::format_description::well_known::Rfc3339;
    let drop: serde_json::Value = client
        .post(format!("{base}/limited-drops"))
        .header("X-User-Id", "1")
        .header("X-User-Role", "seller")
        .json(&serde_json::json!({
            "productId": product["productId"],
            "openAt": (now - time::Duration::seconds(1)).format(rfc).unwrap(),
            "closeAt": (now + time::Duration::hours(1)).format(rfc).unwrap(),
            "limitedQuantity": 3,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bought = client
        .post(format!("{base}/limited-drops/{}/orders", drop["dropId"]))
        .header("X-User-Id", "7")
        .header("Idempotency-Key", "traced")
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .json(&serde_json::json!({"quantity": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(bought.status(), 202);
    let order: serde_json::Value = bought.json().await.unwrap();
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let trace = TraceId::from_hex(TRACE).unwrap();
    let server = spans
        .iter()
        .find(|s| s.name == "POST /products")
        .unwrap_or_else(|| {
            panic!(
                "no server span: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    assert_eq!(server.span_context.trace_id(), trace);
    assert_eq!(server.parent_span_id, SpanId::from_hex(PARENT).unwrap());
    let on_server = |key| attribute(server, key);
    assert_eq!(on_server("http.request.method").as_deref(), Some("POST"));
    assert_eq!(on_server("http.route").as_deref(), Some("/products"));
    assert_eq!(
        on_server("http.response.status_code").as_deref(),
        Some("201")
    );
    assert_eq!(on_server("load_test.run_id").as_deref(), Some("run-42"));
    // The caller, as the request came from this machine (loopback, no trusted proxy in between).
    assert_eq!(on_server("client.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(server.span_kind, opentelemetry::trace::SpanKind::Server);
    // The spans below it, down to the database, are in the caller's trace too.
    let children = spans
        .iter()
        .filter(|s| s.span_context.trace_id() == trace && s.name != "POST /products")
        .count();
    assert!(children >= 1, "{spans:#?}");

    // The purchase: its use-case span carries the order and the outcome, and the batch that
    // committed it (a span of the drop's committer) links back to it.
    let purchase = spans
        .iter()
        .find(|s| s.name == "purchase" && s.span_context.trace_id() == trace)
        .expect("a purchase span in the caller's trace");
    let field = |key| attribute(purchase, key);
    assert_eq!(field("order.id"), Some(order["orderId"].to_string()));
    assert_eq!(field("outcome").as_deref(), Some("created"));
    let batch = spans
        .iter()
        .find(|s| s.name == "group_commit")
        .expect("a group_commit span");
    assert!(
        batch
            .links
            .iter()
            .any(|link| link.span_context.span_id() == purchase.span_context.span_id()),
        "{batch:#?}"
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "place_orders" && s.parent_span_id == batch.span_context.span_id()),
        "the transaction's span is under the batch's"
    );
}
