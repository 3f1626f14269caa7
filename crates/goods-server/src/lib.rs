//! The `goods-server` binary's library: typed configuration, telemetry and the wiring of
//! adapters into the application. Tests build an [`Application`] from their own [`Config`].

pub mod commands;
pub mod config;
pub mod metrics;
pub mod startup;
pub mod telemetry;

pub use config::Config;
pub use startup::Application;
