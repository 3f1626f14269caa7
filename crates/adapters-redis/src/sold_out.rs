//! The per-instance sold-out flag: once the gate says a drop is empty, this instance answers
//! SOLD_OUT itself, with no Redis round trip, until units come back.
//!
//! A replay still wins: raising the flag snapshots the drop's markers (every admitted purchase
//! is in it); a done marker replays locally, an in-progress one asks Redis. The flag drops on a
//! restock message, and after a short expiry in case one was missed.

use goods_domain::ports::ReserveOutcome;
use goods_domain::{DropId, IdempotencyKey, OrderId, Quantity, UserId};
use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sold-out flags raised (this instance answers SOLD_OUT for a drop on its own) and lowered
/// before their expiry (a restock message: units came back), by `change`.
pub const FLAG_CHANGES: &str = "gate_sold_out_flag_changes_total";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// `P|qty|lease end` (or `P|qty`, written before leases existed: lease end 0).
    InProgress { quantity: u32, deadline_ms: i64 },
    /// `D|qty|order`.
    Done { quantity: u32, order: OrderId },
}

impl Marker {
    pub fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.split('|');
        let state = parts.next()?;
        let quantity = parts.next()?.parse().ok()?;
        match (state, parts.next()) {
            ("P", None) => Some(Self::InProgress {
                quantity,
                deadline_ms: 0,
            }),
            ("P", Some(deadline)) => Some(Self::InProgress {
                quantity,
                deadline_ms: deadline.parse().ok()?,
            }),
            ("D", Some(order)) => Some(Self::Done {
                quantity,
                order: OrderId::parse(order.parse().ok()?).ok()?,
            }),
            _ => None,
        }
    }
}

/// Markers by buyer, then by key: looked up with borrowed ids, no string built per request.
pub type Markers = HashMap<UserId, HashMap<String, Marker>>;

enum Flag {
    Loading,
    Ready { until: Instant, markers: Markers },
}

/// The flags of every drop this instance has seen sell out.
pub struct SoldOutFlags {
    flags: RwLock<HashMap<DropId, Flag>>,
    /// Bumped by every clear, so a snapshot that started before a restock is not installed
    /// after it.
    epoch: AtomicU64,
    ttl: Duration,
}

impl SoldOutFlags {
    /// Flags that expire after `ttl` at the latest.
    pub fn new(ttl: Duration) -> Self {
        Self {
            flags: RwLock::default(),
            epoch: AtomicU64::new(0),
            ttl,
        }
    }

    /// The local answer for this request, or `None` when Redis must be asked.
    pub fn answer(
        &self,
        drop: DropId,
        user: UserId,
        key: &IdempotencyKey,
        quantity: Quantity,
    ) -> Option<ReserveOutcome> {
        let flags = self.flags.read().ok()?;
        let Some(Flag::Ready { until, markers }) = flags.get(&drop) else {
            return None;
        };
        if *until <= Instant::now() {
            return None;
        }
        match markers.get(&user).and_then(|keys| keys.get(key.as_str())) {
            None => Some(ReserveOutcome::SoldOut { remaining: 0 }),
            Some(Marker::Done { quantity: q, order }) if *q == quantity.get() => {
                Some(ReserveOutcome::Replay(*order))
            }
            Some(Marker::Done { .. }) => Some(ReserveOutcome::KeyReused),
            Some(Marker::InProgress { .. }) => None,
        }
    }

    /// Whether a fresh flag is up for `drop`.
    pub fn is_raised(&self, drop: DropId) -> bool {
        self.flags.read().is_ok_and(|flags| {
            matches!(flags.get(&drop), Some(Flag::Ready { until, .. }) if *until > Instant::now())
        })
    }

    /// Claims the loading of a snapshot for `drop`; `Some(epoch)` when the caller should load
    /// one (nobody else is, and no fresh flag is up).
    pub fn begin_loading(&self, drop: DropId) -> Option<u64> {
        let mut flags = self.flags.write().ok()?;
        let fresh = match flags.get(&drop) {
            Some(Flag::Loading) => true,
            Some(Flag::Ready { until, .. }) => *until > Instant::now(),
            None => false,
        };
        if fresh {
            return None;
        }
        flags.insert(drop, Flag::Loading);
        Some(self.epoch.load(Ordering::SeqCst))
    }

    /// Raises the flag with a snapshot, unless a restock came since the loading began.
    pub fn install(&self, drop: DropId, epoch: u64, markers: Markers) {
        if let Ok(mut flags) = self.flags.write() {
            if self.epoch.load(Ordering::SeqCst) == epoch {
                let until = Instant::now() + self.ttl;
                flags.insert(drop, Flag::Ready { until, markers });
                metrics::counter!(FLAG_CHANGES, "change" => "raised").increment(1);
            } else {
                flags.remove(&drop);
            }
        }
    }

    /// Drops the flag (a loading that failed, or units came back).
    pub fn clear(&self, drop: DropId) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut flags) = self.flags.write()
            && let Some(Flag::Ready { until, .. }) = flags.remove(&drop)
            && until > Instant::now()
        {
            metrics::counter!(FLAG_CHANGES, "change" => "lowered").increment(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_id() -> DropId {
        DropId::parse(1).unwrap()
    }

    fn user(id: i64) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn key(k: &str) -> IdempotencyKey {
        IdempotencyKey::parse(k).unwrap()
    }

    fn one() -> Quantity {
        Quantity::parse("quantity", 1).unwrap()
    }

    #[test]
    fn markers_parse_from_their_stored_form() {
        assert_eq!(
            Marker::parse("P|2|1700000000123"),
            Some(Marker::InProgress {
                quantity: 2,
                deadline_ms: 1_700_000_000_123
            })
        );
        assert_eq!(
            Marker::parse("P|2"),
            Some(Marker::InProgress {
                quantity: 2,
                deadline_ms: 0
            })
        );
        assert_eq!(
            Marker::parse("D|1|77"),
            Some(Marker::Done {
                quantity: 1,
                order: OrderId::parse(77).unwrap()
            })
        );
        assert_eq!(Marker::parse("0"), None);
        assert_eq!(Marker::parse("X|1"), None);
    }

    #[test]
    fn a_raised_flag_answers_sold_out_replays_done_markers_and_defers_in_progress_ones() {
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        assert_eq!(flags.answer(drop_id(), user(7), &key("a"), one()), None);
        let epoch = flags.begin_loading(drop_id()).unwrap();
        assert_eq!(flags.begin_loading(drop_id()), None, "one loader at a time");
        let done = Marker::Done {
            quantity: 1,
            order: OrderId::parse(5).unwrap(),
        };
        let markers = HashMap::from([
            (user(7), HashMap::from([("a".to_owned(), done)])),
            (
                user(8),
                HashMap::from([(
                    "b".to_owned(),
                    Marker::InProgress {
                        quantity: 1,
                        deadline_ms: 0,
                    },
                )]),
            ),
        ]);
        flags.install(drop_id(), epoch, markers);
        assert_eq!(
            flags.answer(drop_id(), user(9), &key("c"), one()),
            Some(ReserveOutcome::SoldOut { remaining: 0 })
        );
        assert_eq!(
            flags.answer(drop_id(), user(7), &key("a"), one()),
            Some(ReserveOutcome::Replay(OrderId::parse(5).unwrap()))
        );
        assert_eq!(flags.answer(drop_id(), user(8), &key("b"), one()), None);
        flags.clear(drop_id());
        assert_eq!(flags.answer(drop_id(), user(9), &key("c"), one()), None);
    }

    #[test]
    fn a_snapshot_begun_before_a_restock_is_not_installed() {
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        let epoch = flags.begin_loading(drop_id()).unwrap();
        flags.clear(drop_id());
        flags.install(drop_id(), epoch, HashMap::new());
        assert_eq!(flags.answer(drop_id(), user(9), &key("c"), one()), None);
    }

    #[test]
    fn a_flag_expires() {
        let flags = SoldOutFlags::new(Duration::ZERO);
        let epoch = flags.begin_loading(drop_id()).unwrap();
        flags.install(drop_id(), epoch, HashMap::new());
        assert_eq!(flags.answer(drop_id(), user(9), &key("c"), one()), None);
    }
}
