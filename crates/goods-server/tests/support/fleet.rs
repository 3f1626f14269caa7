//! A fleet on one machine: three `goods-server` processes sharing one database and one Redis,
//! behind a real HAProxy configured from `deploy/haproxy/haproxy.cfg`.

use super::harness::Server;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The instances the balancer's configuration names.
pub const INSTANCES: usize = 3;

/// The balancer's address, as the instances' `AUTH_TRUSTED_PROXIES` lists it (compose and k8s
/// list theirs): its `X-Forwarded-For` then names each client for the per-address limit.
pub const BALANCER: &str = "127.0.0.1/32";

/// The running fleet.
pub struct Fleet {
    /// The instances, in the balancer's order.
    pub servers: Vec<Server>,
    /// The balancer's base URL: what clients call.
    pub base: String,
    haproxy: Child,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Fleet {
    /// Starts the instances with `vars` (the database must be migrated already: a fleet
    /// migrates once), then the balancer in front of them, and waits until it answers.
    pub async fn start(vars: &[(&str, &str)]) -> Self {
        // The balancer's own per-address limit out of the way: every test sends from loopback.
        Self::start_with_edge_limit(vars, 1_000_000_000).await
    }

    /// [`Self::start`], with the balancer answering 429 past `per_10s` requests of one address
    /// in 10 s (`GOODS_LB_RATE_10S`).
    pub async fn start_with_edge_limit(vars: &[(&str, &str)], per_10s: u64) -> Self {
        test_support::needs::needs(test_support::needs::Service::Haproxy);
        let found = Command::new("haproxy")
            .arg("-v")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            found,
            "haproxy not found: install Debian's package haproxy (2.6.12-1+deb12u4)"
        );
        let mut vars = vars.to_vec();
        if !vars.iter().any(|(k, _)| *k == "AUTH_TRUSTED_PROXIES") {
            vars.push(("AUTH_TRUSTED_PROXIES", BALANCER));
        }
        let servers: Vec<Server> = (0..INSTANCES).map(|_| Server::start(&vars)).collect();
        let bind = format!("127.0.0.1:{}", free_port());
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/haproxy/haproxy.cfg"
        );
        let mut command = Command::new("haproxy");
        command
            .args(["-db", "-f", config])
            .env("GOODS_LB_BIND", &bind)
            .env("GOODS_LB_RATE_10S", per_10s.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (i, server) in servers.iter().enumerate() {
            command.env(
                format!("GOODS_{}", i + 1),
                server.base.trim_start_matches("http://"),
            );
        }
        let haproxy = command.spawn().unwrap();
        let base = format!("http://{bind}");
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Ok(res) = http.get(format!("{base}/health/ready")).send().await
                && res.status() == 200
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the balancer did not answer"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            servers,
            base,
            haproxy,
        }
    }

    /// Instance `i`'s `/metrics` exposition.
    pub async fn metrics(&self, http: &reqwest::Client, i: usize) -> String {
        super::process::exposition(http, &self.servers[i].base).await
    }

    /// Purchase outcomes one instance answered (its own `purchase_outcomes_total`).
    pub async fn purchases_served(&self, http: &reqwest::Client, i: usize) -> f64 {
        super::process::metric_sum(http, &self.servers[i].base, "purchase_outcomes_total").await
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.haproxy.kill();
        let _ = self.haproxy.wait();
    }
}
