//! Runtime feature flags: read and set by admins, kept in the source of truth, cached by every
//! instance and re-read with the drops (`GoodsApp::refresh`), so a change reaches the fleet
//! within the refresh period.

use crate::{Actor, GoodsApp, Role, telemetry};
use goods_domain::InfraError;
use goods_domain::ports::{Clock, DomainEvent, EventPublisher, Flag, FlagName, FlagStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// This instance's view of the flags. Both start on (their default) until the first read.
#[derive(Debug)]
pub(crate) struct FlagCache {
    drops: AtomicBool,
    gate: AtomicBool,
    /// Bumped by every change made through this instance, so a refresh that read the store
    /// before it does not put the old value back.
    epoch: AtomicU64,
}

impl Default for FlagCache {
    fn default() -> Self {
        Self {
            drops: AtomicBool::new(true),
            gate: AtomicBool::new(true),
            epoch: AtomicU64::new(0),
        }
    }
}

impl FlagCache {
    /// `limited-drop.enabled`.
    pub(crate) fn drops_on(&self) -> bool {
        self.drops.load(Ordering::Relaxed)
    }

    /// `limited-drop.redis-gate.enabled`, as applied (on only once the gate was resynced).
    pub(crate) fn gate_on(&self) -> bool {
        self.gate.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn set_drops_on(&self, on: bool) {
        self.drops.store(on, Ordering::Relaxed);
    }
}

/// Why a flag could not be read or set.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    /// Only admins read and set flags.
    #[error("only admins may read or set flags")]
    Forbidden,
    /// No flag has this name.
    #[error("no such flag")]
    NotFound,
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Every flag: the stored ones, and the defaults of those never set.
fn complete(stored: Vec<Flag>) -> Vec<Flag> {
    FlagName::ALL
        .into_iter()
        .map(|name| {
            stored
                .iter()
                .find(|f| f.name == name)
                .copied()
                .unwrap_or_else(|| Flag::default_of(name))
        })
        .collect()
}

/// What a flag change needs from the core.
#[cfg_attr(test, mockall::automock)]
#[async_trait::async_trait]
pub(crate) trait FlagHooks: Send + Sync {
    /// Resyncs the gate of every drop this instance serves that is still on sale; `false`
    /// if one failed.
    async fn resync_served_drops(&self) -> bool;
    /// Tells the other instances, in the background, that a flag changed.
    fn announce_change(&self);
}

/// Runtime flags, stored, cached here and applied.
#[derive(Clone)]
pub struct Flags {
    store: Arc<dyn FlagStore>,
    events: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    cache: Arc<FlagCache>,
    /// Whether a gate is configured; without one the gate flag applies with nothing to resync.
    gated: bool,
    core: Arc<dyn FlagHooks>,
}

impl GoodsApp {
    /// The runtime flags (`/admin/flags`, the refresh loop, `FLAGS_AT_FIRST_START`).
    pub fn flags(&self) -> Flags {
        Flags {
            store: Arc::clone(&self.ports.flags),
            events: Arc::clone(&self.ports.events),
            clock: Arc::clone(&self.ports.clock),
            cache: Arc::clone(&self.flags_cache),
            gated: self.ports.gate.is_some(),
            core: Arc::new(self.clone()),
        }
    }
}

#[async_trait::async_trait]
impl FlagHooks for GoodsApp {
    async fn resync_served_drops(&self) -> bool {
        let now = self.ports.clock.now();
        let drops = self.drops.cached();
        let mut all = true;
        for drop in drops.into_iter().filter(|d| !d.is_closed(now)) {
            // Another resync of the drop running here (the refresh loop applying the same flip)
            // is waited for, then this one runs: the flag's caller gets its answer once the
            // gate is resynced, not while the other resync is still under way.
            let mut waits = 0;
            loop {
                match self.resync_drop(&drop).await {
                    Ok(true) => break,
                    Ok(false) if waits < 100 => {
                        waits += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                    Ok(false) => {
                        all = false;
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(drop.id = %drop.id, error = %error, "gate resync before re-enabling failed");
                        all = false;
                        break;
                    }
                }
            }
        }
        all
    }

    fn announce_change(&self) {
        GoodsApp::announce_change(self);
    }
}

impl Flags {
    /// Every flag with its value and its last change (admins only).
    pub async fn list(&self, actor: Actor) -> Result<Vec<Flag>, FlagError> {
        if actor.role != Role::Admin {
            return Err(FlagError::Forbidden);
        }
        Ok(complete(self.store.flags().await?))
    }

    /// Sets the flag `name` (admins only), applies it here at once, and records the change as
    /// an event naming the admin and in `flag_changes_total`.
    #[tracing::instrument(skip_all, fields(flag = name, enabled))]
    pub async fn set(&self, name: &str, enabled: bool, actor: Actor) -> Result<Flag, FlagError> {
        if actor.role != Role::Admin {
            return Err(FlagError::Forbidden);
        }
        let name = FlagName::parse(name).ok_or(FlagError::NotFound)?;
        let now = self.clock.now();
        let flag = self
            .store
            .set_flag(name, enabled, actor.user_id, now)
            .await?;
        self.cache.epoch.fetch_add(1, Ordering::SeqCst);
        self.apply(name, enabled).await;
        self.core.announce_change();
        metrics::counter!(
            telemetry::FLAG_CHANGES,
            "flag" => name.as_str(),
            "enabled" => if enabled { "true" } else { "false" }
        )
        .increment(1);
        let event = DomainEvent::FlagSet {
            name,
            enabled,
            by: actor.user_id,
        };
        if let Err(error) = self.events.publish(event).await {
            tracing::warn!(error = %error, "flag change event not published");
        }
        Ok(flag)
    }

    /// Ships the release dark (`FLAGS_AT_FIRST_START=off`): every flag never set is set off; one
    /// set before keeps its value, so a restart does not undo an admin's switch.
    pub async fn ship_dark(&self) -> Result<(), InfraError> {
        let now = self.clock.now();
        for name in FlagName::ALL {
            let flag = self.store.set_flag_if_unset(name, false, now).await?;
            tracing::info!(
                flag = name.as_str(),
                enabled = flag.enabled,
                "flag at first start"
            );
        }
        self.refresh().await
    }

    /// Re-reads the flags from the store and applies them (the refresh loop calls it).
    pub async fn refresh(&self) -> Result<(), InfraError> {
        let epoch = self.cache.epoch.load(Ordering::SeqCst);
        let flags = complete(self.store.flags().await?);
        for flag in flags {
            // A change made here while the store was being read is newer than what was read.
            if self.cache.epoch.load(Ordering::SeqCst) != epoch {
                break;
            }
            self.apply(flag.name, flag.enabled).await;
        }
        Ok(())
    }

    /// Applies one flag here. The gate comes back on only after every served drop was resynced
    /// (sales meanwhile went to the database alone); a failed resync keeps it off till the next.
    async fn apply(&self, name: FlagName, enabled: bool) {
        match name {
            FlagName::LimitedDrop => self.cache.drops.store(enabled, Ordering::Relaxed),
            FlagName::RedisGate => {
                if !enabled {
                    self.cache.gate.store(false, Ordering::Relaxed);
                    return;
                }
                if self.cache.gate_on() {
                    return;
                }
                let epoch = self.cache.epoch.load(Ordering::SeqCst);
                if self.gated && !self.core.resync_served_drops().await {
                    return;
                }
                // Turned off again (here) during the resync: that change wins.
                if self.cache.epoch.load(Ordering::SeqCst) != epoch {
                    return;
                }
                self.cache.gate.store(true, Ordering::Relaxed);
                tracing::info!("the gate admits again, resynced from the database");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use goods_domain::ports::{MockAdmissionGate, MockClock, MockEventPublisher, MockFlagStore};

    fn stored(name: FlagName, enabled: bool) -> Flag {
        Flag {
            enabled,
            ..Flag::default_of(name)
        }
    }

    /// The service over `store`, with a gate, events accepted and `core` as the core.
    fn flags_over(store: MockFlagStore, core: MockFlagHooks) -> Flags {
        let mut clock = MockClock::new();
        clock.expect_now().return_const(OPEN);
        let mut events = MockEventPublisher::new();
        events.expect_publish().returning(|_| Ok(()));
        Flags {
            store: Arc::new(store),
            events: Arc::new(events),
            clock: Arc::new(clock),
            cache: Arc::default(),
            gated: true,
            core: Arc::new(core),
        }
    }

    /// A store whose `flags` answers the gate flag as `answers` say, one read each.
    fn gate_flag_reads(answers: Vec<bool>) -> MockFlagStore {
        let mut answers = answers.into_iter();
        let mut store = MockFlagStore::new();
        store.expect_flags().returning(move || {
            Ok(answers
                .next()
                .map(|on| vec![stored(FlagName::RedisGate, on)])
                .unwrap_or_default())
        });
        store
    }

    #[tokio::test]
    async fn only_admins_see_flags_and_unset_ones_are_on() {
        let flags = flags_over(gate_flag_reads(vec![false]), MockFlagHooks::new());
        for refused in [buyer(), seller(7)] {
            assert!(matches!(
                flags.list(refused).await,
                Err(FlagError::Forbidden)
            ));
        }
        let all = flags.list(admin()).await.unwrap();
        assert_eq!(
            all.iter().map(|f| (f.name, f.enabled)).collect::<Vec<_>>(),
            vec![(FlagName::LimitedDrop, true), (FlagName::RedisGate, false)]
        );
        assert!(matches!(
            flags.set("no.such.flag", true, admin()).await,
            Err(FlagError::NotFound)
        ));
    }

    #[tokio::test]
    async fn the_gate_flag_applies_only_once_the_served_drops_are_resynced() {
        let mut core = MockFlagHooks::new();
        let mut resyncs = vec![false, true].into_iter();
        core.expect_resync_served_drops()
            .times(2)
            .returning(move || resyncs.next().unwrap_or(true));
        let flags = flags_over(gate_flag_reads(vec![false, true, true, true]), core);
        flags.refresh().await.unwrap();
        assert!(!flags.cache.gate_on());
        // The first resync fails: the gate stays off until a refresh resyncs it.
        flags.refresh().await.unwrap();
        assert!(!flags.cache.gate_on());
        flags.refresh().await.unwrap();
        assert!(flags.cache.gate_on());
        // On already: nothing to resync.
        flags.refresh().await.unwrap();
        assert!(flags.cache.gate_on());
    }

    #[tokio::test]
    async fn a_flag_change_is_announced_once_it_is_stored_and_a_refusal_is_not() {
        let mut store = MockFlagStore::new();
        store
            .expect_set_flag()
            .times(1)
            .returning(|name, enabled, by, at| {
                Ok(Flag {
                    name,
                    enabled,
                    updated_at: Some(at),
                    updated_by: Some(by),
                })
            });
        let mut core = MockFlagHooks::new();
        core.expect_announce_change().times(1).return_const(());
        let flags = flags_over(store, core);
        assert!(
            flags
                .set("limited-drop.enabled", false, buyer())
                .await
                .is_err()
        );
        assert!(flags.set("no.such.flag", false, admin()).await.is_err());
        flags
            .set("limited-drop.enabled", false, admin())
            .await
            .unwrap();
        assert!(!flags.cache.drops_on());
    }

    #[tokio::test]
    async fn the_app_resyncs_every_served_drop_before_its_gate_admits_again() {
        let mut m = Mocks::at(OPEN);
        m.flags = gate_flag_reads(vec![false, true, true]);
        m.drops.expect_gate_seed().returning(|drop| {
            Ok(goods_domain::ports::GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: goods_domain::ports::whole_units(100),
                expires_at: CLOSE,
                orders: Vec::new(),
            })
        });
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        let mut resyncs = vec![Err(InfraError::msg("down")), Ok(())].into_iter();
        gate.expect_resync()
            .times(2)
            .returning(move |_| resyncs.next().unwrap_or(Ok(())));
        gate.expect_remaining()
            .returning(|_| Ok(Some(goods_domain::ports::whole_units(100))));
        let app = m.app(Some(gate));
        app.drops().get(drop_id()).await.unwrap(); // caches the drop
        assert!(!app.resync_served_drops().await);
        assert!(app.resync_served_drops().await);
    }

    #[tokio::test]
    async fn the_app_sends_one_notice_per_stored_change() {
        let mut m = Mocks::at(OPEN);
        m.flags.expect_set_flag().returning(|name, enabled, _, _| {
            Ok(Flag {
                enabled,
                ..Flag::default_of(name)
            })
        });
        m.events.expect_publish().returning(|_| Ok(()));
        let (sent, mut received) = tokio::sync::mpsc::unbounded_channel();
        let mut notifier = goods_domain::ports::MockChangeNotifier::new();
        notifier.expect_changed().returning(move || {
            sent.send(()).unwrap();
            Ok(())
        });
        let app = m.app(None).with_change_notifier(Arc::new(notifier));
        app.flags()
            .set("limited-drop.enabled", false, admin())
            .await
            .unwrap();
        received.recv().await.unwrap();
        tokio::task::yield_now().await;
        assert!(received.try_recv().is_err(), "one change, one notice");
    }
}
