//! What the fleet shares in Redis when `REDIS_URL` is set: the gate (with `GATE=redis`), the
//! outcome counters, change notices and the write budget; in-process ports otherwise. Without
//! the `redis` feature the configuration refuses `REDIS_URL`, and [`Redis`] cannot be made.

use crate::config::{Config, Gate, RedisConfig};
use adapters_memory::{MemoryGate, MemoryStats};
use api_actix::Probe;
use futures::FutureExt as _;
use goods_domain::ports::{AdmissionGate, ChangeNotifier, RateLimiter, StatsRecorder, WriteBudget};
use std::sync::Arc;
use std::time::Duration;

/// The connection to the fleet's Redis.
#[cfg(feature = "redis")]
pub(super) use adapters_redis::RedisConnection as Redis;

/// Never made: a binary without the `redis` feature refuses `REDIS_URL`.
#[cfg(not(feature = "redis"))]
pub(super) enum Redis {}

#[cfg(not(feature = "redis"))]
impl Redis {
    pub(super) async fn close(&self, _within: Duration) -> bool {
        match *self {}
    }
}

/// Connects to `config`'s Redis, its keys named after the database's `identity`.
pub(super) async fn connect(config: &RedisConfig, identity: &str) -> anyhow::Result<Redis> {
    #[cfg(feature = "redis")]
    {
        let conn = Redis::connect(&config.connection(), Duration::from_secs(2)).await?;
        Ok(conn.mirroring(identity))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (config, identity);
        anyhow::bail!("this goods-server was built without the `redis` feature")
    }
}

/// The gate, the outcome counters that go with it, and the gate's health check.
pub(super) struct GatePorts {
    pub gate: Option<Arc<dyn AdmissionGate>>,
    pub stats: Arc<dyn StatsRecorder>,
    pub probe: Option<Probe>,
    /// Change notices between instances, when they share a Redis; each one arriving calls
    /// the `on_change` given to [`gate_ports`].
    pub notifier: Option<Arc<dyn ChangeNotifier>>,
    /// The fleet's write budget, when configured (`DB_WRITE_PERMITS_GLOBAL`).
    pub budget: Option<Arc<dyn WriteBudget>>,
    /// The fleet's token buckets, when the fleet shares a Redis (whatever the gate).
    pub rate: Option<Arc<dyn RateLimiter>>,
}

/// How long an instance answers SOLD_OUT alone at most before asking Redis again, should a
/// restock message be lost.
#[cfg(feature = "redis")]
const SOLD_OUT_FLAG_TTL: Duration = Duration::from_secs(2);

/// The ports `config` asks for, on `redis` when the Redis section is set: the gate (in Redis
/// only with `GATE=redis`), and whatever the fleet shares there whichever the gate is.
pub(super) fn gate_ports(
    config: &Config,
    redis: Option<&Redis>,
    on_change: impl Fn() + Send + 'static,
) -> GatePorts {
    let memory_gate = || -> (Option<Arc<dyn AdmissionGate>>, Option<Probe>) {
        (
            Some(Arc::new(MemoryGate::default())),
            Some(Arc::new(|| async { Ok(()) }.boxed())),
        )
    };
    let Some(conn) = redis else {
        let _ = on_change;
        return GatePorts {
            gate: None,
            stats: Arc::new(MemoryStats::default()),
            probe: None,
            notifier: None,
            budget: None,
            rate: None,
        }
        .with_gate(match config.gate {
            Gate::Memory => memory_gate(),
            // The configuration refuses GATE=redis without REDIS_URL.
            Gate::Off | Gate::Redis => (None, None),
        });
    };
    #[cfg(feature = "redis")]
    {
        use adapters_redis::{
            RedisChanges, RedisGate, RedisRateLimiter, RedisStats, RedisWriteBudget,
        };
        let changes = RedisChanges::new(conn.clone());
        changes.listen(on_change);
        let probe_conn = conn.clone();
        GatePorts {
            gate: None,
            stats: Arc::new(RedisStats::new(conn.clone())),
            probe: None,
            notifier: Some(Arc::new(changes)),
            budget: config.purchases.write_permits_global.map(|permits| {
                Arc::new(RedisWriteBudget::new(conn.clone(), permits)) as Arc<dyn WriteBudget>
            }),
            rate: Some(Arc::new(RedisRateLimiter::new(conn.clone()))),
        }
        .with_gate(match config.gate {
            Gate::Redis => (
                Some(Arc::new(RedisGate::new(conn.clone(), SOLD_OUT_FLAG_TTL))),
                Some(Arc::new(move || {
                    let conn = probe_conn.clone();
                    async move { conn.ping().await }.boxed()
                })),
            ),
            Gate::Memory => memory_gate(),
            Gate::Off => (None, None),
        })
    }
    #[cfg(not(feature = "redis"))]
    match *conn {}
}

impl GatePorts {
    fn with_gate(mut self, (gate, probe): (Option<Arc<dyn AdmissionGate>>, Option<Probe>)) -> Self {
        self.gate = gate;
        self.probe = probe;
        self
    }
}
