//! Fuzz target: sequences of alloc / alloc_zeroed / realloc / dealloc on a `region::RegionAlloc`
//! (hardened) over 1 MiB of memory, so out of memory happens, checked by the shadow model that
//! `cargo test` also runs (poolalloc-test-support's `shadow`, driven by tests/region_shadow.rs). The statistics must
//! match the model after every operation, and every block must be merged back at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use poolalloc::region::{Region, RegionAlloc};
use poolalloc_test_support::shadow;

const MEMORY: usize = 1 << 20;
static mut MEMORY_FOR_ONE_INPUT: [u128; MEMORY / 16] = [0; MEMORY / 16];

fuzz_target!(|data: &[u8]| {
    // SAFETY: each input gets a fresh allocator over the same memory; the previous one was
    // dropped (with every block freed) before this one is made, so the memory is this one's alone.
    let a = RegionAlloc::new(unsafe {
        Region::from_raw((&raw mut MEMORY_FOR_ONE_INPUT).cast(), MEMORY)
    });
    shadow::Shadow::fallible(&a).run_checked(data, |model| {
        let s = a.stats();
        assert_eq!(s.live_blocks, model.live_blocks());
        assert_eq!(s.requested, model.live_bytes());
    });
    let s = a.stats();
    assert_eq!(s.free, s.region_bytes, "not every block merged back: {s:?}");
});
