//! Instants on the wire: RFC 3339 in UTC, as every body and problem writes them.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// `at` as RFC 3339 in UTC; `None` when it has no UTC form in range.
pub fn format(at: OffsetDateTime) -> Option<String> {
    at.checked_to_offset(UtcOffset::UTC)?.format(&Rfc3339).ok()
}
