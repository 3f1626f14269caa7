//! The one door through which a test takes something from outside Rust and cargo-nextest.
//!
//! The quick profile (`.config/nextest.toml`) runs what needs nothing else, and leaves out a
//! test by where it lives: the adapter packages of a service, the binaries that run processes
//! (`faults`, `fleet`, `healing`), and any test inside a module named `needs_<what>`. Every
//! helper here that reaches a server or a tool calls [`needs`] first, so a test that takes one
//! while the quick profile runs fails at once, naming itself and the module it belongs in,
//! on every machine: also where the service happens to be there and the test would pass.

use std::fmt;

/// What a test can need beyond Rust and cargo-nextest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// A MySQL/MariaDB server: the shared one (`TEST_MYSQL_URL`) or a private `mariadbd`.
    Mysql,
    /// A Redis server or cluster: the shared one (`TEST_REDIS_URL`) or private `redis-server`s.
    Redis,
    /// A private `nats-server` with JetStream.
    Nats,
    /// The `haproxy` load balancer.
    Haproxy,
    /// The `openssl` command line (test certificates).
    Openssl,
    /// Python with the `standardwebhooks` package (`TEST_WEBHOOK_PYTHON`, which scripts/test
    /// installs pinned): the outside verifier of webhook signatures.
    Python,
}

impl Service {
    /// The module a test that needs it lives in: `needs_<module>`.
    pub fn module(self) -> &'static str {
        match self {
            Service::Mysql => "needs_mysql",
            Service::Redis => "needs_redis",
            Service::Nats => "needs_nats",
            Service::Haproxy => "needs_haproxy",
            Service::Openssl => "needs_openssl",
            Service::Python => "needs_python",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Service::Mysql => "MySQL/MariaDB",
            Service::Redis => "Redis",
            Service::Nats => "a NATS server",
            Service::Haproxy => "HAProxy",
            Service::Openssl => "the openssl command",
            Service::Python => "Python with standardwebhooks",
        })
    }
}

/// Panics when the running test is in the quick profile (nextest's `NEXTEST_PROFILE`), which
/// promises to need nothing but Rust and cargo-nextest; otherwise returns.
pub fn needs(service: Service) {
    if let Some(message) = refusal(
        service,
        std::env::var("NEXTEST_PROFILE").ok().as_deref(),
        std::env::var("NEXTEST_TEST_NAME").ok().as_deref(),
    ) {
        panic!("{message}");
    }
}

fn refusal(service: Service, profile: Option<&str>, test: Option<&str>) -> Option<String> {
    (profile == Some("quick")).then(|| {
        format!(
            "{} needs {service}, which the quick profile does not have: put it in a module named \
             `{}` (or in a package or binary .config/nextest.toml's quick filter leaves out)",
            test.unwrap_or("this test"),
            service.module(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_profile_refuses_a_service_naming_the_test_and_its_module() {
        let message = refusal(Service::Redis, Some("quick"), Some("rate::a_pair")).unwrap();
        assert!(
            message.starts_with("rate::a_pair needs Redis,"),
            "{message}"
        );
        assert!(message.contains("`needs_redis`"), "{message}");
    }

    #[test]
    fn every_other_profile_and_a_plain_cargo_test_take_the_service() {
        assert_eq!(refusal(Service::Mysql, Some("default"), Some("t")), None);
        assert_eq!(refusal(Service::Mysql, None, None), None);
    }
}
