//! Reserve operations per second on the admission gates: Redis (the script round trip, and the
//! per-instance sold-out flag that answers without one) and the in-process gate, with 1 and 32
//! concurrent callers. Each iteration is 1,000 reserves from distinct buyers.
//!
//! `cargo bench -p goods-bench --bench gate_reserve`; Redis from `BENCH_REDIS_URL` (default
//! `TEST_REDIS_URL`, then `redis://127.0.0.1:6379`), under a fresh key prefix.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use adapters_memory::MemoryGate;
use adapters_redis::{RedisConfig, RedisConnection, RedisGate};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use goods_domain::ports::{AdmissionGate, GateSeed, Reservation, ReserveOutcome};
use goods_domain::{DropId, IdempotencyKey, Quantity, UserId};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

const BATCH: u64 = 1_000;

/// (name, gate, drop id, the outcome every reserve must have).
type Case<'a> = (
    &'a str,
    &'a Arc<dyn AdmissionGate>,
    i64,
    fn(&ReserveOutcome) -> bool,
);

fn reservation(drop: i64, user: i64) -> Reservation {
    Reservation {
        drop_id: DropId::parse(drop).unwrap(),
        user_id: UserId::parse(user).unwrap(),
        sku: None,
        quantity: Quantity::parse("quantity", 1).unwrap(),
        per_user_limit: Quantity::parse("perUserLimit", 1).unwrap(),
        key: IdempotencyKey::parse("bench").unwrap(),
        deadline: time::OffsetDateTime::now_utc() + time::Duration::minutes(5),
        bucket: None,
    }
}

async fn seed(gate: &dyn AdmissionGate, drop: i64, remaining: u32) {
    gate.seed_if_absent(&GateSeed {
        unexplained: Vec::new(),
        drop_id: DropId::parse(drop).unwrap(),
        remaining: goods_domain::ports::whole_units(remaining),
        expires_at: time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        orders: Vec::new(),
    })
    .await
    .unwrap();
}

/// `BATCH` reserves from `callers` concurrent tasks; the time they took.
async fn batch(
    gate: Arc<dyn AdmissionGate>,
    drop: i64,
    callers: u64,
    users: Arc<AtomicI64>,
    expect: fn(&ReserveOutcome) -> bool,
) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (gate, users) = (Arc::clone(&gate), Arc::clone(&users));
            tokio::spawn(async move {
                for _ in 0..BATCH / callers {
                    let user = users.fetch_add(1, Ordering::Relaxed);
                    let outcome = gate.reserve(&reservation(drop, user)).await.unwrap();
                    assert!(expect(&outcome), "{outcome:?}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

async fn redis_gate(flag_ttl: Duration) -> Arc<dyn AdmissionGate> {
    let url = std::env::var("BENCH_REDIS_URL")
        .or_else(|_| std::env::var("TEST_REDIS_URL"))
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let config = RedisConfig {
        url,
        prefix: format!("bench:{}:", uuid::Uuid::new_v4().simple()),
        pool_size: 8,
        command_timeout: Duration::from_secs(2),
        tls_ca_file: None,
    };
    let conn = RedisConnection::connect(&config, Duration::from_secs(2))
        .await
        .unwrap();
    Arc::new(RedisGate::new(conn, flag_ttl))
}

fn gates(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let users = Arc::new(AtomicI64::new(1));
    let admitted: fn(&ReserveOutcome) -> bool = |o| *o == ReserveOutcome::Admitted;
    let sold_out: fn(&ReserveOutcome) -> bool = |o| matches!(o, ReserveOutcome::SoldOut { .. });

    // Redis, admitting (a drop that never runs out during the run).
    let redis = rt.block_on(redis_gate(Duration::ZERO));
    rt.block_on(seed(redis.as_ref(), 1, u32::MAX / 2));
    // Redis, sold out, every answer from the script (flags expire at once).
    rt.block_on(seed(redis.as_ref(), 2, 0));
    // Redis, sold out, answered by the raised flag.
    let flagged = rt.block_on(redis_gate(Duration::from_secs(3600)));
    rt.block_on(seed(flagged.as_ref(), 3, 0));
    rt.block_on(async {
        flagged.reserve(&reservation(3, 1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let memory: Arc<dyn AdmissionGate> = Arc::new(MemoryGate::default());
    rt.block_on(seed(memory.as_ref(), 1, u32::MAX / 2));

    let mut group = c.benchmark_group("gate_reserve");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    let cases: [Case<'_>; 4] = [
        ("redis_admit", &redis, 1, admitted),
        ("redis_sold_out_script", &redis, 2, sold_out),
        ("redis_sold_out_flag", &flagged, 3, sold_out),
        ("memory_admit", &memory, 1, admitted),
    ];
    for (name, gate, drop, expect) in cases {
        for callers in [1_u64, 32] {
            group.bench_function(format!("{name}/callers={callers}"), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (gate, users) = (Arc::clone(gate), Arc::clone(&users));
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total +=
                                batch(Arc::clone(&gate), drop, callers, Arc::clone(&users), expect)
                                    .await;
                        }
                        total
                    }
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, gates);
criterion_main!(benches);
