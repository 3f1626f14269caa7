//! Test-only support shared by the adapter crates.
//!
//! - [`mysql`]: a fresh database per test on a real MySQL/MariaDB server, from `TEST_MYSQL_URL`,
//!   or a MySQL 8 container where a Docker engine answers; with neither, the test fails and says
//!   how to provide one. Nothing is ever skipped silently.
//! - [`gate_contract`]: the admission-gate contract, run against the in-process and the Redis
//!   gate through [`gate_contract_tests!`].
//! - [`galera`]: the three-node Galera Cluster scripts/galera-cluster started, whose nodes a
//!   fault test kills, pauses and starts again.
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
pub mod galera;
pub mod gate_contract;
pub mod json;
pub mod mariadb;
pub mod mysql;
pub mod nats;
pub mod needs;
pub mod python;
pub mod receiver;
pub mod redis;
pub mod tls;

/// The label every container of a test run carries, so the run can remove them at its end.
pub const RUN_LABEL: &str = "goods-test-run";

/// The test run's id (`TEST_RUN_ID`, set by scripts/test), naming its containers.
pub fn run_id() -> String {
    std::env::var("TEST_RUN_ID").unwrap_or_else(|_| "manual".into())
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`, ...) to process `pid` with `kill(1)`; whether it
/// was delivered.
fn try_signal(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .is_ok_and(|status| status.success())
}

/// Sends `signal` to `child`, which must receive it: a fault test whose fault was not
/// injected proves nothing, so a signal that is not delivered fails the test here.
pub fn signal(child: &std::process::Child, signal: &str) {
    signal_pid(child.id(), signal);
}

/// [`signal`] to a process the test did not start (a server known by its pid file).
pub fn signal_pid(pid: u32, signal: &str) {
    assert!(
        try_signal(pid, signal),
        "kill -{signal} {pid} was not delivered"
    );
}

/// Pauses `child` with SIGSTOP and returns once the kernel says it is stopped (`T` in
/// `/proc/<pid>/stat`): `kill` returns when the signal is sent, and a thread busy on another
/// core could still answer a request sent right after it. Panics when it does not stop within
/// 2 s.
pub fn pause(child: &std::process::Child) {
    pause_pid(child.id());
}

/// [`pause`] by pid.
pub fn pause_pid(pid: u32) {
    signal_pid(pid, "STOP");
    wait_for_state(pid, true);
}

/// Resumes `child` with SIGCONT, returning once it runs again.
pub fn resume(child: &std::process::Child) {
    resume_pid(child.id());
}

/// [`resume`] by pid.
pub fn resume_pid(pid: u32) {
    signal_pid(pid, "CONT");
    wait_for_state(pid, false);
}

/// Waits up to 2 s until process `pid` is stopped (or, with `stopped` false, no longer
/// stopped).
fn wait_for_state(pid: u32, stopped: bool) {
    let stat = format!("/proc/{pid}/stat");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < until {
        let state = std::fs::read_to_string(&stat).unwrap_or_default();
        // `pid (comm) state ...`: the state follows the last ')'.
        let is_stopped = state
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('T'));
        if is_stopped == stopped {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let want = if stopped { "stop" } else { "run again" };
    panic!("process {pid} did not {want} within 2 s");
}

/// Kills `child` with SIGKILL (after a SIGCONT, so a paused one dies too) and reaps it.
/// Panics when it is still running afterwards.
pub fn kill(child: &mut std::process::Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = try_signal(child.id(), "CONT");
    let _ = child.kill();
    assert!(
        child.wait().is_ok(),
        "process {} was not reaped after SIGKILL",
        child.id()
    );
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
            kill(&mut child);
        }
    }

    /// SIGSTOP: connections stay open and nothing answers. Returns once the process is
    /// stopped (see [`pause`]).
    pub fn pause(&self) {
        if let Some(child) = &self.0 {
            pause(child);
        }
    }

    /// SIGCONT, returning once it runs again.
    pub fn resume(&self) {
        if let Some(child) = &self.0 {
            resume(child);
        }
    }
}

#[cfg(test)]
mod signal_tests {
    use super::*;

    fn state(child: &std::process::Child) -> char {
        std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .unwrap_or_default()
            .rsplit(')')
            .next()
            .and_then(|rest| rest.trim_start().chars().next())
            .unwrap_or('?')
    }

    #[test]
    fn a_paused_process_is_stopped_when_pause_returns_and_runs_when_resume_returns() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        pause(&child);
        assert_eq!(state(&child), 'T');
        resume(&child);
        assert_ne!(state(&child), 'T');
        pause(&child);
        kill(&mut child);
        assert!(matches!(child.try_wait(), Ok(Some(_))), "reaped");
    }

    #[test]
    fn a_signal_that_is_not_delivered_fails_the_test() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let refused = std::panic::catch_unwind(|| signal(&child, "STOP"));
        assert!(
            refused.is_err(),
            "a signal to a reaped process must not pass silently"
        );
    }
}
