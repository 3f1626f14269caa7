//! SIGTERM (what an orchestrator sends) and SIGINT (Ctrl-C), both graceful stops. Listened for
//! from the start, before the first log line: a signal sent as soon as the server said where it
//! listens is not lost (or fatal, as it would be without a handler). SIGHUP is the operator's
//! "the first database host is back": new connections go to it again.

use tokio::signal::unix::{Signal, SignalKind, signal};

pub(super) struct StopSignals {
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
}

impl StopSignals {
    pub(super) fn listen() -> Self {
        let listen = |kind, name| {
            signal(kind)
                .inspect_err(|error| tracing::warn!(error = %error, "{name} handler not installed"))
                .ok()
        };
        Self {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// The first of them to arrive.
    pub(super) async fn recv(mut self) -> &'static str {
        tokio::select! {
            () = next(self.terminate.as_mut()) => "SIGTERM",
            () = next(self.interrupt.as_mut()) => "SIGINT",
        }
    }
}

/// The next delivery of `signal`; never, when it has no handler.
async fn next(signal: Option<&mut Signal>) {
    match signal {
        Some(signal) => drop(signal.recv().await),
        None => std::future::pending().await,
    }
}

/// Calls `reset` at each SIGHUP (`None`: the store has one host, and the signal is only logged,
/// never the default action that ends the process).
pub(super) fn on_hangup(reset: Option<std::sync::Arc<dyn Fn() + Send + Sync>>) {
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(error = %error, "SIGHUP handler not installed");
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match &reset {
                Some(reset) => {
                    tracing::info!(
                        "SIGHUP: new database connections go to DATABASE_URL's first host again"
                    );
                    reset();
                }
                None => tracing::info!("SIGHUP: DATABASE_URL names one host; nothing to move"),
            }
        }
    });
}
