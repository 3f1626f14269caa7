//! HTTP metrics through the `metrics` facade. Every label comes from a fixed set, so no client
//! can add series: unknown methods are `OTHER`, routes are templates or `unmatched`.

use actix_web::http::Method;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Renders the exposition for `GET /metrics` (the recorder's, installed by the binary).
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// HTTP requests answered, by method, route template and status.
pub const HTTP_REQUESTS: &str = "http_requests_total";
/// Time to answer, by method, route template and status (a histogram).
pub const HTTP_DURATION: &str = "http_request_duration_seconds";
/// Purchase answers by the API's outcome code (`SUCCESS` for a new order, `REPLAYED` for an
/// idempotent replay, else the problem's `code`).
pub const PURCHASE_OUTCOMES: &str = "purchase_outcomes_total";

/// Every metric name above.
pub const NAMES: &[&str] = &[HTTP_REQUESTS, HTTP_DURATION, PURCHASE_OUTCOMES];

/// The method's label: one of the standard methods, or `OTHER`.
pub fn method_label(method: &Method) -> &'static str {
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

/// The status's label, without an allocation for the statuses this API answers.
fn status_label(status: u16) -> metrics::SharedString {
    let known = match status {
        200 => "200",
        201 => "201",
        202 => "202",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        425 => "425",
        429 => "429",
        500 => "500",
        503 => "503",
        other => return metrics::SharedString::from(other.to_string()),
    };
    metrics::SharedString::const_str(known)
}

/// A series' handles: the registry is asked once per worker thread and label set, not on
/// every request (the label sets are few, see the module documentation).
type Handles = (metrics::Counter, metrics::Histogram);

thread_local! {
    static SERIES: std::cell::RefCell<HashMap<(&'static str, &'static str, u16), Handles>> =
        std::cell::RefCell::new(HashMap::new());
}

/// Counts one answered request and its time.
pub fn observe(method: &Method, route: &'static str, status: u16, took: Duration) {
    let method = method_label(method);
    SERIES.with(|series| {
        let mut series = series.borrow_mut();
        let (requests, duration) = series.entry((method, route, status)).or_insert_with(|| {
            let labels = [
                metrics::Label::from_static_parts("method", method),
                metrics::Label::from_static_parts("route", route),
                metrics::Label::new("status", status_label(status)),
            ];
            (
                metrics::counter!(HTTP_REQUESTS, labels.iter()),
                metrics::histogram!(HTTP_DURATION, labels.iter()),
            )
        });
        requests.increment(1);
        duration.record(took.as_secs_f64());
    });
}

thread_local! {
    static OUTCOMES: std::cell::RefCell<HashMap<&'static str, metrics::Counter>> =
        std::cell::RefCell::new(HashMap::new());
}

/// Counts one purchase answer by its outcome code.
pub fn purchase_outcome(code: &'static str) {
    OUTCOMES.with(|outcomes| {
        outcomes
            .borrow_mut()
            .entry(code)
            .or_insert_with(|| metrics::counter!(PURCHASE_OUTCOMES, "code" => code))
            .increment(1);
    });
}

/// The help texts of the series above, for the exposition.
pub fn describe() {
    metrics::describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by method, route template and status."
    );
    metrics::describe_histogram!(
        HTTP_DURATION,
        metrics::Unit::Seconds,
        "Time to answer an HTTP request, by method, route template and status."
    );
    metrics::describe_counter!(
        PURCHASE_OUTCOMES,
        "Purchase answers by outcome code: SUCCESS, REPLAYED, or the problem's code."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        for name in ["FOO1", "FOO2", "FOO3"] {
            let method = Method::from_bytes(name.as_bytes()).unwrap_or(Method::GET);
            assert_eq!(method_label(&method), "OTHER");
        }
        assert_eq!(method_label(&Method::POST), "POST");
    }
}
