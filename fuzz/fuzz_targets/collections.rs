//! Fuzz target: a `hashbrown::HashMap` and an `allocator_api2::vec::Vec` on a
//! `poolalloc::testing::FailingAlloc` whose failure schedule comes from the input, checked against
//! a model after every operation, with no block left per input (poolalloc-test-support's
//! `collections`).
//! The global allocator is the hardened `PoolAlloc`, so the model's own allocations and the
//! containers' blocks are checked for misuse too. `cargo test --features testing` runs the same
//! interpreter on seeded inputs and on every crash input saved in fuzz/regressions/collections/.
#![no_main]

use libfuzzer_sys::fuzz_target;
use poolalloc_test_support::collections;

poolalloc_test_support::failing_pool_alloc!(FailingPoolAlloc);

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fuzz_target!(|data: &[u8]| collections::run::<FailingPoolAlloc>(data));
