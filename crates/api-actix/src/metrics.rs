//! Request counters and latency sums in the Prometheus text format.

use actix_web::http::Method;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Default, Clone, Copy)]
struct Series {
    count: u64,
    seconds: f64,
}

/// Reads a counter kept elsewhere (an adapter's).
pub type Counter = Arc<dyn Fn() -> u64 + Send + Sync>;

/// (method, route pattern, status). Every part comes from a fixed set (methods outside the
/// standard ones are `OTHER`, unmatched paths `unmatched`), so no client can add series.
type SeriesKey = (&'static str, &'static str, u16);

/// The method's label: one of the standard methods, or `OTHER`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// Per (method, route, status) request counts and latency sums. Routes are patterns
/// (`/limited-drops/{dropId}`), never raw paths, so the label set stays small.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    series: Arc<Mutex<HashMap<SeriesKey, Series>>>,
}

impl Metrics {
    /// Counts one request.
    pub fn observe(&self, method: &Method, route: &'static str, status: u16, took: Duration) {
        if let Ok(mut series) = self.series.lock() {
            let s = series
                .entry((method_label(method), route, status))
                .or_default();
            s.count += 1;
            s.seconds += took.as_secs_f64();
        }
    }

    /// The Prometheus exposition.
    pub fn render(&self, write_slots_available: usize, db_statements: u64) -> String {
        let mut out = format!(
            "# HELP db_write_slots_available Free database write slots of this instance's buffer.\n\
             # TYPE db_write_slots_available gauge\n\
             db_write_slots_available {write_slots_available}\n\
             # HELP db_statements_total Statements this instance sent to the database.\n\
             # TYPE db_statements_total counter\n\
             db_statements_total {db_statements}\n"
        );
        out.push_str(
            "# HELP http_requests_total HTTP requests by method, route pattern and status.\n\
             # TYPE http_requests_total counter\n",
        );
        let mut series: Vec<(SeriesKey, Series)> = self
            .series
            .lock()
            .map(|s| s.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default();
        series.sort_by_key(|(key, _)| *key);
        for ((method, route, status), s) in &series {
            let _ = writeln!(
                out,
                "http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {}",
                s.count
            );
        }
        out.push_str(
            "# HELP http_request_duration_seconds_sum Total time spent answering, by route.\n\
             # TYPE http_request_duration_seconds_sum counter\n",
        );
        for ((method, route, status), s) in &series {
            let _ = writeln!(
                out,
                "http_request_duration_seconds_sum{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {}",
                s.seconds
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_series() {
        let metrics = Metrics::default();
        for name in ["FOO1", "FOO2", "FOO3"] {
            let method = Method::from_bytes(name.as_bytes()).unwrap_or(Method::GET);
            metrics.observe(&method, "unmatched", 405, Duration::ZERO);
        }
        let text = metrics.render(0, 0);
        assert!(!text.contains("FOO"), "{text}");
        assert!(
            text.contains(
                "http_requests_total{method=\"OTHER\",route=\"unmatched\",status=\"405\"} 3"
            ),
            "{text}"
        );
    }
}
