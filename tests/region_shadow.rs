//! The shadow-model interpreter (poolalloc-test-support's `shadow`) driving `region::RegionAlloc`:
//! seeded inputs and every regression input of the fuzz target `region`, over regions large enough
//! for every operation and over a small one that runs out of memory often. After every operation
//! the allocator's statistics must equal the model's (live blocks, requested bytes), and at the end
//! every region must be one free block again.

use poolalloc::region::{Region, RegionAlloc};
use poolalloc_test_support::seed::{self, input};
use poolalloc_test_support::shadow;

/// Runs `data` on a fresh allocator over `sizes` regions (fresh memory each), checking the
/// statistics against the model throughout.
fn run(data: &[u8], sizes: &[usize]) {
    let mut memory: Vec<Vec<u128>> = sizes.iter().map(|&n| vec![0u128; n / 16]).collect();
    let a = RegionAlloc::empty();
    for m in &mut memory {
        // SAFETY: `m` outlives `a` (declared later, so dropped first) and nothing else
        // touches it meanwhile.
        let r = unsafe { Region::from_raw(m.as_mut_ptr().cast(), m.len() * 16) };
        assert!(a.add_region(r));
    }
    shadow::Shadow::fallible(&a).run_checked(data, |model| {
        let s = a.stats();
        assert_eq!(s.live_blocks, model.live_blocks(), "{s:?}");
        assert_eq!(s.requested, model.live_bytes(), "{s:?}");
        assert!(s.allocated >= s.requested);
    });
    let s = a.stats();
    assert_eq!(
        (s.live_blocks, s.allocated, s.slab_bytes),
        (0, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.free, s.region_bytes, "not every block merged back: {s:?}");
    assert_eq!(s.regions, sizes.len());
    // `a` goes before `memory` (declared after it).
}

#[test]
fn seeded_inputs_large_regions() {
    for seed in 0..100 {
        run(&input(seed, 2048), &[3 << 20, 1 << 20]);
    }
}

#[test]
fn seeded_inputs_small_region_runs_out() {
    for seed in 0..100 {
        run(&input(7000 + seed, 2048), &[48 << 10]);
    }
}

#[test]
fn fuzz_regressions() {
    seed::replay(&seed::regressions("region"), |data| {
        run(data, &[3 << 20, 1 << 20]);
        run(data, &[48 << 10]);
    });
}
