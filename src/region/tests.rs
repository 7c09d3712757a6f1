//! Unit tests of the region allocator on the host: every class, large blocks, alignment, out of
//! memory, added regions, exact statistics, slabs given back, coalescing, and the invariant scan
//! of the block lists after random work.

use super::blocks::{GRANULE, MIN_BLOCK};
use super::slab::{CLASSES, SLAB_SIZE, slot_size};
use super::{Region, RegionAlloc, RegionStats};
use core::alloc::{GlobalAlloc, Layout};
use std::vec::Vec;

/// `bytes` of memory for a region, 16-aligned. Declared before the allocator it is given to, so
/// that it outlives it.
fn memory(bytes: usize) -> Vec<u128> {
    std::vec![0u128; bytes / 16]
}

/// The region of `m`.
fn region(m: &mut [u128]) -> Region {
    // SAFETY: every test declares `m` before the allocator it gives the region to (so the
    // allocator is dropped first) and does not touch `m` otherwise.
    unsafe { Region::from_raw(m.as_mut_ptr().cast(), m.len() * 16) }
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// The bytes of a block that fill and check touch: all of a small one; the first 512 and the
/// last of a larger one (Miri runs these tests too).
fn touched(size: usize) -> impl Iterator<Item = usize> {
    (0..size.min(512)).chain(if size > 512 { Some(size - 1) } else { None })
}

fn fill(p: *mut u8, size: usize, seed: u8) {
    for i in touched(size) {
        // SAFETY: p holds size bytes.
        unsafe { *p.add(i) = seed ^ i as u8 };
    }
}

fn check(p: *mut u8, size: usize, seed: u8) {
    for i in touched(size) {
        // SAFETY: p holds size bytes.
        assert_eq!(unsafe { *p.add(i) }, seed ^ i as u8, "byte {i} of {p:p}");
    }
}

/// After everything is freed: one free block per region, no slab, nothing live.
fn all_free(a: &RegionAlloc) -> RegionStats {
    let s = a.stats();
    a.check();
    assert_eq!(s.live_blocks, 0);
    assert_eq!(s.requested, 0);
    assert_eq!(s.allocated, 0);
    assert_eq!(s.slab_bytes, 0);
    assert_eq!(s.free, s.region_bytes, "every block merged back: {s:?}");
    s
}

static mut STATIC_ARENA: [u8; 8192] = [0; 8192];
static STATIC: RegionAlloc = RegionAlloc::new(unsafe { Region::array(&raw mut STATIC_ARENA) });

#[test]
fn static_allocator_needs_no_init() {
    let l = layout(100, 8);
    // SAFETY: non-zero size; freed once with its layout.
    unsafe {
        let p = STATIC.alloc(l);
        assert!(!p.is_null());
        let base = (&raw const STATIC_ARENA) as usize;
        assert!((base..base + 8192).contains(&(p as usize)));
        STATIC.dealloc(p, l);
    }
    let s = all_free(&STATIC);
    assert_eq!(s.regions, 1);
    assert!(s.region_bytes > 8192 - 4 * GRANULE);
}

#[test]
fn every_class_alloc_realloc_free() {
    let mut m = memory(256 << 10);
    let a = RegionAlloc::new(region(&mut m));
    for c in 0..CLASSES {
        let size = slot_size(c);
        let mut ps = Vec::new();
        for k in 0..if cfg!(miri) { 8u8 } else { 40 } {
            let l = layout(size, 8);
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            fill(p, size, k);
            ps.push((p, k));
        }
        assert_eq!(a.stats().allocated, ps.len() * size);
        assert_eq!(a.stats().requested, ps.len() * size);
        // Grow each to the next class (or a large block) and back.
        for (p, k) in ps.iter_mut() {
            // SAFETY: live block of this layout; new sizes non-zero.
            unsafe {
                let q = a.realloc(*p, layout(size, 8), size + 8);
                assert!(!q.is_null());
                check(q, size, *k);
                let r = a.realloc(q, layout(size + 8, 8), size);
                check(r, size, *k);
                *p = r;
            }
        }
        for (p, k) in ps {
            check(p, size, k);
            // SAFETY: live, freed once.
            unsafe { a.dealloc(p, layout(size, 8)) };
        }
        all_free(&a);
    }
}

#[test]
fn large_blocks_and_alignment() {
    let mut m = memory(4 << 20);
    let a = RegionAlloc::new(region(&mut m));
    let mut live = Vec::new();
    for (i, &size) in [257usize, 300, 1000, 1024, 4096, 10_000, 65_536, 100_000]
        .iter()
        .enumerate()
    {
        for align in [1usize, 8, 16, 32, 64, 256, 1024, 4096] {
            let l = layout(size, align);
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null(), "{size} aligned to {align}");
            assert_eq!(p as usize % align, 0);
            fill(p, size, i as u8);
            live.push((p, l, i as u8));
        }
        a.check();
    }
    // Small sizes with large alignment take blocks too.
    for align in [16usize, 64, 512] {
        let l = layout(24, align);
        // SAFETY: non-zero size.
        let p = unsafe { a.alloc(l) };
        assert_eq!(p as usize % align, 0);
        fill(p, 24, 9);
        live.push((p, l, 9));
    }
    let requested: usize = live.iter().map(|(_, l, _)| l.size()).sum();
    assert_eq!(a.stats().requested, requested);
    assert_eq!(a.stats().live_blocks, live.len());
    for (p, l, seed) in live {
        check(p, l.size(), seed);
        // SAFETY: live, freed once.
        unsafe { a.dealloc(p, l) };
        a.check();
    }
    all_free(&a);
}

#[test]
fn out_of_memory_returns_null_then_recovers() {
    let mut m = memory(16 << 10);
    let a = RegionAlloc::new(region(&mut m));
    let big = layout(32 << 10, 8);
    // SAFETY: non-zero sizes; every block freed once.
    unsafe {
        assert!(a.alloc(big).is_null());
        assert_eq!(a.stats().failed, 1);
        let mut ps = Vec::new();
        loop {
            let p = a.alloc(layout(48, 8));
            if p.is_null() {
                break;
            }
            ps.push(p);
        }
        assert!(ps.len() > 200, "{} blocks of 48 B in 16 KiB", ps.len());
        assert_eq!(a.stats().failed, 2);
        for p in ps {
            a.dealloc(p, layout(48, 8));
        }
        let p = a.alloc(layout(12 << 10, 8));
        assert!(!p.is_null());
        a.dealloc(p, layout(12 << 10, 8));
    }
    all_free(&a);
}

#[test]
fn empty_allocator_and_added_regions() {
    let (mut tiny, mut m1, mut m2) = (memory(16), memory(8 << 10), memory(8 << 10));
    let a = RegionAlloc::empty();
    let l = layout(5000, 8);
    // SAFETY: non-zero sizes; every block freed once.
    unsafe {
        assert!(a.alloc(l).is_null());
        assert!(!a.add_region(region(&mut tiny)), "too small for a block");
        assert!(a.add_region(region(&mut m1)));
        let p = a.alloc(l);
        assert!(!p.is_null());
        let q = a.alloc(l);
        assert!(q.is_null(), "8 KiB holds one 5000 B block, not two");
        assert!(a.add_region(region(&mut m2)));
        let q = a.alloc(l);
        assert!(!q.is_null());
        assert_eq!(a.stats().regions, 2);
        a.dealloc(p, l);
        a.dealloc(q, l);
    }
    assert_eq!(all_free(&a).regions, 2);
}

#[test]
fn slabs_go_back_when_empty() {
    let mut m = memory(64 << 10);
    let a = RegionAlloc::new(region(&mut m));
    for (c, &slab) in SLAB_SIZE.iter().enumerate() {
        let slab = usize::from(slab);
        let size = slot_size(c);
        let n = 3 * (slab / size);
        let ps: Vec<_> = (0..n)
            // SAFETY: non-zero size.
            .map(|_| unsafe { a.alloc(layout(size, 8)) })
            .collect();
        assert!(ps.iter().all(|p| !p.is_null()));
        assert!(a.stats().slab_bytes >= 3 * slab);
        // Free every other slot: slabs stay, now with free slots.
        for p in ps.iter().step_by(2) {
            // SAFETY: live, freed once.
            unsafe { a.dealloc(*p, layout(size, 8)) };
        }
        assert!(a.partial_slabs(c) >= 3);
        for p in ps.iter().skip(1).step_by(2) {
            // SAFETY: live, freed once.
            unsafe { a.dealloc(*p, layout(size, 8)) };
        }
        assert_eq!(a.partial_slabs(c), 0);
        all_free(&a);
    }
}

#[test]
fn large_blocks_coalesce() {
    let mut m = memory(64 << 10);
    let a = RegionAlloc::new(region(&mut m));
    let whole = a.stats().largest_free;
    let l = layout(10_000, 8);
    // SAFETY: non-zero sizes; every block freed once.
    unsafe {
        let x = a.alloc(l);
        let y = a.alloc(l);
        let z = a.alloc(l);
        assert!(!x.is_null() && !y.is_null() && !z.is_null());
        a.dealloc(x, l);
        a.dealloc(z, l);
        a.check();
        // x's block and z's (merged with the tail) are free, y splits them.
        assert!(a.stats().largest_free < whole);
        a.dealloc(y, l);
    }
    assert_eq!(all_free(&a).largest_free, whole);
}

#[test]
fn realloc_in_place_grows_and_shrinks() {
    let mut m = memory(64 << 10);
    let a = RegionAlloc::new(region(&mut m));
    let l = layout(2000, 8);
    // SAFETY: non-zero sizes; the block is freed once with its last layout.
    unsafe {
        let p = a.alloc(l);
        fill(p, 2000, 3);
        let q = a.realloc(p, l, 6000);
        assert_eq!(q, p, "the free block after it is taken");
        check(q, 2000, 3);
        let r = a.realloc(q, layout(6000, 8), 1000);
        assert_eq!(r, p, "shrunk in place");
        assert_eq!(a.stats().requested, 1000);
        a.check();
        a.dealloc(r, layout(1000, 8));
    }
    all_free(&a);
}

#[test]
fn zero_size_and_allocator_api() {
    use allocator_api2::alloc::Allocator;
    let mut m = memory(16 << 10);
    let a = RegionAlloc::new(region(&mut m));
    let z = a.allocate(layout(0, 64)).unwrap();
    assert_eq!(z.as_ptr().cast::<u8>() as usize % 64, 0);
    // SAFETY: allocated above with this layout.
    unsafe { a.deallocate(z.cast(), layout(0, 64)) };
    let mut v = allocator_api2::vec::Vec::new_in(&a);
    for i in 0..1000u32 {
        v.push(i);
    }
    assert_eq!(a.stats().live_blocks, 1);
    drop(v);
    all_free(&a);
}

/// A xorshift generator for the random tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

#[test]
fn random_work_keeps_the_invariants() {
    let (mut m, mut m2) = (memory(256 << 10), memory(64 << 10));
    let a = RegionAlloc::new(region(&mut m));
    assert!(a.add_region(region(&mut m2)));
    let mut rng = Rng(7);
    let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
    let steps = if cfg!(miri) { 1_000 } else { 20_000 };
    for step in 0..steps {
        let r = rng.next();
        if live.is_empty() || r % 3 != 0 {
            let size = 1 + rng.next() % if r % 7 == 0 { 8192 } else { 512 };
            let align = 1 << (rng.next() % 8);
            let l = layout(size, align);
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
            if !p.is_null() {
                assert_eq!(p as usize % align, 0);
                fill(p, size.min(64), step as u8);
                live.push((p, l, step as u8));
            }
        } else {
            let (p, l, seed) = live.swap_remove(rng.next() % live.len());
            check(p, l.size().min(64), seed);
            // SAFETY: live, freed once.
            unsafe { a.dealloc(p, l) };
        }
        if step % 1000 == 0 {
            a.check();
            let s = a.stats();
            assert_eq!(s.live_blocks, live.len());
            assert_eq!(s.requested, live.iter().map(|(_, l, _)| l.size()).sum());
        }
    }
    for (p, l, _) in live {
        // SAFETY: live, freed once.
        unsafe { a.dealloc(p, l) };
    }
    all_free(&a);
}

/// Heap efficiency (the share of a region in use at the first failed allocation) for random sizes
/// up to 1 KiB, with random frees on the way: at least 85% (issue 25's target).
#[test]
fn heap_efficiency_random_sizes_up_to_1k() {
    let seeds = if cfg!(miri) { 2 } else { 6 };
    for seed in 1..seeds {
        let mut m = memory(256 << 10);
        let a = RegionAlloc::new(region(&mut m));
        let total = a.stats().region_bytes;
        let mut rng = Rng(seed);
        let mut live: Vec<(*mut u8, Layout)> = Vec::new();
        loop {
            if !live.is_empty() && rng.next() % 4 == 0 {
                let (p, l) = live.swap_remove(rng.next() % live.len());
                // SAFETY: live, freed once.
                unsafe { a.dealloc(p, l) };
                continue;
            }
            let l = layout(1 + rng.next() % 1024, 8);
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
            if p.is_null() {
                break;
            }
            live.push((p, l));
        }
        let s = a.stats();
        let eff = s.requested as f64 / total as f64;
        std::println!(
            "seed {seed}: {:.1}% of {total} B in use at the first failure",
            eff * 100.0
        );
        assert!(eff >= 0.85, "efficiency {eff:.3}: {s:?}");
        let _ = MIN_BLOCK;
    }
}
