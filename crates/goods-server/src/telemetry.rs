//! The tracing subscriber: console logs by `RUST_LOG`, and OTLP export only with an endpoint,
//! filtered by `OTEL_TRACES_FILTER`; the W3C propagator for incoming `traceparent`.

use crate::config::{LogFormat, Observability, OtlpProtocol};
use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal as _;
use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, fmt};

/// Keeps the OTLP pipeline alive; call [`Telemetry::shutdown`] at exit to flush it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the exporter, for up to `within`. Blocks, so call it off the async
    /// workers.
    pub fn shutdown(self, within: std::time::Duration) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown_with_timeout(within)
        {
            eprintln!("telemetry shutdown: {error}");
        }
    }
}

/// The console layer: `format`, filtered by `filter` (`RUST_LOG`).
fn console<S>(filter: EnvFilter, format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    match format {
        LogFormat::Text => fmt::layer()
            .with_ansi(std::io::stdout().is_terminal())
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
    }
}

/// The export layer: spans to `provider`'s tracer, filtered by `filter` alone.
pub fn exporting<S>(provider: &SdkTracerProvider, filter: EnvFilter) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // W3C trace context in and out: the middleware extracts a caller's `traceparent`.
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("goods-server"))
        .with_filter(filter)
}

#[cfg(feature = "otlp")]
fn exporter(endpoint: &str, protocol: OtlpProtocol) -> anyhow::Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::Resource;
    let exporter = match protocol {
        OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build(),
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .build(),
    }
    .context("OTEL_EXPORTER_OTLP_ENDPOINT")?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name("goods-server")
                .build(),
        )
        .build())
}

/// Without the `otlp` feature the configuration refuses an endpoint, so this is never called.
#[cfg(not(feature = "otlp"))]
fn exporter(_: &str, _: OtlpProtocol) -> anyhow::Result<SdkTracerProvider> {
    anyhow::bail!("this goods-server was built without the `otlp` feature")
}

/// Installs the global subscriber.
///
/// # Errors
/// When a filter does not parse or the exporter cannot be built.
pub fn init(config: &Observability) -> anyhow::Result<Telemetry> {
    let console_filter = EnvFilter::try_new(&config.log_filter).context("RUST_LOG")?;
    let export_filter = EnvFilter::try_new(&config.traces_filter).context("OTEL_TRACES_FILTER")?;
    let provider = config
        .otlp_endpoint
        .as_deref()
        .map(|endpoint| exporter(endpoint, config.otlp_protocol))
        .transpose()?;
    let otel = provider
        .as_ref()
        .map(|provider| exporting(provider, export_filter));
    tracing_subscriber::registry()
        .with(console(console_filter, config.log_format))
        .with(otel)
        .try_init()
        .context("installing the tracing subscriber")?;
    Ok(Telemetry { provider })
}

/// Installs a console-only subscriber (`goods-server migrate`, which serves nothing to trace).
pub fn init_console(filter: &str, format: LogFormat) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_new(filter).context("RUST_LOG")?;
    tracing_subscriber::registry()
        .with(console(filter, format))
        .try_init()
        .context("installing the tracing subscriber")?;
    Ok(Telemetry { provider: None })
}
