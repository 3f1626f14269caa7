//! Request counters and latency sums in the Prometheus text format.

use std::collections::BTreeMap;
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

/// (method, route pattern, status).
type SeriesKey = (String, String, u16);

/// Per (method, route, status) request counts and latency sums. Routes are patterns
/// (`/limited-drops/{dropId}`), never raw paths, so the label set stays small.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    series: Arc<Mutex<BTreeMap<SeriesKey, Series>>>,
}

impl Metrics {
    /// Counts one request.
    pub fn observe(&self, method: &str, route: &str, status: u16, took: Duration) {
        if let Ok(mut series) = self.series.lock() {
            let s = series
                .entry((method.to_owned(), route.to_owned(), status))
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
        let series = self.series.lock().map(|s| s.clone()).unwrap_or_default();
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
