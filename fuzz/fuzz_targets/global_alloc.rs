//! Fuzz target: sequences of alloc / alloc_zeroed / realloc / dealloc on a PoolAlloc called
//! directly, checked by the shadow model that `cargo test` also runs (poolalloc-test-support's
//! `shadow`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use poolalloc_test_support::shadow;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fuzz_target!(|data: &[u8]| {
    shadow::Shadow::new(&P).run(data);
});
