//! `poolalloc::testing::count` and `forbid` with `PoolAlloc` as the global allocator: exact counts,
//! blocks from before the count, reallocations, nesting, threads, panics, and a table of many
//! blocks. Needs the `testing` feature.
#![cfg(feature = "testing")]

use poolalloc::testing::{Counts, count, forbid};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn counts_are_exact_requested_bytes() {
    let (v, c) = count(|| {
        let scratch = black_box(vec![0u8; 100]);
        drop(scratch);
        let big = black_box(vec![0u8; 100_000]); // a large block counts the same way
        drop(big);
        black_box(vec![1u32; 10])
    });
    assert_eq!(
        c,
        Counts {
            allocations: 3,
            frees: 2,
            reallocations: 0,
            bytes_allocated: 100_140,
            peak_live_bytes: 100_000,
            live_blocks: 1,
        }
    );
    drop(v);
}

#[test]
fn peak_is_the_highest_sum_of_live_bytes() {
    let ((), c) = count(|| {
        let a = black_box(vec![0u8; 300]);
        let b = black_box(vec![0u8; 200]);
        drop(a);
        let c = black_box(vec![0u8; 250]);
        drop((b, c));
    });
    assert_eq!(c.peak_live_bytes, 500);
    assert_eq!(c.bytes_allocated, 750);
    assert_eq!((c.allocations, c.frees, c.live_blocks), (3, 3, 0));
}

#[test]
fn freeing_a_block_from_before_the_count_is_a_free_but_not_a_negative_leak() {
    let old = black_box(vec![0u8; 64]);
    let ((), c) = count(move || drop(old));
    assert_eq!((c.frees, c.live_blocks, c.peak_live_bytes), (1, 0, 0));
    let old = black_box(vec![0u8; 64]);
    let ((), c) = count(move || {
        drop(old);
        black_box(Box::new(7u64));
    });
    assert_eq!((c.allocations, c.frees, c.live_blocks), (1, 2, 0));
}

#[test]
fn reallocations_count_only_as_reallocations() {
    // A block of the closure's own, grown in place and then moved.
    let (_v, c) = count(|| {
        let mut v: Vec<u8> = Vec::with_capacity(10);
        v.reserve_exact(12); // same 16-byte class: in place
        v.reserve_exact(5000); // moved
        v.shrink_to(100);
        v
    });
    assert_eq!((c.allocations, c.reallocations, c.frees), (1, 3, 0));
    assert_eq!(c.bytes_allocated, 10);
    assert_eq!(c.peak_live_bytes, 5000);
    assert_eq!(c.live_blocks, 1);
    // The block's size in the table follows the reallocation: freeing it in a count that
    // owns it (nested) brings the live bytes to zero.
    let ((), outer) = count(|| {
        let (w, _) = count(|| {
            let mut w: Vec<u8> = Vec::with_capacity(10);
            w.reserve_exact(1000);
            w
        });
        drop(w);
    });
    assert_eq!((outer.live_blocks, outer.peak_live_bytes), (0, 1000));
    // A block from before the count stays the caller's: only `reallocations` moves.
    let mut old: Vec<u8> = Vec::with_capacity(10);
    let ((), c) = count(|| {
        old.reserve_exact(50_000);
        old.shrink_to(1);
    });
    assert_eq!(
        c,
        Counts {
            reallocations: 2,
            ..Counts::default()
        }
    );
    let ((), c) = count(move || drop(old));
    assert_eq!((c.frees, c.live_blocks), (1, 0));
}

#[test]
fn the_outer_count_sees_the_inner_ones() {
    let ((kept, inner1, inner2), outer) = count(|| {
        let a = black_box(vec![0u8; 40]);
        let (kept, inner1) = count(|| {
            drop(a); // allocated by the outer count only
            black_box(vec![0u8; 24])
        });
        // A sibling inner count does not own what the first one allocated.
        let ((), inner2) = count(|| {
            let _x = black_box(vec![0u8; 8]);
        });
        (kept, inner1, inner2)
    });
    assert_eq!(
        inner1,
        Counts {
            allocations: 1,
            frees: 1,
            reallocations: 0,
            bytes_allocated: 24,
            peak_live_bytes: 24,
            live_blocks: 1,
        }
    );
    assert_eq!(
        (inner2.allocations, inner2.frees, inner2.live_blocks),
        (1, 1, 0)
    );
    assert_eq!(
        outer,
        Counts {
            allocations: 3,
            frees: 2,
            reallocations: 0,
            bytes_allocated: 72,
            peak_live_bytes: 40,
            live_blocks: 1,
        }
    );
    // Freed after the inner count ended, inside the outer one: the outer sees the free.
    let (k, c) = count(|| {
        let (k, _) = count(|| black_box(vec![0u8; 16]));
        drop(k);
        black_box(1)
    });
    assert_eq!((k, c.live_blocks, c.frees), (1, 0, 1));
    drop(kept);
}

#[test]
fn a_block_freed_by_another_thread_stays_live_for_the_count() {
    use std::sync::atomic::{AtomicPtr, Ordering::SeqCst};
    static HANDOFF: AtomicPtr<[u8; 48]> = AtomicPtr::new(std::ptr::null_mut());
    // The other thread exists before the count, so the count sees only the box.
    let freer = std::thread::spawn(|| {
        loop {
            let p = HANDOFF.load(SeqCst);
            if !p.is_null() && p != std::ptr::dangling_mut() {
                // SAFETY: p came from Box::into_raw and is handed over once.
                drop(unsafe { Box::from_raw(p) });
                HANDOFF.store(std::ptr::dangling_mut(), SeqCst);
                return;
            }
            std::thread::yield_now();
        }
    });
    let ((), c) = count(|| {
        HANDOFF.store(Box::into_raw(Box::new([7u8; 48])), SeqCst);
        while HANDOFF.load(SeqCst) != std::ptr::dangling_mut() {
            std::thread::yield_now();
        }
    });
    freer.join().unwrap();
    assert_eq!(
        c,
        Counts {
            allocations: 1,
            frees: 0,
            reallocations: 0,
            bytes_allocated: 48,
            peak_live_bytes: 48,
            live_blocks: 1,
        }
    );
}

#[test]
fn threads_count_their_own_activity_at_the_same_time() {
    let results: Vec<Counts> = std::thread::scope(|s| {
        let hs: Vec<_> = (1..=4usize)
            .map(|t| {
                s.spawn(move || {
                    count(|| {
                        let mut keep = Vec::new();
                        for i in 0..1000 * t {
                            let b = black_box(vec![0u8; 8 * t]);
                            if i % 10 == 0 {
                                keep.push(b);
                            }
                        }
                        std::mem::forget(keep);
                    })
                    .1
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, c) in results.iter().enumerate() {
        let t = i + 1;
        // 1000·t vectors of 8·t bytes, 100·t kept in `keep`, plus `keep`'s own buffer of 4
        // vectors (its growth are reallocations) that is forgotten.
        assert_eq!(c.allocations, 1000 * t + 1, "thread {t}: {c:?}");
        assert_eq!(c.frees, 900 * t, "thread {t}: {c:?}");
        assert_eq!(c.live_blocks, 100 * t + 1, "thread {t}: {c:?}");
        assert_eq!(
            c.bytes_allocated,
            1000 * t * 8 * t + 4 * size_of::<Vec<u8>>(),
            "thread {t}: {c:?}"
        );
    }
}

#[test]
#[cfg_attr(
    not(panic = "unwind"),
    ignore = "a panic aborts on this target: it cannot be caught"
)]
fn a_panic_ends_the_count_and_goes_on() {
    let r = std::panic::catch_unwind(|| {
        count(|| {
            let _v = black_box(vec![0u8; 10]);
            panic!("inside count");
        })
    });
    assert!(r.is_err());
    // The thread's counting state is back to none: a new count starts from zero.
    let ((), c) = count(|| {});
    assert_eq!(c, Counts::default());
}

#[test]
fn many_live_blocks_grow_the_table_and_are_all_found() {
    let n = 100_000;
    let (blocks, c) = count(|| {
        let mut blocks: Vec<Box<u64>> = Vec::with_capacity(n);
        for i in 0..n {
            blocks.push(Box::new(i as u64));
        }
        // Free every other one, from the end (the table's deletions shift probe runs).
        let mut kept = Vec::with_capacity(n / 2);
        while let Some(b) = blocks.pop() {
            if *b % 2 == 0 {
                kept.push(b);
            }
        }
        kept
    });
    assert_eq!(c.allocations, n + 2);
    assert_eq!(c.frees, n / 2 + 1);
    assert_eq!(c.live_blocks, n / 2 + 1);
    // The boxes, the vector of n pointers and the one of n / 2.
    let word = size_of::<Box<u64>>();
    assert_eq!(c.peak_live_bytes, n * 8 + n * word + (n / 2) * word);
    let ((), c) = count(move || drop(blocks));
    assert_eq!(c.frees, n / 2 + 1);
}

#[test]
fn count_and_set_limit_allocate_nothing_so_they_work_inside_forbid() {
    let old = vec![1u8; 100];
    let ((), c) = forbid(|| {
        // A limit nobody can reach (the tests of this binary run in parallel): setting and
        // removing it reads stats() and allocates nothing.
        poolalloc::testing::set_limit(Some(usize::MAX));
        poolalloc::testing::set_limit(None);
        count(move || {
            drop(old); // frees are allowed
            let mut on_stack = [0u64; 16];
            on_stack[3] = black_box(5);
            black_box(on_stack);
        })
    });
    assert_eq!((c.allocations, c.frees), (0, 1));
    let mut buf = Vec::with_capacity(64);
    forbid(|| forbid(|| buf.extend(0..64u32)));
    assert_eq!(buf.len(), 64);
}

#[test]
#[cfg_attr(
    not(panic = "unwind"),
    ignore = "a panic aborts on this target: it cannot be caught"
)]
fn a_failing_assert_inside_forbid_panics_normally() {
    let r = std::panic::catch_unwind(|| {
        forbid(|| {
            let x = black_box(1);
            assert_eq!(x, 2, "the message is formatted, the payload boxed");
        })
    });
    assert!(r.is_err());
    // The scope ended with the unwind: allocating works again.
    black_box(vec![0u8; 10]);
}

#[test]
fn forbid_on_one_thread_leaves_other_threads_free_to_allocate() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static STAGE: AtomicUsize = AtomicUsize::new(0);
    let other = std::thread::spawn(|| {
        while STAGE.load(SeqCst) != 1 {
            std::thread::yield_now();
        }
        // Allocates while the main thread is inside `forbid`, and inside a `forbid` of its own
        // that ended.
        forbid(|| {});
        let v: Vec<Box<usize>> = (0..1000).map(Box::new).collect();
        black_box(v);
        STAGE.store(2, SeqCst);
    });
    forbid(|| {
        STAGE.store(1, SeqCst);
        while STAGE.load(SeqCst) != 2 {
            std::thread::yield_now();
        }
    });
    other.join().unwrap();
}

#[test]
fn frees_inside_forbid_inside_count_are_counted() {
    let a = black_box(vec![0u8; 10]);
    let ((), c) = count(|| {
        let b = black_box(vec![0u8; 20]);
        forbid(move || drop((a, b)));
    });
    assert_eq!((c.allocations, c.frees, c.live_blocks), (1, 2, 0));
}
