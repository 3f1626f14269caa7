//! `goods-server`: the limited-drop service.

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
    let telemetry = match telemetry::init(&config.log_filter, config.otlp_endpoint.as_deref()) {
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
