//! The worst-case paths of `region::RegionAlloc`, each in a function of its own so that callgrind
//! counts its instructions (docs/bare-metal.md gives the figures):
//!
//!     cargo build --release --example region_costs
//!     valgrind --tool=callgrind --callgrind-out-file=target/region_costs.out \
//!       target/release/examples/region_costs
//!     callgrind_annotate --inclusive=yes target/region_costs.out | grep measured_
//!
//! Each function runs `N` times on the path named, so its inclusive count divided by `N` is the
//! cost of one call on that path (the lock, the statistics and the call included).

use poolalloc::region::{Region, RegionAlloc};
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

const N: usize = 1000;

macro_rules! measured {
    ($alloc:ident, $free:ident) => {
        #[inline(never)]
        fn $alloc(a: &RegionAlloc, l: Layout) -> *mut u8 {
            // SAFETY: non-zero size.
            unsafe { a.alloc(black_box(l)) }
        }
        #[inline(never)]
        fn $free(a: &RegionAlloc, p: *mut u8, l: Layout) {
            // SAFETY: p is live with layout l.
            unsafe { a.dealloc(black_box(p), l) }
        }
    };
}
// Small: a slot popped from a slab's free list, pushed back.
measured!(measured_small_alloc_pop, measured_small_free_push);
// Small: the class has no slab (one is carved from the blocks), and the free empties it (it goes
// back to the blocks, merging with its neighbours).
measured!(measured_small_alloc_new_slab, measured_small_free_last_slot);
// Large: a block taken from a list and split; freed between two free blocks (two merges).
measured!(measured_large_alloc_split, measured_large_free_two_merges);
// Large, aligned to 4 KiB: a block found with room for the gap, split on both sides.
measured!(measured_large_alloc_aligned, measured_large_free_aligned);

fn main() {
    let mut memory = vec![0u128; (64 << 20) / 16];
    // SAFETY: `memory` outlives `a` and nothing else touches it.
    let a = RegionAlloc::new(unsafe {
        Region::from_raw(memory.as_mut_ptr().cast(), memory.len() * 16)
    });
    let small = Layout::from_size_align(24, 8).unwrap();
    let large = Layout::from_size_align(1000, 8).unwrap();
    let aligned = Layout::from_size_align(1000, 4096).unwrap();

    // One slot stays live so the class keeps its slab; another comes and goes.
    // SAFETY (all blocks below): allocated here, freed once with their layout.
    let keep = unsafe { a.alloc(small) };
    for _ in 0..N {
        let p = measured_small_alloc_pop(&a, small);
        measured_small_free_push(&a, p, small);
    }
    unsafe { a.dealloc(keep, small) };

    for _ in 0..N {
        let p = measured_small_alloc_new_slab(&a, small);
        measured_small_free_last_slot(&a, p, small);
    }

    // Triples x, y, z (and a separator s): x and z freed first, so freeing y merges both sides.
    let triples: Vec<[*mut u8; 4]> = (0..N)
        .map(|_| [(); 4].map(|_| unsafe { a.alloc(large) }))
        .collect();
    for t in &triples {
        unsafe {
            a.dealloc(t[0], large);
            a.dealloc(t[2], large);
        }
    }
    for t in &triples {
        measured_large_free_two_merges(&a, t[1], large);
    }
    // Each merged block (three blocks' worth) serves one request, split.
    let ys: Vec<*mut u8> = (0..N)
        .map(|_| measured_large_alloc_split(&a, large))
        .collect();
    for (t, y) in triples.iter().zip(ys) {
        unsafe {
            a.dealloc(t[3], large);
            a.dealloc(y, large);
        }
    }

    let ps: Vec<*mut u8> = (0..N)
        .map(|_| measured_large_alloc_aligned(&a, aligned))
        .collect();
    for p in ps {
        measured_large_free_aligned(&a, p, aligned);
    }
    let s = a.stats();
    assert_eq!(s.free, s.region_bytes);
    println!("{s:?}");
}
