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
//!
//! The first argument (default 0) is a number of blocks of random sizes (1 B to 4 KiB) allocated
//! first (none of the measured 24 B class), every other one then freed: a heap of that many live
//! blocks and half as many free ones in the lists and slabs. The counts do not move with it (docs/bare-metal.md: 0 and 100,000), which is what
//! "no loop over the heap" means, measured.

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
    let mut memory = vec![0u128; (512 << 20) / 16];
    // SAFETY: `memory` outlives `a` and nothing else touches it.
    let a = RegionAlloc::new(unsafe {
        Region::from_raw(memory.as_mut_ptr().cast(), memory.len() * 16)
    });
    // The heap around the measured calls: `prefill` blocks, every other one freed.
    let prefill: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut around = Vec::with_capacity(prefill);
    for _ in 0..prefill {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Not of the 24 B class, whose slabs the measured calls make and release.
        let size = match 1 + (x % 4096) as usize {
            17..=24 => 25,
            n => n,
        };
        let l = Layout::from_size_align(size, 8).unwrap();
        around.push((unsafe { a.alloc(l) }, l));
    }
    for &(p, l) in around.iter().step_by(2) {
        unsafe { a.dealloc(p, l) };
    }

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
    for &(p, l) in around.iter().skip(1).step_by(2) {
        unsafe { a.dealloc(p, l) };
    }
    let s = a.stats();
    assert_eq!(s.free, s.region_bytes);
    println!("{s:?}");
}
