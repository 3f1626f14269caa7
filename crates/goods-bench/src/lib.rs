//! Shared set-up for the benchmarks in `benches/`: an application over a real store with a
//! drop large enough never to sell out during a run, and a closed-loop load of N buyers.

use adapters_memory::{LogEventPublisher, MemoryStats};
use goods_app::{GoodsApp, GroupCommit, Ports, PurchaseCommand, PurchaseError, WriteBuffer};
use goods_domain::ports::{AdmissionGate, SystemClock};
use goods_domain::{DropId, DropInput, IdempotencyKey, NewProduct, Quantity, UserId};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// A store behind every SQL port.
pub mod http;

pub use goods_domain::ports::SourceOfTruth as Store;

/// An application over `store` and `gate` with `permits` write slots and `batching`, and an
/// open drop of `limited` units (one per buyer) on a product with as much stock.
pub async fn app_with_drop<S: Store>(
    store: Arc<S>,
    gate: Option<Arc<dyn AdmissionGate>>,
    permits: usize,
    batching: GroupCommit,
    limited: i64,
) -> anyhow::Result<(GoodsApp, DropId)> {
    let store: Arc<dyn goods_domain::ports::SourceOfTruth> = store;
    let app = GoodsApp::new(
        Ports::from_store(
            &store,
            gate,
            Arc::new(SystemClock),
            Arc::new(LogEventPublisher),
            Arc::new(MemoryStats::default()),
            Arc::new(adapters_memory::SealingVault::with_keys(
                adapters_memory::SealKey::from_bytes(&[7; 32]),
                Vec::new(),
            )),
        ),
        WriteBuffer::new(permits, Duration::from_secs(60)),
    )
    .with_group_commit(batching);
    let product = app
        .products()
        .create(&NewProduct::parse("bench", limited).map_err(|e| anyhow::anyhow!("{e:?}"))?)
        .await?;
    let now = time::OffsetDateTime::now_utc();
    let drop = app
        .drops()
        .create(
            DropInput {
                product_id: product.id.get(),
                open_at: now - time::Duration::seconds(1),
                close_at: now + time::Duration::hours(1),
                limited_quantity: Some(limited),
                variants: None,
                per_user_limit: 1,
                price_minor: 0,
                currency: "XXX".into(),
                mode: "FIRST_COME".into(),
                entry_close_at: None,
                payment_window_seconds: None,
            },
            OPERATOR,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok((app, drop.drop.id))
}

/// The benchmarks' operator: an admin, who manages the ownerless product they create.
const OPERATOR: goods_app::Actor = goods_app::Actor {
    user_id: goods_domain::UserId::MIN,
    role: goods_app::Role::Admin,
};

/// What a closed-loop run measured.
#[derive(Debug)]
pub struct Run {
    /// Purchases that created an order.
    pub committed: u64,
    /// Purchases refused (sold out and the like).
    pub refused: u64,
    /// Wall time of the measured window.
    pub elapsed: Duration,
    /// Latencies of every purchase, sorted.
    pub latencies: Vec<Duration>,
}

impl Run {
    /// Committed orders per second.
    pub fn per_second(&self) -> f64 {
        self.committed as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q`-quantile latency (`q` in 0..=1).
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[i]
    }
}

/// `buyers` tasks buy one unit each, every buyer a new user, back to back for `window`.
pub async fn closed_loop(
    app: &GoodsApp,
    drop: DropId,
    buyers: usize,
    window: Duration,
    first_user: &AtomicI64,
) -> anyhow::Result<Run> {
    let deadline = Instant::now() + window;
    let started = Instant::now();
    let key = IdempotencyKey::parse("bench").map_err(|e| anyhow::anyhow!("{e}"))?;
    let one = Quantity::parse("quantity", 1).map_err(|e| anyhow::anyhow!("{e}"))?;
    let tasks: Vec<_> = (0..buyers)
        .map(|_| {
            let (app, key) = (app.clone(), key.clone());
            let next = first_user.fetch_add(1_000_000, Ordering::Relaxed);
            tokio::spawn(async move {
                let (mut committed, mut refused, mut latencies) = (0_u64, 0_u64, Vec::new());
                let mut user = next;
                while Instant::now() < deadline {
                    user += 1;
                    let cmd = PurchaseCommand {
                        drop_id: drop,
                        user_id: UserId::parse(user).map_err(|e| anyhow::anyhow!("{e}"))?,
                        sku: None,
                        quantity: one,
                        key: key.clone(),
                    };
                    let t = Instant::now();
                    match app.purchase(cmd).await {
                        Ok(_) => committed += 1,
                        Err(
                            PurchaseError::SoldOut { .. }
                            | PurchaseError::PerUserLimitExceeded { .. },
                        ) => refused += 1,
                        Err(e) => anyhow::bail!("purchase failed: {e:?}"),
                    }
                    latencies.push(t.elapsed());
                }
                Ok((committed, refused, latencies))
            })
        })
        .collect();
    let mut run = Run {
        committed: 0,
        refused: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
    };
    for task in tasks {
        let (c, r, l) = task.await??;
        run.committed += c;
        run.refused += r;
        run.latencies.extend(l);
    }
    run.elapsed = started.elapsed();
    run.latencies.sort_unstable();
    Ok(run)
}
