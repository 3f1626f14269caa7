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

/// (method, route pattern, status). Routes are static labels, so counting allocates nothing.
type SeriesKey = (Method, &'static str, u16);

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
            let s = series.entry((method.clone(), route, status)).or_default();
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
            .map(|s| s.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default();
        series.sort_by(|a, b| (a.0.0.as_str(), a.0.1, a.0.2).cmp(&(b.0.0.as_str(), b.0.1, b.0.2)));
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
