//! The machinery the use cases run on, none of it a rule of the domain: the write buffer, the
//! group-commit queue, the fleet's write budget, the gate's breaker, single flights, the index
//! of drop ids, and the tracker of background tasks.

pub(crate) mod breaker;
pub(crate) mod budget;
pub(crate) mod buffer;
pub(crate) mod drop_index;
pub(crate) mod group_commit;
pub(crate) mod single_flight;
pub(crate) mod tasks;
