//! What the process-level tests share: starting the real binary, a client that buys and reads
//! like a buyer and a seller, and a fleet behind HAProxy. Each test binary uses part of it.

#![allow(dead_code)]

pub mod fleet;
pub mod harness;
pub mod process;
