//! `goods-server`: the limited-drop service. `goods-server migrate` applies the database
//! migrations and exits.

use goods_server::{Application, Config, telemetry};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
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
    let outcome = match std::env::args().nth(1).as_deref() {
        Some("migrate") => goods_server::startup::migrate(&config).await.map(|()| {
            tracing::info!("migrations applied");
        }),
        Some(other) => Err(anyhow::anyhow!(
            "unknown command {other:?}; the only command is `migrate`"
        )),
        None => match Application::build(config).await {
            Ok(app) => app.run_until_stopped().await.map_err(anyhow::Error::from),
            Err(error) => Err(error),
        },
    };
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
