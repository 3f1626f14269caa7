//! Runtime feature flags: the release plan's switches, stored in the source of truth.

use crate::{InfraError, UserId};
use async_trait::async_trait;
use time::OffsetDateTime;

/// The flags this service knows. A flag is on unless it was turned off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlagName {
    /// `limited-drop.enabled`: off, every `/limited-drops` route answers as if the feature did
    /// not exist, and no drop can be created (the kill switch).
    LimitedDrop,
    /// `limited-drop.redis-gate.enabled`: off, purchases take the database-only path without
    /// touching the gate; on again, the gate is resynced from the database before it admits.
    RedisGate,
}

impl FlagName {
    pub const ALL: [Self; 2] = [Self::LimitedDrop, Self::RedisGate];

    /// The flag's name in the API and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LimitedDrop => "limited-drop.enabled",
            Self::RedisGate => "limited-drop.redis-gate.enabled",
        }
    }

    /// The flag named `name`, if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

/// A flag's value and its last change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    pub name: FlagName,
    pub enabled: bool,
    /// When it was last set; `None` while it has its default.
    pub updated_at: Option<OffsetDateTime>,
    /// Who last set it.
    pub updated_by: Option<UserId>,
}

impl Flag {
    /// A flag at its default (on), never set.
    pub fn default_of(name: FlagName) -> Self {
        Self {
            name,
            enabled: true,
            updated_at: None,
            updated_by: None,
        }
    }
}

#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait FlagStore: Send + Sync + 'static {
    /// Every flag that was ever set; flags never set are at their default.
    async fn flags(&self) -> Result<Vec<Flag>, InfraError>;

    /// Sets a flag and returns it as stored.
    async fn set_flag(
        &self,
        name: FlagName,
        enabled: bool,
        by: UserId,
        at: OffsetDateTime,
    ) -> Result<Flag, InfraError>;

    /// Sets a flag only if it was never set (a new database: the release ships dark), as set
    /// by the configuration (no user); a flag already set keeps its value, so a restart never
    /// undoes an operator's switch. Returns the flag as stored.
    async fn set_flag_if_unset(
        &self,
        name: FlagName,
        enabled: bool,
        at: OffsetDateTime,
    ) -> Result<Flag, InfraError>;
}
