//! Logs and traces: the OpenTelemetry standard variables and `RUST_LOG`.

use super::{ConfigError, bad};

#[derive(Debug, Clone)]
pub struct Observability {
    /// OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`); `None`: no exporter.
    pub otlp_endpoint: Option<String>,
    /// OTLP transport (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub otlp_protocol: OtlpProtocol,
    /// Which spans are exported over OTLP (`OTEL_TRACES_FILTER`), apart from the console's
    /// `RUST_LOG`: by default the adapters' debug spans too.
    pub traces_filter: String,
    /// Log filter (`RUST_LOG`).
    pub log_filter: String,
    /// Console log format (`LOG_FORMAT`).
    pub log_format: LogFormat,
}

/// How spans reach the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `grpc` (port 4317 by convention).
    Grpc,
    /// `http/protobuf` (port 4318, path `/v1/traces`).
    HttpProtobuf,
}

/// Console log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    /// One JSON object per line, with the span's fields.
    Json,
}

/// The spans exported over OTLP unless `OTEL_TRACES_FILTER` says otherwise: the request, use
/// case, gate and database spans (several at debug level), whatever the console shows.
pub const DEFAULT_TRACES_FILTER: &str = "info,api_actix=debug,goods_app=debug,adapters_sql=debug,adapters_mysql=debug,adapters_sqlite=debug,adapters_redis=debug";

impl Observability {
    pub(super) fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let otlp_endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT");
        if otlp_endpoint.is_some() {
            super::needs_feature(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "otlp",
                cfg!(feature = "otlp"),
            )?;
        }
        Ok(Self {
            otlp_endpoint,
            otlp_protocol: match get("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
                None | Some("grpc") => OtlpProtocol::Grpc,
                Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
                Some(other) => {
                    return Err(bad(
                        "OTEL_EXPORTER_OTLP_PROTOCOL",
                        format!("{other:?} is not grpc or http/protobuf"),
                    ));
                }
            },
            traces_filter: get("OTEL_TRACES_FILTER")
                .unwrap_or_else(|| DEFAULT_TRACES_FILTER.to_owned()),
            log_filter: get("RUST_LOG").unwrap_or_else(|| "info".into()),
            log_format: log_format(get)?,
        })
    }
}

pub(super) fn log_format(get: &impl Fn(&str) -> Option<String>) -> Result<LogFormat, ConfigError> {
    match get("LOG_FORMAT").as_deref() {
        None | Some("text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(other) => Err(bad("LOG_FORMAT", format!("{other:?} is not text or json"))),
    }
}
