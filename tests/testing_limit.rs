//! `poolalloc::testing::set_limit` with `PoolAlloc` as the global allocator. The limit is
//! process-wide, so this test binary has no harness: `main` runs the cases one after the other
//! on one thread, with no other thread allocating. Needs the `testing` feature.

use poolalloc::testing::set_limit;
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// Live requested bytes of the process, as the limit counts them.
fn live() -> usize {
    let s = poolalloc::stats();
    s.requested_bytes + s.large_bytes
}

fn l(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

fn allocations_up_to_the_limit_succeed_and_the_next_fails() {
    let base = live();
    set_limit(Some(base + 1000));
    let a = black_box(Vec::<u8>::with_capacity(600));
    let b = black_box(Vec::<u8>::with_capacity(400)); // exactly at the limit
    let mut c: Vec<u8> = Vec::new();
    let refused = c.try_reserve_exact(1).is_err();
    drop(a);
    let after_free = c.try_reserve_exact(600).is_ok();
    let again = c.try_reserve_exact(601).is_err(); // growth by 1 byte too many
    set_limit(None);
    assert!(refused, "an allocation 1 byte above the limit succeeded");
    assert!(after_free, "freed bytes were not given back to the limit");
    assert!(again, "a realloc growing above the limit succeeded");
    assert_eq!(c.capacity(), 600, "a refused realloc changed the block");
    drop((b, c));
}

fn large_blocks_and_zeroed_allocations_count() {
    let base = live();
    set_limit(Some(base + 100_000));
    let big = black_box(vec![0u8; 90_000]); // alloc_zeroed of a large block
    // SAFETY: a valid non-zero layout; a null result is checked.
    let p = unsafe { GLOBAL.alloc_zeroed(l(20_000)) };
    let q = unsafe { GLOBAL.alloc(l(10_000)) };
    let refused = p.is_null();
    let fits = !q.is_null();
    set_limit(None);
    assert!(refused && fits, "p {p:?} q {q:?}");
    // SAFETY: q was allocated above with this layout.
    unsafe { GLOBAL.dealloc(q, l(10_000)) };
    drop(big);
}

fn a_limit_of_zero_fails_every_allocation_but_frees_and_shrinks_work() {
    let mut v: Vec<u8> = Vec::with_capacity(1000);
    let boxed = black_box(Box::new(5u64));
    set_limit(Some(0));
    let mut w: Vec<u8> = Vec::new();
    let refused_small = w.try_reserve(1).is_err();
    let refused_grow = v.try_reserve_exact(2000).is_err();
    v.shrink_to(10); // a shrink never fails
    let shrunk = v.capacity();
    drop(boxed);
    let still_refused = w.try_reserve(1).is_err(); // live bytes are still above 0
    set_limit(None);
    assert!(refused_small && refused_grow && still_refused);
    assert_eq!(shrunk, 10);
}

fn a_limit_below_the_live_bytes_fails_until_frees_bring_them_down() {
    let hold = black_box(vec![0u8; 5000]);
    let base = live();
    set_limit(Some(base - 4000));
    let mut w: Vec<u8> = Vec::new();
    let refused = w.try_reserve_exact(10).is_err();
    drop(hold);
    let fits = w.try_reserve_exact(10).is_ok();
    set_limit(None);
    assert!(refused && fits);
}

fn changing_the_limit_keeps_the_running_count() {
    let base = live();
    set_limit(Some(base + 10_000));
    let a = black_box(vec![0u8; 3000]);
    set_limit(Some(base + 4000)); // 3000 live above base: 1000 left
    let mut w: Vec<u8> = Vec::new();
    let refused = w.try_reserve_exact(1001).is_err();
    let fits = w.try_reserve_exact(1000).is_ok();
    set_limit(None);
    set_limit(None); // removing twice is harmless
    assert!(refused && fits);
    drop((a, w));
}

fn without_a_limit_nothing_is_refused() {
    let mut w: Vec<u8> = Vec::new();
    assert!(w.try_reserve_exact(1 << 24).is_ok());
}

fn other_threads_allocations_count_and_fail_too() {
    let base = live();
    set_limit(Some(base + 100_000));
    // The thread's own stack and handle come from mmap and a few small blocks.
    let t = std::thread::spawn(|| {
        let kept = black_box(vec![0u8; 60_000]);
        let mut w: Vec<u8> = Vec::new();
        (kept, w.try_reserve_exact(60_000).is_err())
    });
    let (kept, refused_there) = t.join().unwrap();
    let mut w: Vec<u8> = Vec::new();
    let refused_here = w.try_reserve_exact(60_000).is_err();
    set_limit(None);
    assert!(refused_there && refused_here);
    drop(kept);
}

fn main() {
    let cases: &[(&str, fn())] = &[
        (
            "allocations_up_to_the_limit_succeed_and_the_next_fails",
            allocations_up_to_the_limit_succeed_and_the_next_fails,
        ),
        (
            "large_blocks_and_zeroed_allocations_count",
            large_blocks_and_zeroed_allocations_count,
        ),
        (
            "a_limit_of_zero_fails_every_allocation_but_frees_and_shrinks_work",
            a_limit_of_zero_fails_every_allocation_but_frees_and_shrinks_work,
        ),
        (
            "a_limit_below_the_live_bytes_fails_until_frees_bring_them_down",
            a_limit_below_the_live_bytes_fails_until_frees_bring_them_down,
        ),
        (
            "changing_the_limit_keeps_the_running_count",
            changing_the_limit_keeps_the_running_count,
        ),
        (
            "without_a_limit_nothing_is_refused",
            without_a_limit_nothing_is_refused,
        ),
        (
            "other_threads_allocations_count_and_fail_too",
            other_threads_allocations_count_and_fail_too,
        ),
    ];
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    for (name, case) in cases {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        case();
        println!("test {name} ... ok");
    }
}
