//! Self-healing: the gate converges back to the database after any single fault.
//!
//! - **Stale reservations**: a marker past its lease is resolved by the database (its order
//!   exists: done; it never can: the units go back).
//! - **Resync** ([`AdmissionGate::resync`]): the gate rebuilt from the database, keeping what is
//!   in flight, when it answers again after an outage, when the database refuses what it
//!   admitted, when it holds nothing for an open drop, or on drift seen on two passes (or any
//!   negative drift).
//! - **The pass** ([`GoodsApp::heal_all`]): all of that for every open or recently closed drop,
//!   one drop's failure never stopping the others, then the outbox's relay.
//!
//! Every step is idempotent and safe from every instance at once: the database decides, a racing
//! resync can only hold units back, and the oversell event is recorded once by its unique key.
//!
//! [`AdmissionGate::resync`]: goods_domain::ports::AdmissionGate::resync

pub mod background;
mod draws;
mod pass;
mod resync;

use goods_domain::DropId;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// How long after `closeAt` a drop is still healed (its in-flight purchases settle).
const CLOSED_GRACE: time::Duration = time::Duration::hours(1);

/// How often the draws' schedule runs: a draw or a promotion is due at most this long before
/// it starts (the contract promises 10 s; a lease handover adds at most three ticks).
pub const DRAW_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Events relayed from the outbox per pass.
const RELAY_BATCH: u32 = 100;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealReport {
    pub drops: usize,
    /// Drops whose healing failed (logged; the next pass tries again).
    pub failed: usize,
    /// Stale reservations decided (confirmed or given back).
    pub stale_resolved: usize,
    /// Gates rebuilt or seeded from the database.
    pub resynced: usize,
    /// Outbox events handed to the publisher.
    pub relayed: usize,
    /// Orders expired unpaid by this pass.
    pub expired: usize,
    /// Draws done by this pass.
    pub draws: usize,
    /// Waitlisted entries given a unit by this pass.
    pub promoted: u32,
    /// Events deleted past their retention.
    pub pruned: u64,
}

#[derive(Debug, Default)]
pub(crate) struct HealState {
    /// Drops the database sold while the gate was bypassed: resynced when it answers again.
    dirty: Mutex<HashSet<DropId>>,
    /// Drops being resynced right now (single flight within the instance).
    resyncing: Arc<Mutex<HashSet<DropId>>>,
    /// The drift each drop showed on the previous pass.
    drift: Mutex<HashMap<DropId, i64>>,
    /// The draw drops that were unclosed when this instance started are held (read once, at
    /// the first tick of the draws' schedule).
    draws_held: std::sync::atomic::AtomicBool,
    /// Drops this instance announced `goods.gate.degraded` for and not yet recovered; held
    /// across the event's write, so a drop's recovery is written after its degradation.
    degraded: tokio::sync::Mutex<HashSet<DropId>>,
}

impl HealState {
    pub(crate) fn mark_dirty(&self, drop: DropId) {
        if let Ok(mut dirty) = self.dirty.lock() {
            dirty.insert(drop);
        }
    }

    fn take_dirty(&self) -> Vec<DropId> {
        self.dirty
            .lock()
            .map(|mut d| d.drain().collect())
            .unwrap_or_default()
    }

    /// Claims the drop's resync; `None` when one is already running here.
    fn claim(&self, drop: DropId) -> Option<ResyncClaim> {
        let mut running = self.resyncing.lock().ok()?;
        running.insert(drop).then(|| ResyncClaim {
            running: Arc::clone(&self.resyncing),
            drop,
        })
    }

    /// Records this pass's drift; whether the drop needs a resync: negative drift at once,
    /// positive drift when it is the same as on the previous pass.
    fn drift_calls_for_resync(&self, drop: DropId, drift: i64) -> bool {
        let Ok(mut last) = self.drift.lock() else {
            return drift < 0;
        };
        if drift == 0 {
            last.remove(&drop);
            return false;
        }
        let previous = last.insert(drop, drift);
        drift < 0 || previous == Some(drift)
    }

    fn forget_drift(&self, drop: DropId) {
        if let Ok(mut last) = self.drift.lock() {
            last.remove(&drop);
        }
    }
}

struct ResyncClaim {
    running: Arc<Mutex<HashSet<DropId>>>,
    drop: DropId,
}

impl Drop for ResyncClaim {
    fn drop(&mut self) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(&self.drop);
        }
    }
}
