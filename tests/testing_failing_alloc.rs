//! `poolalloc::testing::FailingAlloc`: its schedules, shared use, threads, and an inner allocator
//! that fails by itself. Needs no feature.

use allocator_api2::alloc::{AllocError, Allocator, Global};
use allocator_api2::vec::Vec as AVec;
use poolalloc::PoolAlloc;
use poolalloc::testing::FailingAlloc;
use std::alloc::Layout;

fn l(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

/// Tries `n` allocations of 16 bytes; returns which ones failed (each success is freed at once).
fn outcomes<A: Allocator>(a: &A, n: usize) -> Vec<bool> {
    (0..n)
        .map(|_| match a.allocate(l(16)) {
            Ok(p) => {
                // SAFETY: p was just allocated by a with this layout.
                unsafe { a.deallocate(p.cast(), l(16)) };
                false
            }
            Err(AllocError) => true,
        })
        .collect()
}

#[test]
fn no_schedule_fails_nothing() {
    let a = FailingAlloc::new(PoolAlloc::new());
    assert!(outcomes(&a, 100).iter().all(|&f| !f));
    assert_eq!((a.allocations(), a.failures()), (100, 0));
}

#[test]
fn fail_after_n_fails_every_later_allocation() {
    for n in [0, 1, 5, 64] {
        let a = FailingAlloc::new(PoolAlloc::new()).fail_after(n);
        let got = outcomes(&a, 100);
        let want: Vec<bool> = (0..100).map(|i| i >= n).collect();
        assert_eq!(got, want, "fail_after({n})");
        assert_eq!((a.allocations(), a.failures()), (100, 100 - n));
    }
}

#[test]
fn fail_pattern_follows_the_bits_lowest_first_and_nothing_past_its_end() {
    let pattern = [0b0000_0101u8, 0x00, 0b1000_0000];
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&pattern);
    let got = outcomes(&a, 40);
    let failed: Vec<usize> = (0..40).filter(|&i| got[i]).collect();
    assert_eq!(failed, vec![0, 2, 23]);
    assert_eq!(a.failures(), 3);
    // An empty pattern fails nothing.
    let b = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[]);
    assert!(outcomes(&b, 20).iter().all(|&f| !f));
}

#[test]
fn a_pattern_longer_than_the_run_uses_only_its_start() {
    let pattern = vec![0xffu8; 1 << 16];
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&pattern);
    assert!(outcomes(&a, 10).iter().all(|&f| f));
    assert_eq!((a.allocations(), a.failures()), (10, 10));
}

#[test]
fn the_pattern_is_copied() {
    let mut input = vec![0b10u8];
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&input);
    input[0] = 0b01;
    drop(input);
    assert_eq!(outcomes(&a, 3), vec![false, true, false]);
}

#[test]
fn both_schedules_fail_what_either_names_and_a_second_call_replaces_the_first() {
    let a = FailingAlloc::new(PoolAlloc::new())
        .fail_pattern(&[0b0000_0010])
        .fail_after(100)
        .fail_after(4);
    assert_eq!(outcomes(&a, 6), vec![false, true, false, false, true, true]);
    let b = FailingAlloc::new(PoolAlloc::new())
        .fail_pattern(&[0b1])
        .fail_pattern(&[0b100]);
    assert_eq!(outcomes(&b, 4), vec![false, false, true, false]);
}

#[test]
fn grow_counts_and_a_failed_grow_keeps_the_contents() {
    // allocation 0: the first reserve; 1: a grow, which fails; 2: the grow again, which succeeds.
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[0b010]);
    let mut v: AVec<u64, _> = AVec::new_in(&a);
    v.try_reserve_exact(4).unwrap();
    v.extend([1, 2, 3, 4]);
    assert!(v.try_reserve_exact(1000).is_err());
    assert_eq!(&v[..], &[1, 2, 3, 4]);
    v.try_reserve_exact(1000).unwrap();
    assert_eq!(&v[..], &[1, 2, 3, 4]);
    assert_eq!((a.allocations(), a.failures()), (3, 1));
    // Shrinking and freeing are not allocations.
    v.shrink_to_fit();
    drop(v);
    assert_eq!(a.allocations(), 3);
}

#[test]
fn zeroed_allocations_count_and_are_zeroed() {
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[0b10]);
    let p = a.allocate_zeroed(l(64)).unwrap();
    // SAFETY: p holds at least 64 initialised (zeroed) bytes.
    assert!(
        unsafe { core::slice::from_raw_parts(p.cast::<u8>().as_ptr(), 64) }
            .iter()
            .all(|&b| b == 0)
    );
    assert!(a.allocate_zeroed(l(64)).is_err());
    // SAFETY: allocated above with this layout.
    unsafe { a.deallocate(p.cast(), l(64)) };
    assert_eq!((a.allocations(), a.failures()), (2, 1));
}

#[test]
fn one_failing_alloc_serves_several_containers_in_one_numbering() {
    let a = FailingAlloc::new(PoolAlloc::new()).fail_after(3);
    let mut x: AVec<u8, _> = AVec::new_in(&a);
    let mut y: AVec<u8, _> = AVec::new_in(&a);
    let mut m: hashbrown::HashMap<u32, u32, _, _> = hashbrown::HashMap::new_in(&a);
    assert!(x.try_reserve(8).is_ok()); // 0
    assert!(y.try_reserve(8).is_ok()); // 1
    assert!(m.try_reserve(4).is_ok()); // 2
    assert!(x.try_reserve(100).is_err()); // 3
    assert!(y.try_reserve(100).is_err()); // 4
    assert_eq!((a.allocations(), a.failures()), (5, 2));
}

#[test]
fn it_is_send_and_sync_and_threads_share_the_numbering() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FailingAlloc>();
    assert_send_sync::<FailingAlloc<Global>>();
    let a = FailingAlloc::new(PoolAlloc::new()).fail_after(1000);
    let failed: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| outcomes(&a, 400).iter().filter(|&&f| f).count()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(failed, 600);
    assert_eq!((a.allocations(), a.failures()), (1600, 600));
}

#[test]
fn an_inner_allocator_that_fails_is_passed_through_and_counted() {
    // Inner: fails its own allocations 1 and 2. Outer: fails its allocation 0 (never reaching the
    // inner one) and 3.
    let inner = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[0b0110]);
    let outer = FailingAlloc::new(&inner).fail_pattern(&[0b1001]);
    // outer 0: schedule; 1 → inner 0 ok; 2 → inner 1 fails; 3: schedule; 4 → inner 2 fails;
    // 5 → inner 3 ok.
    assert_eq!(
        outcomes(&outer, 6),
        vec![true, false, true, true, true, false]
    );
    assert_eq!((outer.allocations(), outer.failures()), (6, 4));
    assert_eq!((inner.allocations(), inner.failures()), (4, 2));
}

#[test]
fn zero_sized_allocations_are_counted_and_scheduled() {
    let a = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[0b10]);
    let p = a.allocate(l(0)).unwrap();
    assert!(a.allocate(l(0)).is_err());
    // SAFETY: allocated above with this layout.
    unsafe { a.deallocate(p.cast(), l(0)) };
    assert_eq!((a.allocations(), a.failures()), (2, 1));
}

#[test]
fn any_allocator_can_be_wrapped_and_debug_prints_the_schedule() {
    let a = FailingAlloc::new(Global).fail_after(2);
    assert_eq!(outcomes(&a, 3), vec![false, false, true]);
    let d = format!("{a:?}");
    assert!(
        d.contains("fail_after: Some(2)") && d.contains("failures: 1"),
        "{d}"
    );
}
