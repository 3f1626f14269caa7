//! The API and ops listeners, bound before anything else is opened, so the first two log lines
//! are always the addresses (`listening on <addr>`, `ops listening on <addr>`).

use anyhow::Context as _;
use std::net::{SocketAddr, TcpListener};

/// Both listeners, bound and announced.
pub(super) struct Listeners {
    pub(super) api: TcpListener,
    pub(super) address: SocketAddr,
    pub(super) ops: TcpListener,
    pub(super) ops_address: SocketAddr,
}

impl Listeners {
    pub(super) fn bind(http: &crate::config::Http) -> anyhow::Result<Self> {
        let api = TcpListener::bind(http.bind_addr)
            .with_context(|| format!("binding {}", http.bind_addr))?;
        let address = api.local_addr()?;
        let ops = TcpListener::bind(http.ops_addr)
            .with_context(|| format!("binding OPS_BIND_ADDR {}", http.ops_addr))?;
        let ops_address = ops.local_addr()?;
        tracing::info!("listening on {address}");
        tracing::info!("ops listening on {ops_address}");
        Ok(Self {
            api,
            address,
            ops,
            ops_address,
        })
    }
}
