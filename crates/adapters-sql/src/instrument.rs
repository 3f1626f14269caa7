//! Counting the statements a store sends, for the `db_statements_total` metric (and the test
//! that proves a sold-out rejection sends none).

use diesel::connection::{Instrumentation, InstrumentationEvent};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// An instrumentation that adds one to `counter` for every statement started.
pub fn count_statements(counter: Arc<AtomicU64>) -> impl Instrumentation {
    move |event: InstrumentationEvent<'_>| {
        if let InstrumentationEvent::StartQuery { .. } = event {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}
