//! The per-instance sold-out flag: once the gate says a drop (or one of its sizes) is empty,
//! this instance answers SOLD_OUT for it itself, with no Redis round trip, until units come
//! back to the drop.
//!
//! A replay still wins: raising the flag snapshots the drop's markers (every admitted purchase
//! is in it); a done marker replays locally, an in-progress one asks Redis. The flag drops on a
//! restock message, and after a short expiry in case one was missed.

use goods_domain::ports::ReserveOutcome;
use goods_domain::{DropId, IdempotencyKey, OrderId, Quantity, Sku, UserId};
use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sold-out flags raised (this instance answers SOLD_OUT for a drop on its own) and lowered
/// before their expiry (a restock message: units came back), by `change`.
pub const FLAG_CHANGES: &str = "gate_sold_out_flag_changes_total";

/// A (buyer, key) pair's marker as stored: `{state}|{units}|{lease end or order}[|{sku}]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// `P|qty|lease end[|sku]` (or `P|qty`, written before leases existed: lease end 0).
    InProgress {
        quantity: u32,
        deadline_ms: i64,
        sku: Option<Sku>,
    },
    /// `D|qty|order[|sku]`.
    Done {
        quantity: u32,
        order: OrderId,
        sku: Option<Sku>,
    },
}

impl Marker {
    pub fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.split('|');
        let state = parts.next()?;
        let quantity = parts.next()?.parse().ok()?;
        let last = parts.next();
        let sku = parts
            .next()
            .map(|s| Sku::parse("sku", s))
            .transpose()
            .ok()?;
        if parts.next().is_some() {
            return None;
        }
        match (state, last) {
            ("P", None) => Some(Self::InProgress {
                quantity,
                deadline_ms: 0,
                sku,
            }),
            ("P", Some(deadline)) => Some(Self::InProgress {
                quantity,
                deadline_ms: deadline.parse().ok()?,
                sku,
            }),
            ("D", Some(order)) => Some(Self::Done {
                quantity,
                order: OrderId::parse(order.parse().ok()?).ok()?,
                sku,
            }),
            _ => None,
        }
    }

    /// The marker's form in Redis (as `reserve.lua` and `confirm.lua` write it).
    pub fn stored(&self) -> String {
        let (head, sku) = match self {
            Self::InProgress {
                quantity,
                deadline_ms,
                sku,
            } => (format!("P|{quantity}|{deadline_ms}"), sku),
            Self::Done {
                quantity,
                order,
                sku,
            } => (format!("D|{quantity}|{order}"), sku),
        };
        match sku {
            Some(sku) => format!("{head}|{sku}"),
            None => head,
        }
    }
}

/// Markers by buyer, then by key: looked up with borrowed ids, no string built per request.
pub type Markers = HashMap<UserId, HashMap<String, Marker>>;

enum Flag {
    Loading,
    Ready { until: Instant, markers: Markers },
}

/// A flag's drop and size (`None`: the drop has no sizes).
type FlagKey = (DropId, Option<Sku>);

/// The flags of every drop, or size of a drop, this instance has seen sell out.
pub struct SoldOutFlags {
    flags: RwLock<HashMap<FlagKey, Flag>>,
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
        sku: Option<&Sku>,
        user: UserId,
        key: &IdempotencyKey,
        quantity: Quantity,
    ) -> Option<ReserveOutcome> {
        let flags = self.flags.read().ok()?;
        let Some(Flag::Ready { until, markers }) = flags.get(&(drop, sku.cloned())) else {
            return None;
        };
        if *until <= Instant::now() {
            return None;
        }
        match markers.get(&user).and_then(|keys| keys.get(key.as_str())) {
            None => Some(ReserveOutcome::SoldOut { remaining: 0 }),
            Some(Marker::Done {
                quantity: q,
                order,
                sku: of,
            }) if *q == quantity.get() && of.as_ref() == sku => {
                Some(ReserveOutcome::Replay(*order))
            }
            Some(Marker::Done { .. }) => Some(ReserveOutcome::KeyReused),
            Some(Marker::InProgress { .. }) => None,
        }
    }

    /// Whether a fresh flag is up for `drop`'s size `sku`.
    pub fn is_raised(&self, drop: DropId, sku: Option<&Sku>) -> bool {
        self.flags.read().is_ok_and(|flags| {
            matches!(flags.get(&(drop, sku.cloned())), Some(Flag::Ready { until, .. }) if *until > Instant::now())
        })
    }

    /// Claims the loading of a snapshot for `drop`'s size `sku`; `Some(epoch)` when the caller
    /// should load one (nobody else is, and no fresh flag is up).
    pub fn begin_loading(&self, drop: DropId, sku: Option<&Sku>) -> Option<u64> {
        let mut flags = self.flags.write().ok()?;
        let key = (drop, sku.cloned());
        let fresh = match flags.get(&key) {
            Some(Flag::Loading) => true,
            Some(Flag::Ready { until, .. }) => *until > Instant::now(),
            None => false,
        };
        if fresh {
            return None;
        }
        flags.insert(key, Flag::Loading);
        Some(self.epoch.load(Ordering::SeqCst))
    }

    /// Raises the flag of `drop`'s size `sku` with a snapshot, unless a restock came since the
    /// loading began.
    pub fn install(&self, drop: DropId, sku: Option<Sku>, epoch: u64, markers: Markers) {
        if let Ok(mut flags) = self.flags.write() {
            if self.epoch.load(Ordering::SeqCst) == epoch {
                let until = Instant::now() + self.ttl;
                flags.insert((drop, sku), Flag::Ready { until, markers });
                metrics::counter!(FLAG_CHANGES, "change" => "raised").increment(1);
            } else {
                flags.remove(&(drop, sku));
            }
        }
    }

    /// Drops the flags of every size of `drop` (a loading that failed, or units came back).
    pub fn clear(&self, drop: DropId) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut flags) = self.flags.write() {
            let now = Instant::now();
            let mut lowered = 0u64;
            flags.retain(|(of, _), flag| {
                if *of != drop {
                    return true;
                }
                if matches!(flag, Flag::Ready { until, .. } if *until > now) {
                    lowered += 1;
                }
                false
            });
            if lowered > 0 {
                metrics::counter!(FLAG_CHANGES, "change" => "lowered").increment(lowered);
            }
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
                deadline_ms: 1_700_000_000_123,
                sku: None
            })
        );
        assert_eq!(
            Marker::parse("P|2"),
            Some(Marker::InProgress {
                quantity: 2,
                deadline_ms: 0,
                sku: None
            })
        );
        assert_eq!(
            Marker::parse("D|1|77"),
            Some(Marker::Done {
                quantity: 1,
                order: OrderId::parse(77).unwrap(),
                sku: None
            })
        );
        assert_eq!(Marker::parse("0"), None);
        assert_eq!(Marker::parse("X|1"), None);
    }

    #[test]
    fn a_marker_of_a_size_carries_its_sku_and_is_stored_as_it_was_read() {
        let sku = Sku::parse("sku", "US-9.5_W").unwrap();
        for (raw, marker) in [
            (
                "P|2|1700000000123|US-9.5_W",
                Marker::InProgress {
                    quantity: 2,
                    deadline_ms: 1_700_000_000_123,
                    sku: Some(sku.clone()),
                },
            ),
            (
                "D|1|77|US-9.5_W",
                Marker::Done {
                    quantity: 1,
                    order: OrderId::parse(77).unwrap(),
                    sku: Some(sku.clone()),
                },
            ),
            (
                "D|1|77",
                Marker::Done {
                    quantity: 1,
                    order: OrderId::parse(77).unwrap(),
                    sku: None,
                },
            ),
        ] {
            assert_eq!(Marker::parse(raw), Some(marker.clone()), "{raw}");
            assert_eq!(marker.stored(), raw);
        }
        assert_eq!(Marker::parse("D|1|77|US 9"), None, "not a sku");
        assert_eq!(Marker::parse("D|1|77|US-9|x"), None, "a fifth part");
    }

    #[test]
    fn a_sold_out_size_answers_for_itself_only() {
        let (nine, ten) = (
            Sku::parse("sku", "US-9").ok(),
            Sku::parse("sku", "US-10").ok(),
        );
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        let epoch = flags.begin_loading(drop_id(), nine.as_ref()).unwrap();
        let done = Marker::Done {
            quantity: 1,
            order: OrderId::parse(5).unwrap(),
            sku: nine.clone(),
        };
        let markers = HashMap::from([(user(7), HashMap::from([("a".to_owned(), done)]))]);
        flags.install(drop_id(), nine.clone(), epoch, markers);
        assert!(flags.is_raised(drop_id(), nine.as_ref()));
        assert!(!flags.is_raised(drop_id(), ten.as_ref()));
        assert!(!flags.is_raised(drop_id(), None));
        assert_eq!(
            flags.answer(drop_id(), nine.as_ref(), user(9), &key("c"), one()),
            Some(ReserveOutcome::SoldOut { remaining: 0 })
        );
        assert_eq!(
            flags.answer(drop_id(), ten.as_ref(), user(9), &key("c"), one()),
            None,
            "another size asks Redis"
        );
        assert_eq!(
            flags.answer(drop_id(), nine.as_ref(), user(7), &key("a"), one()),
            Some(ReserveOutcome::Replay(OrderId::parse(5).unwrap()))
        );
        flags.clear(drop_id());
        assert!(
            !flags.is_raised(drop_id(), nine.as_ref()),
            "units back to the drop lower its sizes' flags"
        );
    }

    #[test]
    fn a_raised_flag_answers_sold_out_replays_done_markers_and_defers_in_progress_ones() {
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        assert_eq!(
            flags.answer(drop_id(), None, user(7), &key("a"), one()),
            None
        );
        let epoch = flags.begin_loading(drop_id(), None).unwrap();
        assert_eq!(
            flags.begin_loading(drop_id(), None),
            None,
            "one loader at a time"
        );
        let done = Marker::Done {
            quantity: 1,
            order: OrderId::parse(5).unwrap(),
            sku: None,
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
                        sku: None,
                    },
                )]),
            ),
        ]);
        flags.install(drop_id(), None, epoch, markers);
        assert_eq!(
            flags.answer(drop_id(), None, user(9), &key("c"), one()),
            Some(ReserveOutcome::SoldOut { remaining: 0 })
        );
        assert_eq!(
            flags.answer(drop_id(), None, user(7), &key("a"), one()),
            Some(ReserveOutcome::Replay(OrderId::parse(5).unwrap()))
        );
        assert_eq!(
            flags.answer(drop_id(), None, user(8), &key("b"), one()),
            None
        );
        flags.clear(drop_id());
        assert_eq!(
            flags.answer(drop_id(), None, user(9), &key("c"), one()),
            None
        );
    }

    #[test]
    fn a_snapshot_begun_before_a_restock_is_not_installed() {
        let flags = SoldOutFlags::new(Duration::from_secs(60));
        let epoch = flags.begin_loading(drop_id(), None).unwrap();
        flags.clear(drop_id());
        flags.install(drop_id(), None, epoch, HashMap::new());
        assert_eq!(
            flags.answer(drop_id(), None, user(9), &key("c"), one()),
            None
        );
    }

    #[test]
    fn a_flag_expires() {
        let flags = SoldOutFlags::new(Duration::ZERO);
        let epoch = flags.begin_loading(drop_id(), None).unwrap();
        flags.install(drop_id(), None, epoch, HashMap::new());
        assert_eq!(
            flags.answer(drop_id(), None, user(9), &key("c"), one()),
            None
        );
    }
}
