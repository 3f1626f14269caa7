//! Counting the statements a store sends, for the `db_statements_total` metric (and the tests
//! that pin how many a purchase sends).

use diesel::connection::{Instrumentation, InstrumentationEvent};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Statements sent to the database (the metric).
pub const STATEMENTS: &str = "db_statements_total";

/// An instrumentation that adds one to `counter` (the store's own count) and to
/// `STATEMENTS` for every statement started.
pub fn count_statements(counter: Arc<AtomicU64>) -> impl Instrumentation {
    move |event: InstrumentationEvent<'_>| {
        if let InstrumentationEvent::StartQuery { .. } = event {
            counter.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(STATEMENTS).increment(1);
        }
    }
}
