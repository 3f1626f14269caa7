//! The tracing subscriber: formatted logs filtered by `RUST_LOG`, plus OTLP trace export only
//! when an endpoint is configured (no exporter, no start-up delay otherwise).

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, fmt};

/// Keeps the OTLP pipeline alive; call [`Telemetry::shutdown`] at exit to flush it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the exporter. Blocks for up to about a second, so call it off the
    /// async workers.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            eprintln!("telemetry shutdown: {error}");
        }
    }
}

/// Installs the global subscriber.
///
/// # Errors
/// When the filter does not parse or the exporter cannot be built.
pub fn init(filter: &str, otlp_endpoint: Option<&str>) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_new(filter).context("RUST_LOG")?;
    let provider = otlp_endpoint
        .map(|endpoint| {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
                .context("OTEL_EXPORTER_OTLP_ENDPOINT")?;
            Ok::<_, anyhow::Error>(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(
                        Resource::builder()
                            .with_service_name("goods-server")
                            .build(),
                    )
                    .build(),
            )
        })
        .transpose()?;
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("goods-server")));
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt::layer().with_ansi(std::io::stdout().is_terminal()))
        .with(otel)
        .try_init()
        .context("installing the tracing subscriber")?;
    Ok(Telemetry { provider })
}
