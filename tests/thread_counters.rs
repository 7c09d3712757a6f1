//! Per-thread counters (`poolalloc::thread_counters`): exact deltas on several threads for
//! small and large blocks, zeroed allocations, reallocs in place and moving, remote frees
//! (counted for the thread that frees), a `Heap`'s blocks and its scopes; one thread's counters
//! never include another's.
//!
//! Each measured stretch does nothing but the allocator calls it counts (no printing, no
//! collection growing), so the deltas are exact.

use poolalloc::{Heap, thread_allocated, thread_counters, thread_deallocated};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::Barrier;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// The calling thread's (allocated, deallocated) now, by the call form.
fn now() -> (u64, u64) {
    (thread_allocated(), thread_deallocated())
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// Allocates and frees blocks of `sizes` on this thread, `zeroed` or not, checking the exact
/// deltas after each step; returns the bytes allocated (and freed).
fn alloc_free_exact(sizes: &[usize], zeroed: bool) -> u64 {
    let c = thread_counters();
    let mut total = 0u64;
    let mut blocks = [(std::ptr::null_mut::<u8>(), 0usize); 16];
    assert!(sizes.len() <= blocks.len());
    let (a0, d0) = now();
    assert_eq!((c.allocated(), c.deallocated()), (a0, d0));
    for (b, &s) in blocks.iter_mut().zip(sizes) {
        // SAFETY: a non-zero layout.
        let p = unsafe {
            if zeroed {
                GLOBAL.alloc_zeroed(layout(s))
            } else {
                GLOBAL.alloc(layout(s))
            }
        };
        assert!(!p.is_null());
        *b = (p, s);
        total += s as u64;
        assert_eq!(now(), (a0 + total, d0));
        assert_eq!(c.allocated(), a0 + total);
    }
    let mut freed = 0u64;
    for &(p, s) in &blocks[..sizes.len()] {
        // SAFETY: p came from GLOBAL with this layout and is freed once.
        unsafe { GLOBAL.dealloc(p, layout(s)) };
        freed += s as u64;
        assert_eq!(now(), (a0 + total, d0 + freed));
        assert_eq!(c.deallocated(), d0 + freed);
    }
    total
}

/// Small (fast path, refills, the 32 and 64 KiB classes) and large sizes, plain and zeroed.
const SIZES: [usize; 14] = [
    1,
    8,
    24,
    100,
    1024,
    1025,
    4000,
    32 << 10,
    40_000,
    64 << 10,
    70_000,
    300_000,
    5 << 20,
    17,
];

#[test]
fn small_large_and_zeroed_blocks_count_exactly() {
    alloc_free_exact(&SIZES, false);
    alloc_free_exact(&SIZES, true);
    // Many times: refills and fresh chunks on the way.
    let (a0, d0) = now();
    let mut v = [std::ptr::null_mut::<u8>(); 1000];
    for p in &mut v {
        // SAFETY: a non-zero layout.
        *p = unsafe { GLOBAL.alloc(layout(48)) };
    }
    for &p in &v {
        // SAFETY: allocated above with this layout.
        unsafe { GLOBAL.dealloc(p, layout(48)) };
    }
    assert_eq!(now(), (a0 + 48_000, d0 + 48_000));
}

#[test]
fn realloc_counts_the_old_size_freed_and_the_new_allocated() {
    // (from, to): in place (same slot), shrink in place, moving small to small, small to large,
    // large to large, large to small.
    for (from, to) in [
        (20, 24),
        (1000, 900),
        (24, 4000),
        (1000, 100_000),
        (100_000, 1 << 20),
        (100_000, 64),
    ] {
        let (a0, d0) = now();
        // SAFETY: a non-zero layout; q is freed with its new size.
        unsafe {
            let p = GLOBAL.alloc(layout(from));
            assert!(!p.is_null());
            let q = GLOBAL.realloc(p, layout(from), to);
            assert!(!q.is_null());
            assert_eq!(
                now(),
                (a0 + (from + to) as u64, d0 + from as u64),
                "realloc {from} -> {to}"
            );
            GLOBAL.dealloc(q, layout(to));
        }
        assert_eq!(now(), (a0 + (from + to) as u64, d0 + (from + to) as u64));
    }
}

#[test]
fn threads_count_their_own_blocks_only() {
    let threads = 4;
    let go = Barrier::new(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let go = &go;
            s.spawn(move || {
                go.wait();
                // Each thread its own sizes, all at once.
                let sizes: Vec<usize> = (0..12).map(|i| SIZES[(i + t) % SIZES.len()] + t).collect();
                let (a0, d0) = now();
                let mut total = 0;
                for _ in 0..200 {
                    total += alloc_free_exact(&sizes, t % 2 == 1);
                }
                assert_eq!(now(), (a0 + total, d0 + total));
            });
        }
    });
}

/// Blocks allocated on one thread and freed on another count as allocated by the first and
/// deallocated by the second, which allocates nothing meanwhile.
#[test]
fn a_remote_free_counts_for_the_thread_that_frees() {
    let n = 100;
    let sizes = [16usize, 24, 200, 3000, 32 << 10, 70_000];
    let per = sizes.iter().sum::<usize>() as u64;
    let blocks = std::thread::spawn(move || {
        let mut mine = Vec::with_capacity(n * sizes.len());
        let (a0, d0) = now();
        for _ in 0..n {
            for &z in &sizes {
                // SAFETY: a non-zero layout.
                let p = unsafe { GLOBAL.alloc(layout(z)) };
                assert!(!p.is_null());
                mine.push((p as usize, z));
            }
        }
        assert_eq!(now(), (a0 + n as u64 * per, d0));
        mine
    })
    .join()
    .unwrap();
    std::thread::spawn(move || {
        let (a0, d0) = now();
        for &(p, z) in &blocks {
            // SAFETY: allocated by the other thread with this layout, freed once.
            unsafe { GLOBAL.dealloc(p as *mut u8, layout(z)) };
        }
        assert_eq!(now(), (a0, d0 + n as u64 * per));
    })
    .join()
    .unwrap();
}

/// The same with the owner alive while another thread frees its blocks: read through the
/// owner's pointer form from the freeing thread, the owner's counters do not move.
#[test]
fn a_remote_free_leaves_the_owners_counters_alone() {
    let sizes = [16usize, 48, 1000, 9000, 100_000];
    let per: u64 = sizes.iter().sum::<usize>() as u64;
    let n = 50;
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<(poolalloc::ThreadCounters, Vec<(usize, usize)>)>(1);
    // Set by the freeing thread when it is done, or panicked (a flag, not a channel: the owner
    // must not allocate while it waits, and a blocking `recv` allocates the first time).
    let freed = std::sync::atomic::AtomicBool::new(false);
    struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Release);
        }
    }
    let freed = &freed;
    std::thread::scope(|s| {
        s.spawn(move || {
            let c = thread_counters();
            let mut mine = Vec::with_capacity(n * sizes.len());
            let (a0, d0) = (c.allocated(), c.deallocated());
            for _ in 0..n {
                for &z in &sizes {
                    // SAFETY: a non-zero layout.
                    mine.push((unsafe { GLOBAL.alloc(layout(z)) } as usize, z));
                }
            }
            assert_eq!((c.allocated(), c.deallocated()), (a0 + n as u64 * per, d0));
            tx.send((c, mine)).unwrap();
            let at = (c.allocated(), c.deallocated());
            // Stays alive (and allocates nothing) while the other thread frees.
            while !freed.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::yield_now();
            }
            assert_eq!((c.allocated(), c.deallocated()), at);
        });
        s.spawn(move || {
            let set = SetOnDrop(freed);
            let (owner, blocks) = rx.recv().unwrap();
            let seen = (owner.allocated(), owner.deallocated());
            let (a0, d0) = now();
            for &(p, z) in &blocks {
                // SAFETY: allocated by the owner thread with this layout, freed once.
                unsafe { GLOBAL.dealloc(p as *mut u8, layout(z)) };
            }
            let mine = now();
            // Read while the owner still runs (it waits for the message below).
            let owners = (owner.allocated(), owner.deallocated());
            drop(set);
            assert_eq!(mine, (a0, d0 + n as u64 * per));
            assert_eq!(owners, seen);
            drop(blocks);
        });
    });
}

#[test]
fn a_heap_and_its_scopes_count_for_the_calling_thread() {
    use allocator_api2::alloc::Allocator;
    let heap = Heap::new();
    let c = thread_counters();
    // A `Heap`'s own blocks, small and large.
    for z in [40usize, 2000, 50_000] {
        let (a0, d0) = now();
        let l = layout(z);
        let p = heap.allocate(l).unwrap();
        assert_eq!(now(), (a0 + z as u64, d0));
        // SAFETY: allocated above with l.
        unsafe { heap.deallocate(p.cast(), l) };
        assert_eq!(now(), (a0 + z as u64, d0 + z as u64));
        assert_eq!((c.allocated(), c.deallocated()), now());
    }
    // Global blocks inside a scope: exact by the call form during the scope, by the pointer
    // form once it ends.
    let (a1, d1) = now();
    let inside = heap.enter(|| {
        let (a, d) = now();
        let v: Vec<u8> = Vec::with_capacity(777);
        let w: Vec<u8> = Vec::with_capacity(100_000);
        let after = now();
        drop(v);
        drop(w);
        (a, d, after, now())
    });
    let (a, d, after, end) = inside;
    assert_eq!((a, d), (a1, d1));
    assert_eq!(after, (a1 + 100_777, d1));
    assert_eq!(end, (a1 + 100_777, d1 + 100_777));
    assert_eq!(now(), end);
    assert_eq!((c.allocated(), c.deallocated()), end);
}

/// Scopes of two heaps, one inside the other: the inner scope's heap carries the counts on and
/// back through the outer one's; inside them the pointer form (taken there too) names the
/// thread's own counters, which show the counts as at the outer scope's start until it ends.
#[test]
fn nested_scopes_carry_the_counts_through() {
    let (outer, inner) = (Heap::new(), Heap::new());
    let c = thread_counters();
    let start = now();
    let seen = outer.enter(|| {
        let _a: Vec<u8> = Vec::with_capacity(100);
        let in_outer = now();
        let (in_inner, pointer_inside, pointer_taken_inside) = inner.enter(|| {
            let _b: Vec<u8> = Vec::with_capacity(40);
            let t = thread_counters();
            (
                now(),
                (c.allocated(), c.deallocated()),
                (t.allocated(), t.deallocated()),
            )
        });
        (
            in_outer,
            in_inner,
            pointer_inside,
            pointer_taken_inside,
            now(),
        )
    });
    let (in_outer, in_inner, pointer_inside, pointer_taken_inside, leaving) = seen;
    assert_eq!(in_outer, (start.0 + 100, start.1));
    assert_eq!(in_inner, (start.0 + 140, start.1));
    assert_eq!(pointer_inside, start);
    assert_eq!(pointer_taken_inside, start);
    assert_eq!(leaving, (start.0 + 140, start.1 + 40));
    assert_eq!(now(), (start.0 + 140, start.1 + 140));
    assert_eq!((c.allocated(), c.deallocated()), now());
}
