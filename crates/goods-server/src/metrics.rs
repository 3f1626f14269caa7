//! The metrics recorder, `metrics-exporter-prometheus` (`GET /metrics`): the crates below record
//! through the `metrics` facade, and its sharded registry takes no global lock.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use std::sync::OnceLock;
use std::time::Duration;

/// Histogram buckets in seconds, shared by every latency histogram: fine below 10 ms where
/// refusals and commits live, and an edge at the 800 ms latency objective.
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 2.5, 5.0, 10.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often histogram samples are folded in when nobody scrapes.
pub(crate) const UPKEEP: Duration = Duration::from_secs(5);

/// Every metric name the server exports (without the `_bucket`, `_sum`, `_count` of
/// histograms): what dashboards and alert rules may use.
pub fn names() -> Vec<&'static str> {
    [
        api_actix::HTTP_METRIC_NAMES,
        goods_app::telemetry::NAMES,
        adapters_sql::METRIC_NAMES,
        #[cfg(feature = "redis")]
        adapters_redis::METRIC_NAMES,
    ]
    .concat()
}

/// The recorder, installed on first use (one per process; a second server in the same process,
/// as in tests, shares it). A gauge nobody has set for three healing passes (at least a minute)
/// is dropped from the exposition: that is how a closed drop's drift series goes away.
pub fn recorder(reconcile_interval: Option<Duration>) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let idle = reconcile_interval
                .map_or(Duration::ZERO, |i| i * 3)
                .max(Duration::from_secs(60));
            let builder = PrometheusBuilder::new().idle_timeout(MetricKindMask::GAUGE, Some(idle));
            let builder = match builder.set_buckets(BUCKETS) {
                Ok(with_buckets) => with_buckets,
                Err(error) => {
                    tracing::warn!(%error, "histogram buckets refused; summaries instead");
                    PrometheusBuilder::new().idle_timeout(MetricKindMask::GAUGE, Some(idle))
                }
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics stays empty");
            }
            api_actix::describe_http_metrics();
            goods_app::telemetry::describe();
            adapters_sql::describe_metrics();
            #[cfg(feature = "redis")]
            adapters_redis::describe();
            handle
        })
        .clone()
}
