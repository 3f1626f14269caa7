//! `goods-server`: the limited-drop service, and its subcommands (`goods_server::commands`).

use goods_server::commands::{self, FLUSH, USAGE, finish};
use goods_server::{Application, Config, telemetry};
use std::process::ExitCode;

/// The service's allocator: jemalloc's per-thread caches instead of glibc's arenas. An admitted
/// purchase allocates on one thread and frees on another (the HTTP worker, the committer, the
/// Redis client's router), and glibc's malloc and free took 15.7% of its CPU; with jemalloc it
/// costs 6.6% less CPU for 10% more peak memory (docs/benchmarks.md, "The allocator").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => serve().await,
        ["migrate"] => commands::migrate(None).await,
        ["migrate", "--to", to] => commands::migrate(Some(to)).await,
        ["sign-payment"] => commands::sign_payment(),
        ["health"] => commands::health(),
        ["verify-draw", rest @ ..] => commands::verify_draw(rest),
        _ => {
            eprintln!("goods-server: unknown arguments {args:?}; {USAGE}");
            ExitCode::from(2)
        }
    }
}

async fn serve() -> ExitCode {
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match telemetry::init(&config.observability) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("invalid configuration: {error:#}");
            return ExitCode::from(2);
        }
    };
    let (outcome, deadline) = match Application::build(config).await {
        Ok(app) => match app.serve().await {
            Ok(stopped) if stopped.clean => (Ok(()), Some(stopped.deadline)),
            Ok(stopped) => (
                Err(anyhow::anyhow!(
                    "the shutdown was not clean: requests or background tasks were cut at the end of SHUTDOWN_GRACE_MS"
                )),
                Some(stopped.deadline),
            ),
            Err(error) => (Err(error.into()), None),
        },
        Err(error) => (Err(error), None),
    };
    // Traces get what is left of the shutdown's grace.
    let flush = deadline.map_or(FLUSH, |deadline| {
        deadline.saturating_duration_since(tokio::time::Instant::now())
    });
    finish(telemetry, outcome, flush).await
}
