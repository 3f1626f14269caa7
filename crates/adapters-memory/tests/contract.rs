//! The admission-gate contract against the in-process gate.

use adapters_memory::MemoryGate;
use std::sync::Arc;
use test_support::gate_contract::Gate;

async fn gate() -> Gate {
    Arc::new(MemoryGate::default())
}

test_support::gate_contract_tests!(gate());
