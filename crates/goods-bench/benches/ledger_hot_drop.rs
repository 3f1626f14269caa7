//! Orders committed per second on one hot drop with no gate (`GATE=off`, strategy B), through
//! the real purchase use case (write buffer and group commit included, HTTP excluded), at 1, 16,
//! 64 and 256 concurrent buyers, with batches of one order (every purchase its own transaction)
//! and of the default `GROUP_COMMIT_MAX_BATCH`.
//!
//! `cargo bench -p goods-bench --bench ledger_hot_drop`; MySQL from `BENCH_MYSQL_URL` (default
//! `TEST_MYSQL_URL`, then `mysql://root@127.0.0.1:3306`). Each level runs on a fresh database,
//! dropped afterwards; `BENCH_SECONDS` sets the measured window (default 5 s, after 1 s warm-up).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use goods_app::GroupCommit;
use goods_bench::{Run, app_with_drop, closed_loop};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

/// The connections of every level: the default `DATABASE_POOL_SIZE`. A drop's committer uses
/// one at a time; the buyers above it queue on the committer, not on the pool.
const POOL: usize = 16;

fn report(backend: &str, batch: usize, buyers: usize, run: &Run) {
    println!(
        "| {backend} | {batch} | {buyers} | {:.0} | {:.1} | {:.1} | {:.1} | {} |",
        run.per_second(),
        run.quantile(0.5).as_secs_f64() * 1e3,
        run.quantile(0.95).as_secs_f64() * 1e3,
        run.quantile(0.99).as_secs_f64() * 1e3,
        run.committed,
    );
}

/// Batch sizes compared: one order per transaction, and the default.
fn batchings() -> [GroupCommit; 2] {
    [
        GroupCommit {
            max_batch: 1,
            ..GroupCommit::default()
        },
        GroupCommit::default(),
    ]
}

const LEVELS: [usize; 4] = [1, 16, 64, 256];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::var("BENCH_MYSQL_URL")
        .or_else(|_| std::env::var("TEST_MYSQL_URL"))
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into());
    let window = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
    let users = AtomicI64::new(1);
    println!("| backend | batch | buyers | orders/s | p50 ms | p95 ms | p99 ms | orders |");
    println!("|---|---|---|---|---|---|---|---|");
    for batching in batchings() {
        for buyers in LEVELS {
            let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
            let mut admin = AsyncMysqlConnection::establish(&server).await?;
            admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await?;
            let store = Arc::new(
                adapters_mysql::Mysql::connect(&format!("{server}/{name}"), POOL, true).await?,
            );
            let (app, drop_id) = app_with_drop(store, None, buyers, batching, 100_000_000).await?;
            closed_loop(&app, drop_id, buyers, Duration::from_secs(1), &users).await?;
            let run = closed_loop(&app, drop_id, buyers, window, &users).await?;
            report("MariaDB, GATE=off", batching.max_batch, buyers, &run);
            std::mem::drop(app);
            admin
                .batch_execute(&format!("DROP DATABASE {name}"))
                .await?;
        }
    }
    for batching in batchings() {
        for buyers in LEVELS {
            let dir = tempfile::tempdir()?;
            let store = Arc::new(
                adapters_sqlite::Sqlite::open(
                    &format!("sqlite://{}/bench.db", dir.path().display()),
                    true,
                )
                .await?,
            );
            let (app, drop_id) = app_with_drop(store, None, buyers, batching, 100_000_000).await?;
            closed_loop(&app, drop_id, buyers, Duration::from_secs(1), &users).await?;
            let run = closed_loop(&app, drop_id, buyers, window, &users).await?;
            report("SQLite, GATE=off", batching.max_batch, buyers, &run);
        }
    }
    Ok(())
}
