//! End-to-end tests: the real server on port 0, called over HTTP.
//!
//! The backend comes from the environment so CI runs this one suite in every mode:
//! `E2E_DATABASE_URL` unset runs the embedded SQLite file (a fresh directory per test);
//! `E2E_DATABASE_URL=mysql://user@host:port` creates a fresh database per test on that server.
//! `E2E_GATE` is `memory` (default), `off`, or `redis` (with `E2E_REDIS_URL`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

mod helpers;
mod lifecycle;

mod anonymous;
mod auth;
mod concurrency;
mod draws;
mod drops;
mod events;
mod flags;
mod host;
mod input;
mod operations;
mod ops;
mod orders;
mod ownership;
mod payments;
mod products;
mod purchase;
mod rate;
mod restart;
mod sized_draws;
mod sizes;
mod webhooks;

/// A Redis gate of its own (a private `redis-server` it kills).
mod needs_redis {
    mod degraded;
}
