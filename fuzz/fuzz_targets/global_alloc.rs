//! Fuzz target: sequences of alloc / alloc_zeroed / realloc / dealloc on a PoolAlloc called
//! directly, checked by the shadow model that `cargo test` also runs (tests/shadow).
#![no_main]

#[path = "../../tests/shadow/mod.rs"]
mod shadow;

use libfuzzer_sys::fuzz_target;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fuzz_target!(|data: &[u8]| {
    shadow::Shadow::new(&P).run(data);
});
