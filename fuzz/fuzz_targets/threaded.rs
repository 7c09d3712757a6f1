//! Fuzz target: the shadow model with threads. The input chooses 2 to 4 worker threads and which
//! of them runs each alloc / alloc_zeroed / realloc / dealloc, and when a worker exits (its chunks
//! are abandoned while other workers still hold its blocks). `cargo test` runs the same
//! interpreter on seeded inputs and on every crash input saved in fuzz/regressions/threaded/.
#![no_main]

use libfuzzer_sys::fuzz_target;
use poolalloc_test_support::shadow;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fuzz_target!(|data: &[u8]| {
    shadow::run_threaded(&P, data);
});
