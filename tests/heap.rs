//! `poolalloc::Heap`: collections in a heap (allocator-api2's `Vec` and `Box`, hashbrown), the
//! shadow model through it, threads sharing one, its statistics and limit, and dropping it with
//! blocks allocated (small and large): everything it held goes back to the pools.

use allocator_api2::alloc::Allocator;
use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use poolalloc::Heap;
use poolalloc_test_support::seed;
use poolalloc_test_support::shadow::{self, AsGlobal};
use std::alloc::Layout;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// The tests take turns: one compares the process's counts before and after.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn collections_live_in_a_heap_and_its_counts_are_exact() {
    let _turn = turn();
    let heap = Heap::new();
    {
        let mut v: Vec<u64, &Heap> = Vec::new_in(&heap);
        v.extend(0..10_000);
        let mut m = hashbrown::HashMap::new_in(&heap);
        for i in 0..5_000u32 {
            m.insert(i, Box::new_in(i.to_string(), &heap));
        }
        let b = Box::new_in([7u8; 100_000], &heap); // a large block
        assert_eq!(v.iter().sum::<u64>(), 10_000 * 9_999 / 2);
        assert!((0..5_000u32).all(|i| *m[&i] == i.to_string()));
        assert!(b.iter().all(|&x| x == 7));
        let s = heap.stats();
        assert_eq!(s.live_blocks, 1 + 1 + 5_000 + 1, "{s:?}");
        assert!(s.live_bytes >= 10_000 * 8 + 100_000 + 5_000 * 24, "{s:?}");
        assert!(s.peak_bytes >= s.live_bytes);
    }
    let s = heap.stats();
    assert_eq!((s.live_blocks, s.live_bytes), (0, 0), "{s:?}");
    assert!(s.allocations > 5_000);
}

#[test]
fn the_shadow_model_runs_on_a_heap() {
    let _turn = turn();
    let heap = Heap::new();
    for s in 0..40 {
        shadow::Shadow::new(&AsGlobal(&heap)).run(&seed::input(s, 2048));
    }
    // The operations of one model spread over threads that come and go.
    for s in 0..10 {
        shadow::run_threaded(&AsGlobal(&heap), &seed::input(1000 + s, 4096));
    }
    let n = seed::replay(&seed::regressions("global_alloc"), |data| {
        let h = Heap::new();
        shadow::Shadow::new(&AsGlobal(&h)).run(data);
    });
    assert!(n > 0);
    let s = heap.stats();
    assert_eq!((s.live_blocks, s.live_bytes), (0, 0), "{s:?}");
}

#[test]
fn threads_share_a_heap_and_free_each_others_blocks() {
    let _turn = turn();
    let heap = Heap::new();
    let (tx, rx) = std::sync::mpsc::channel::<Box<[u8; 48], &Heap>>();
    std::thread::scope(|s| {
        let heap = &heap;
        for t in 0..4u8 {
            let tx = tx.clone();
            s.spawn(move || {
                let mut mine: Vec<Box<[u8; 48], &Heap>, &Heap> = Vec::new_in(heap);
                for i in 0..20_000u32 {
                    let b = Box::new_in([t.wrapping_add(i as u8); 48], heap);
                    if i % 2 == 0 {
                        tx.send(b).unwrap();
                    } else {
                        mine.push(b);
                    }
                }
                assert!(mine.iter().all(|b| b.iter().all(|&x| x == b[0])));
            });
        }
        drop(tx);
        s.spawn(move || {
            for b in rx {
                assert!(
                    b.iter().all(|&x| x == b[0]),
                    "a block moved between threads changed"
                );
            }
        });
    });
    let s = heap.stats();
    assert_eq!((s.live_blocks, s.live_bytes), (0, 0), "{s:?}");
    assert!(s.allocations >= 4 * 20_000, "{s:?}");
}

#[test]
fn a_limit_refuses_what_would_pass_it() {
    let _turn = turn();
    let heap = Heap::with_limit(64 << 10);
    let mut v: Vec<u8, &Heap> = Vec::new_in(&heap);
    v.try_reserve_exact(60 << 10).unwrap();
    assert!(v.try_reserve_exact(70 << 10).is_err());
    let a = Box::try_new_in([0u8; 4096], &heap);
    assert!(a.is_ok(), "room for 4 KiB more");
    assert!(Box::try_new_in([0u8; 4096], &heap).is_err());
    assert_eq!(heap.stats().refused, 2);
    drop(v);
    assert!(
        Box::try_new_in([0u8; 4096], &heap).is_ok(),
        "room again after a free"
    );
    assert_eq!(heap.limit(), 64 << 10);
}

#[test]
fn dropping_a_heap_with_blocks_gives_back_everything() {
    let _turn = turn();
    let before = poolalloc::stats();
    {
        let heap = Heap::new();
        for i in 0..200_000u32 {
            let node: &mut [u32; 6] = Box::leak(Box::new_in([i; 6], &heap));
            node[5] = node[0] + 1;
        }
        for _ in 0..8 {
            let big: &mut [u8] =
                Box::leak(allocator_api2::vec![in &heap; 9u8; 300_000].into_boxed_slice());
            assert_eq!(big[299_999], 9);
        }
        let s = heap.stats();
        assert_eq!(s.live_blocks, 200_008, "{s:?}");
        let during = poolalloc::stats();
        assert!(
            during.requested_bytes + (64 << 10) >= before.requested_bytes + 200_000 * 24,
            "before {} during {}",
            before.requested_bytes,
            during.requested_bytes
        );
        assert!(during.large_blocks >= before.large_blocks + 8);
    }
    let after = poolalloc::stats();
    // The heap's slots and large blocks are gone from the process's counts (the test harness
    // may allocate meanwhile: a margin of 1 MiB and a few large blocks).
    assert!(
        after.requested_bytes < before.requested_bytes + (1 << 20),
        "before {} after {}",
        before.requested_bytes,
        after.requested_bytes
    );
    assert!(
        after.large_blocks <= before.large_blocks + 4,
        "{before:?}\n{after:?}"
    );
}

#[test]
fn zero_sized_and_over_aligned_blocks() {
    let _turn = turn();
    let heap = Heap::new();
    let z = heap
        .allocate(Layout::from_size_align(0, 64).unwrap())
        .unwrap();
    assert_eq!(z.as_ptr().cast::<u8>() as usize % 64, 0);
    // SAFETY: z came from this heap with this layout.
    unsafe { heap.deallocate(z.cast(), Layout::from_size_align(0, 64).unwrap()) };
    for align in [8, 64, 4096, 1 << 16] {
        let l = Layout::from_size_align(100, align).unwrap();
        let p = heap.allocate(l).unwrap().cast::<u8>();
        assert_eq!(p.as_ptr() as usize % align, 0);
        // SAFETY: p holds 100 bytes; freed once with its layout.
        unsafe {
            p.as_ptr().write_bytes(1, 100);
            heap.deallocate(p, l);
        }
    }
    assert_eq!(heap.stats().live_blocks, 0);
}

#[test]
fn a_dropped_heaps_chunks_come_back_clean_for_the_next() {
    let _turn = turn();
    let fill = |heap: &Heap, round: u8| {
        let mut v: Vec<Box<[u8; 48], &Heap>> = Vec::new();
        for i in 0..100_000u32 {
            v.push(Box::new_in([round ^ i as u8; 48], heap));
        }
        // Every other block freed: chunks end on the heap's lists of chunks with free slots,
        // not only full ones.
        let mut i = 0u32;
        v.retain(|b| {
            i += 1;
            assert!(b.iter().all(|&x| x == b[0]));
            i % 2 == 0
        });
        assert!(v.iter().all(|b| b.iter().all(|&x| x == b[0])));
        std::mem::forget(v); // the rest stays allocated until the heap goes
    };
    let first = Heap::new();
    fill(&first, 1);
    // Dropped on another thread than the one that allocated.
    std::thread::spawn(move || drop(first)).join().unwrap();
    let mapped = poolalloc::stats().chunks_mapped;
    let second = Heap::new();
    fill(&second, 2);
    let s = second.stats();
    assert_eq!(s.live_blocks, 50_000, "{s:?}");
    drop(second);
    let grew = poolalloc::stats().chunks_mapped - mapped;
    assert!(
        grew <= 4,
        "the second heap mapped {grew} chunks: the first's were not reused"
    );
}

/// `enter` routes the thread's global small blocks into the heap: counted in `entered_bytes`,
/// freed as they are freed (inside the scope or after it, on any thread), and valid after the
/// heap is dropped.
#[test]
fn a_scope_routes_global_blocks_into_the_heap() {
    let _turn = turn();
    let heap = Heap::new();
    // Made in the scope by code that knows nothing of the heap: strings, a vector, a map.
    let (strings, map) = heap.enter(|| {
        let strings: std::vec::Vec<String> = (0..10_000).map(|i| format!("value {i}")).collect();
        let map: std::collections::HashMap<u32, std::boxed::Box<[u8; 100]>> = (0..1000)
            .map(|i| (i, std::boxed::Box::new([i as u8; 100])))
            .collect();
        (strings, map)
    });
    let s = heap.stats();
    let strings_bytes: usize = strings.iter().map(|x| x.capacity()).sum();
    assert!(
        s.entered_bytes >= strings_bytes + 1000 * 100,
        "{s:?}, strings {strings_bytes}"
    );
    assert_eq!((s.live_blocks, s.live_bytes), (0, 0), "{s:?}");
    // Freed on another thread after the scope: the heap's count falls once the frees reach it.
    let t = std::thread::spawn(move || drop(map));
    t.join().unwrap();
    poolalloc::trim();
    heap.enter(|| {}); // the heap collects what other threads freed into it when used
    let after_map = heap.stats().entered_bytes;
    assert!(after_map < s.entered_bytes, "{after_map} then {s:?}");
    // Dropped while blocks of its scope live: they stay valid.
    drop(heap);
    for (i, x) in strings.iter().enumerate() {
        assert_eq!(*x, format!("value {i}"));
    }
    drop(strings);
}

/// Inside a scope the thread's own use of the heap does not wait for the scope's lock; nested
/// scopes, a scope of another heap inside, and a panic all restore the routing.
#[test]
fn scopes_nest_use_the_heap_and_end_on_panic() {
    let _turn = turn();
    let a = Heap::new();
    let b = Heap::new();
    let kept = a.enter(|| {
        let mut v: Vec<u64, &Heap> = Vec::new_in(&a);
        v.extend(0..1000);
        assert_eq!(a.stats().live_bytes, v.capacity() * 8);
        let inner = a.enter(|| vec![1u8; 5000]);
        let other = b.enter(|| vec![2u8; 7000]);
        assert!(b.stats().entered_bytes >= 7000);
        let back = vec![3u8; 3000]; // routed to `a` again
        (inner, other, back)
    });
    let s = a.stats();
    assert!(s.entered_bytes >= 8000, "{s:?}");
    assert!(s.entered_bytes < 8000 + 7000, "b's block is not a's: {s:?}");
    // Where a panic aborts (wasm32) it cannot be caught: that part runs where panics unwind.
    #[cfg(panic = "unwind")]
    {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.enter(|| {
                let _x = std::hint::black_box(std::boxed::Box::new([0u8; 100]));
                panic!("in a scope");
            })
        }));
        assert!(r.is_err());
    }
    // After the panic nothing is routed any more (what the panic hook allocated in the scope, a
    // backtrace's caches, may stay there).
    let before = a.stats().entered_bytes;
    let outside = vec![9u8; 20_000];
    assert_eq!(
        a.stats().entered_bytes,
        before,
        "routed after the scope ended"
    );
    drop((kept, outside));
    // Another thread waits for a scope, then proceeds.
    std::thread::scope(|s| {
        let a = &a;
        a.enter(|| {
            let t = s.spawn(move || a.stats());
            std::thread::sleep(std::time::Duration::from_millis(20));
            t
        })
        .join()
        .unwrap();
    });
}

/// The shadow model's global-allocator operations, run inside a scope: every block of the model
/// comes from the heap, is checked, and freed; the heap ends with nothing entered.
#[test]
fn the_shadow_model_runs_inside_a_scope() {
    let _turn = turn();
    let heap = Heap::new();
    for s in 0..20 {
        heap.enter(|| shadow::Shadow::new(&GLOBAL).run(&seed::input(500 + s, 2048)));
    }
    heap.enter(|| {});
    assert_eq!(heap.stats().entered_bytes, 0, "{:?}", heap.stats());
}
