//! Test-only support shared by the adapter crates.
//!
//! - [`mysql`]: a fresh database per test on a real MySQL/MariaDB server, from `TEST_MYSQL_URL`,
//!   or a MySQL 8 container where a Docker engine answers; with neither, the test fails and says
//!   how to provide one. Nothing is ever skipped silently.
//! - [`gate_contract`]: the admission-gate contract, run against the in-process and the Redis
//!   gate through [`gate_contract_tests!`].
//! - [`mariadb`]: a private `mariadbd` on a temporary directory and a free port, for tests
//!   that kill, pause and restart their database.
//! - [`redis`]: the same for Redis 7 (`TEST_REDIS_URL`), a key prefix per test, and private
//!   `redis-server` processes for tests that flush or kill their server.
//! - [`nats`]: a private `nats-server` with JetStream, for the event tests that kill, pause and
//!   restart their broker.
//! - [`needs`]: the quick profile's guard, called by every helper here that reaches a server
//!   or a tool.
//! - [`tls`]: a test CA and server certificates, for the TLS tests of Redis and MariaDB.
//! - [`contract`]: the SQL source-of-truth contract, one suite run against every backend through
//!   [`sql_contract_tests!`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod clock;
pub mod contract;
pub mod gate_contract;
pub mod mariadb;
pub mod mysql;
pub mod nats;
pub mod needs;
pub mod redis;
pub mod tls;

/// The label every container of a test run carries, so the run can remove them at its end.
pub const RUN_LABEL: &str = "goods-test-run";

/// The test run's id (`TEST_RUN_ID`, set by scripts/test), naming its containers.
pub fn run_id() -> String {
    std::env::var("TEST_RUN_ID").unwrap_or_else(|_| "manual".into())
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`, ...) to `child` with `kill(1)`.
pub fn signal(child: &std::process::Child, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status();
}

/// The process of a server a test owns (none between a kill and the next start): killed with
/// SIGKILL (after a SIGCONT, so a paused one dies too), paused with SIGSTOP, resumed with
/// SIGCONT.
#[derive(Debug, Default)]
pub struct Daemon(Option<std::process::Child>);

impl Daemon {
    /// Owns `child` from now on (killing the one before, if any).
    pub fn run(&mut self, child: std::process::Child) {
        self.kill();
        self.0 = Some(child);
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            signal(&child, "CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: connections stay open and nothing answers. Returns once the process is
    /// stopped: `kill` returns when the signal is sent, and a thread busy on another core
    /// could still answer a request sent right after it.
    pub fn pause(&self) {
        if let Some(child) = &self.0 {
            signal(child, "STOP");
            let stat = format!("/proc/{}/stat", child.id());
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while std::time::Instant::now() < until {
                let state = std::fs::read_to_string(&stat).unwrap_or_default();
                // `pid (comm) state ...`: the state follows the last ')'.
                if state
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('T'))
                {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            panic!("process {} did not stop within 2 s of SIGSTOP", child.id());
        }
    }

    /// SIGCONT.
    pub fn resume(&self) {
        if let Some(child) = &self.0 {
            signal(child, "CONT");
        }
    }
}
