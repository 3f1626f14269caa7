//! The use cases' metrics (help texts in [`describe`]; docs/observability.md has labels and
//! alerts). Labels are fixed sets, except `drop_id` on the drift gauge, bounded by open drops.

pub const ADMISSION_TO_COMMIT: &str = "purchase_admission_to_commit_seconds";
pub const GATE_DECISION: &str = "gate_decision_seconds";
pub const GATE_FALLBACKS: &str = "gate_fallbacks_total";
pub const GATE_MARKER_MISMATCHES: &str = "gate_marker_mismatches_total";
pub const RATE_LIMITED: &str = "rate_limited_total";
pub const RATE_LIMIT_FALLBACKS: &str = "rate_limit_fallbacks_total";
pub const GATE_DEGRADED_EVENTS: &str = "gate_degraded_events_total";
pub const GATE_DEGRADED: &str = "gate_degraded";
pub const GATE_RESYNCS: &str = "gate_resyncs_total";
pub const STALE_RESOLVED: &str = "stale_reservations_resolved_total";
pub const WRITE_SLOTS_AVAILABLE: &str = "db_write_slots_available";
pub const WRITE_SLOTS_IN_USE: &str = "db_write_slots_in_use";
pub const WRITE_WAITERS: &str = "db_write_waiters";
pub const WRITE_WAIT: &str = "db_write_wait_seconds";
pub const DRIFT: &str = "reconcile_drift";
pub const GATE_REMAINING: &str = "gate_remaining_units";
pub const LAST_PASS: &str = "reconcile_last_success_timestamp_seconds";
pub const OVERSELLS: &str = "oversell_events_total";
pub const GATE_OVERSELLS: &str = "gate_oversell_events_total";
pub const DROP_OPERATIONS: &str = "drop_operations_total";
pub const FLAG_CHANGES: &str = "flag_changes_total";
pub const GLOBAL_PERMITS_HELD: &str = "db_write_permits_global_held";
pub const BUDGET_EXHAUSTED: &str = "db_write_budget_exhausted_total";
pub const BUDGET_BYPASSED: &str = "db_write_budget_bypassed_total";
pub const BACKGROUND_LEADER: &str = "background_leader";
pub const ORDER_TRANSITIONS: &str = "order_transitions_total";
pub const PAYMENT_EVENTS: &str = "payment_events_total";
pub const DRAW_ENTRIES: &str = "draw_entries_total";
pub const DRAW_DURATION: &str = "draw_duration_seconds";
pub const DRAW_AWARDS: &str = "draw_awards_total";
pub const DRAW_VOIDED: &str = "draw_entries_voided_total";
pub const DRAW_OVERDUE: &str = "draw_overdue_seconds";
pub const EVENTS_PENDING: &str = "events_outbox_pending";
pub const EVENTS_OLDEST_AGE: &str = "events_outbox_oldest_age_seconds";
pub const EVENTS_PUBLISHED: &str = "events_published_total";
pub const EVENTS_PUBLISH_FAILURES: &str = "events_publish_failures_total";
pub const EVENTS_IMPOSTORS: &str = "events_impostors_total";
pub const WEBHOOK_DELIVERIES: &str = "webhook_deliveries_total";
pub const WEBHOOK_PENDING: &str = "webhook_pending";
pub const WEBHOOK_OLDEST_PENDING_AGE: &str = "webhook_oldest_pending_age_seconds";
pub const WEBHOOK_ENDPOINTS_DISABLED: &str = "webhook_endpoints_disabled_total";

thread_local! {
    static DECISIONS: std::cell::RefCell<Vec<(&'static str, metrics::Histogram)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Records one gate decision's time. Every purchase that reaches the gate records one, sold-out
/// refusals included, so the handle is kept per thread rather than looked up each time.
pub(crate) fn gate_decision(result: &'static str, took: std::time::Duration) {
    DECISIONS.with(|cached| {
        let mut cached = cached.borrow_mut();
        let index = match cached.iter().position(|(r, _)| *r == result) {
            Some(index) => index,
            None => {
                cached.push((
                    result,
                    metrics::histogram!(GATE_DECISION, "result" => result),
                ));
                cached.len() - 1
            }
        };
        cached[index].1.record(took.as_secs_f64());
    });
}

/// Every metric name above, for the check that dashboards and rules use only these.
pub const NAMES: &[&str] = &[
    ADMISSION_TO_COMMIT,
    GATE_DECISION,
    GATE_FALLBACKS,
    GATE_DEGRADED_EVENTS,
    GATE_DEGRADED,
    GATE_RESYNCS,
    STALE_RESOLVED,
    WRITE_SLOTS_AVAILABLE,
    WRITE_SLOTS_IN_USE,
    WRITE_WAITERS,
    WRITE_WAIT,
    DRIFT,
    GATE_REMAINING,
    LAST_PASS,
    OVERSELLS,
    GATE_OVERSELLS,
    DROP_OPERATIONS,
    FLAG_CHANGES,
    ORDER_TRANSITIONS,
    PAYMENT_EVENTS,
    BACKGROUND_LEADER,
    GLOBAL_PERMITS_HELD,
    BUDGET_EXHAUSTED,
    BUDGET_BYPASSED,
    DRAW_ENTRIES,
    DRAW_DURATION,
    DRAW_AWARDS,
    DRAW_VOIDED,
    DRAW_OVERDUE,
    EVENTS_PENDING,
    EVENTS_OLDEST_AGE,
    EVENTS_PUBLISHED,
    EVENTS_PUBLISH_FAILURES,
    EVENTS_IMPOSTORS,
];

/// The help texts, for the exposition; and the counters alerts watch, exported at zero from the
/// start: a counter that first appears at 1 has no increase Prometheus can see, so the first
/// oversell or refund would never alert.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    metrics::counter!(OVERSELLS).increment(0);
    metrics::counter!(GATE_OVERSELLS).increment(0);
    for outcome in goods_domain::PaymentOutcome::ALL {
        metrics::counter!(PAYMENT_EVENTS, "outcome" => outcome.as_str()).increment(0);
    }
    for by in ["draw", "promotion"] {
        metrics::counter!(DRAW_AWARDS, "by" => by).increment(0);
    }
    metrics::counter!(DRAW_VOIDED).increment(0);
    metrics::gauge!(DRAW_OVERDUE).set(0.0);
    metrics::counter!(EVENTS_PUBLISH_FAILURES).increment(0);
    metrics::counter!(EVENTS_IMPOSTORS).increment(0);
    describe_gauge!(
        EVENTS_PENDING,
        "Events written but not yet acknowledged by the broker (with EVENTS_URL set)."
    );
    describe_gauge!(
        EVENTS_OLDEST_AGE,
        Unit::Seconds,
        "Age of the oldest event the broker has not acknowledged; 0 when none waits."
    );
    describe_counter!(EVENTS_PUBLISHED, "Events the broker acknowledged, by type.");
    describe_counter!(
        EVENTS_PUBLISH_FAILURES,
        "Publications that failed; the drop's events wait for the next round, in order."
    );
    describe_counter!(
        EVENTS_IMPOSTORS,
        "Events the broker called repeats while it held another message under their id (not delivered; tried again)."
    );
    describe_counter!(
        WEBHOOK_DELIVERIES,
        "Webhook delivery attempts, by outcome: delivered (a 2xx), retried (failed, tried again later), failed (no retry left)."
    );
    describe_gauge!(
        WEBHOOK_PENDING,
        "Webhook deliveries PENDING (due now or waiting for their next attempt); set every 5 s by the instance holding the webhooks lease."
    );
    describe_gauge!(
        WEBHOOK_OLDEST_PENDING_AGE,
        Unit::Seconds,
        "How long the delivery due the longest (to an enabled endpoint) has been due; 0 when none is. Grows when no instance delivers."
    );
    describe_counter!(
        WEBHOOK_ENDPOINTS_DISABLED,
        "Webhook endpoints disabled because every delivery failed for WEBHOOK_DISABLE_AFTER_S."
    );
    describe_counter!(DRAW_ENTRIES, "Draw entries answered, by outcome.");
    describe_counter!(
        DRAW_VOIDED,
        "Draw entries whose award was refused (VOID); each unit went to the next entry by rank."
    );
    describe_gauge!(
        DRAW_OVERDUE,
        Unit::Seconds,
        "Seconds since the entries of the most overdue undrawn draw closed; 0 when none is due."
    );
    describe_histogram!(
        DRAW_DURATION,
        Unit::Seconds,
        "Time a draw took, from closing the entries to revealing the seed."
    );
    describe_counter!(
        DRAW_AWARDS,
        "Units given by draws, by who got them (draw: a winner; promotion: a waitlisted entry)."
    );
    describe_histogram!(
        ADMISSION_TO_COMMIT,
        Unit::Seconds,
        "Time from a purchase's admission to its order's commit."
    );
    describe_histogram!(
        GATE_DECISION,
        Unit::Seconds,
        "Time the admission gate took to decide a reservation, by result."
    );
    describe_gauge!(
        GLOBAL_PERMITS_HELD,
        "Permits of the fleet's write budget held (by every instance) at this instance's last take."
    );
    describe_counter!(
        BUDGET_EXHAUSTED,
        "Purchase batches refused THROTTLED for want of a global write permit."
    );
    describe_counter!(
        BUDGET_BYPASSED,
        "Purchase transactions run without a global permit because the budget's store did not answer."
    );
    describe_gauge!(
        BACKGROUND_LEADER,
        "1 on the instance that runs the background work now (it holds the lease), 0 elsewhere."
    );
    describe_counter!(
        ORDER_TRANSITIONS,
        "Orders that left PENDING, by the state they went to (PAID, CANCELLED, EXPIRED)."
    );
    describe_counter!(
        PAYMENT_EVENTS,
        "Payment provider events applied, by outcome (PAID, ALREADY_PAID, REFUND_REQUIRED, AMOUNT_MISMATCH, FAILED_RECORDED, ORDER_NOT_FOUND)."
    );
    describe_counter!(
        FLAG_CHANGES,
        "Runtime flags set by admins, by flag and new value."
    );
    describe_counter!(
        DROP_OPERATIONS,
        "Drops paused, resumed or closed by a seller or an admin, by operation."
    );
    describe_counter!(
        GATE_FALLBACKS,
        "Purchases decided by the database alone although a gate is configured, by reason."
    );
    describe_counter!(
        GATE_MARKER_MISMATCHES,
        "Gate markers naming an order that does not answer their request; the database answered."
    );
    describe_counter!(
        RATE_LIMITED,
        "Requests refused by a token bucket (429 RATE_LIMITED), by policy and layer."
    );
    describe_counter!(
        RATE_LIMIT_FALLBACKS,
        "Buyer requests the fleet's token buckets could not count; this instance's decided."
    );
    describe_counter!(
        GATE_DEGRADED_EVENTS,
        "Times the gate was found failing after it worked (gate_degraded events)."
    );
    describe_gauge!(
        GATE_DEGRADED,
        "1 while purchases bypass the failing gate (its breaker is open), else 0."
    );
    describe_counter!(
        GATE_RESYNCS,
        "Drops whose gate was rebuilt from the database."
    );
    describe_counter!(
        STALE_RESOLVED,
        "Stale reservations decided against the database, by resolution."
    );
    describe_gauge!(
        WRITE_SLOTS_AVAILABLE,
        "Free database write slots of this instance's buffer."
    );
    describe_gauge!(
        WRITE_SLOTS_IN_USE,
        "Database write slots held by purchases."
    );
    describe_gauge!(
        WRITE_WAITERS,
        "Purchases waiting for a database write slot."
    );
    describe_histogram!(
        WRITE_WAIT,
        Unit::Seconds,
        "Time a purchase waited for a database write slot."
    );
    describe_gauge!(
        DRIFT,
        "limitedQuantity - sold - gate remaining of an open drop, at the last healing pass."
    );
    describe_gauge!(
        GATE_REMAINING,
        "Units the gate still admits for an open drop, at the last healing pass."
    );
    describe_gauge!(
        LAST_PASS,
        "Unix time at which the last healing and reconciliation pass finished."
    );
    describe_counter!(OVERSELLS, "Oversold drops recorded (once per drop).");
    describe_counter!(
        GATE_OVERSELLS,
        "Times the gate admitted more than the database can still sell (negative drift), each resynced."
    );
}
