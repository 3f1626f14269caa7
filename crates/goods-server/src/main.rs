//! `goods-server`: the limited-drop service. `goods-server migrate [--to VERSION]` applies the
//! database migrations (all of them, or up to and including one) and exits.

use goods_server::config::MigrateConfig;
use goods_server::{Application, Config, telemetry};
use std::process::ExitCode;

const USAGE: &str = "usage: goods-server [migrate [--to VERSION]]";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => serve().await,
        ["migrate"] => migrate(None).await,
        ["migrate", "--to", to] => migrate(Some(to)).await,
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
    let telemetry = match telemetry::init(&config) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("invalid configuration: {error:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = match Application::build(config).await {
        Ok(app) => app.run_until_stopped().await.map_err(anyhow::Error::from),
        Err(error) => Err(error),
    };
    finish(telemetry, outcome).await
}

/// The migration step reads the database and the log settings only: a fleet's migration job
/// has no identity or gate to configure.
async fn migrate(to: Option<&str>) -> ExitCode {
    let config = match MigrateConfig::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match telemetry::init_console(&config.log_filter, config.log_format) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("invalid configuration: {error:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = goods_server::startup::migrate(&config.database, to)
        .await
        .map(|applied| {
            tracing::info!(
                count = applied.len(),
                applied = %applied.join(","),
                "migrations applied"
            );
        });
    finish(telemetry, outcome).await
}

async fn finish(telemetry: telemetry::Telemetry, outcome: anyhow::Result<()>) -> ExitCode {
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("goods-server: {error:#}");
            ExitCode::FAILURE
        }
    }
}
