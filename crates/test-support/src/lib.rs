//! Test-only support shared by the adapter crates.
//!
//! - [`mysql`]: a fresh database per test on a real MySQL/MariaDB server, from `TEST_MYSQL_URL`,
//!   or a MySQL 8 container where a Docker engine answers; with neither, the test fails and says
//!   how to provide one. Nothing is ever skipped silently.
//! - [`gate_contract`]: the admission-gate contract, run against the in-process and the Redis
//!   gate through [`gate_contract_tests!`].
//! - [`redis`]: the same for Redis 7 (`TEST_REDIS_URL`), a key prefix per test, and private
//!   `redis-server` processes for tests that flush or kill their server.
//! - [`contract`]: the SQL source-of-truth contract, one suite run against every backend through
//!   [`sql_contract_tests!`].

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod contract;
pub mod gate_contract;
pub mod mysql;
pub mod redis;
