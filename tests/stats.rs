//! Statistics are exact, memory goes back to the OS, and `trim` is safe from many threads.
//!
//! This binary keeps the system allocator as its global allocator and calls `PoolAlloc` directly,
//! so the pools hold exactly what these tests allocate. Tests share the process-wide pools, so they
//! run one at a time (SERIAL).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Mutex;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
static SERIAL: Mutex<()> = Mutex::new(());

fn class_index(size: usize) -> usize {
    // On musl a block of 16 bytes or more is 16-aligned, as malloc's are (src/base/size_class.rs
    // `SIXTEEN_FROM_16`): its size rounds up to a multiple of 16 before the class is chosen.
    let size = if cfg!(target_env = "musl") && size >= 16 {
        size.next_multiple_of(16)
    } else {
        size
    };
    poolalloc::class_sizes()
        .iter()
        .position(|&s| s >= size)
        .unwrap()
}

#[derive(Clone, Copy)]
struct Block(usize, usize); // address, size

/// Allocates `n` blocks of assorted sizes (including large ones) on a fresh thread.
fn allocate_on_thread(n: usize, seed: usize) -> Vec<Block> {
    std::thread::spawn(move || {
        (0..n)
            .map(|i| {
                let size = match (i * 31 + seed) % 10 {
                    0 => 40_000 + i % 1000, // large block
                    k => 1 + (i * 7919 + seed * 13 + k) % 2000,
                };
                let l = Layout::from_size_align(size, 8).unwrap();
                // SAFETY: size > 0.
                let p = unsafe { P.alloc(l) };
                assert!(!p.is_null());
                // SAFETY: p holds size bytes.
                unsafe { p.write_bytes(1, size) };
                Block(p as usize, size)
            })
            .collect()
    })
    .join()
    .unwrap()
}

/// Frees blocks on a fresh thread that allocated nothing (a consumer).
fn free_on_thread(blocks: Vec<Block>) {
    std::thread::spawn(move || {
        for Block(p, size) in blocks {
            let l = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: allocated by P with this layout, freed once.
            unsafe { P.dealloc(p as *mut u8, l) };
        }
    })
    .join()
    .unwrap();
}

#[test]
fn totals_equal_what_was_allocated() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    poolalloc::trim();
    let before = poolalloc::stats();
    let mut blocks = allocate_on_thread(5000, 1);
    blocks.extend(allocate_on_thread(3000, 2));
    // And some on this (still running) thread, whose counters are read live.
    let big = Layout::from_size_align(100_000, 8).unwrap();
    // SAFETY: non-zero size; freed below with the same layout.
    let mine = unsafe { P.alloc(big) };
    let small = Layout::from_size_align(24, 8).unwrap();
    // SAFETY: as above.
    let mine_small = unsafe { P.alloc(small) };
    let s = poolalloc::stats();
    assert_eq!(
        s.large_blocks - before.large_blocks,
        1 + blocks.iter().filter(|b| b.1 > poolalloc::MAX_SMALL).count()
    );
    // SAFETY: allocated above with these layouts.
    unsafe {
        P.dealloc(mine, big);
        P.dealloc(mine_small, small);
    }

    let mut want_req = vec![0usize; poolalloc::class_sizes().len()];
    let mut want_live = vec![0usize; poolalloc::class_sizes().len()];
    let (mut large_n, mut large_b) = (0, 0);
    for &Block(_, size) in &blocks {
        if size > poolalloc::MAX_SMALL {
            large_n += 1;
            large_b += size;
        } else {
            want_req[class_index(size)] += size;
            want_live[class_index(size)] += 1;
        }
    }
    let s = poolalloc::stats();
    for (c, cs) in s.classes().iter().enumerate() {
        let b = &before.classes()[c];
        assert_eq!(
            cs.requested_bytes - b.requested_bytes,
            want_req[c],
            "class {}",
            cs.slot_size
        );
        assert_eq!(
            cs.live_slots - b.live_slots,
            want_live[c],
            "class {}",
            cs.slot_size
        );
    }
    assert_eq!(s.large_blocks - before.large_blocks, large_n);
    assert_eq!(s.large_bytes - before.large_bytes, large_b);
    let text = s.to_string();
    assert!(text.contains("requested") && text.contains("rss"), "{text}");

    // Freed by a thread that never allocated: the counts go back to where they started.
    free_on_thread(blocks);
    let after = poolalloc::stats();
    for (c, cs) in after.classes().iter().enumerate() {
        assert_eq!(
            cs.requested_bytes,
            before.classes()[c].requested_bytes,
            "class {}",
            cs.slot_size
        );
        assert_eq!(
            cs.live_slots,
            before.classes()[c].live_slots,
            "class {}",
            cs.slot_size
        );
    }
    assert_eq!(after.large_blocks, before.large_blocks);
    // The consumer thread exited: its cache went back to the pools, so nothing is cached by it.
    poolalloc::trim();
    let trimmed = poolalloc::stats();
    assert_eq!(trimmed.cached_bytes, 0, "{trimmed}");
}

use poolalloc_test_support::rss;

/// The process's resident set, as poolalloc reports it.
fn rss() -> usize {
    rss::bytes(poolalloc::stats().rss_bytes)
}

#[test]
#[cfg_attr(
    not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "freebsd",
        windows
    )),
    ignore = "poolalloc::stats() reports no RSS on this OS"
)]
fn freeing_everything_returns_memory() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    poolalloc::trim();
    let start = rss();
    // About 200 MiB of small blocks, written so they are resident.
    let mut all = Vec::new();
    for t in 0..4 {
        all.push(std::thread::spawn(move || {
            let mut v = Vec::with_capacity(400_000);
            for i in 0..400_000usize {
                let size = 16 + (i * 37 + t) % 240;
                let l = Layout::from_size_align(size, 8).unwrap();
                // SAFETY: size > 0; p holds size bytes.
                unsafe {
                    let p = P.alloc(l);
                    p.write_bytes(7, size);
                    v.push(Block(p as usize, size));
                }
            }
            v
        }));
    }
    let blocks: Vec<Vec<Block>> = all.into_iter().map(|h| h.join().unwrap()).collect();
    let peak = rss();
    let grown = peak - start;
    assert!(grown > 40 << 20, "expected a large heap, grew {grown}");

    // Free everything, from other threads, and make no call: the memory must go back by itself.
    for b in blocks {
        free_on_thread(b);
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = rss();
    eprintln!(
        "rss: start {} KiB, peak {} KiB, 1 s after freeing everything {} KiB",
        start >> 10,
        peak >> 10,
        after >> 10
    );
    let skip_rss = rss::not_the_programs();
    if let Some(why) = &skip_rss {
        eprintln!("RSS assertions skipped: {why}");
    } else {
        assert!(
            after.saturating_sub(start) * 10 <= grown,
            "after freeing everything RSS is {} MiB above the start (peak {} MiB above)\n{}",
            after.saturating_sub(start) >> 20,
            grown >> 20,
            poolalloc::stats()
        );
    }
    poolalloc::trim();
    let trimmed = poolalloc::stats();
    eprintln!("after trim():\n{trimmed}");
    if skip_rss.is_none() {
        assert!(trimmed.rss_bytes.unwrap() <= start + (4 << 20), "{trimmed}");
    }
    assert!(
        trimmed.reserved_bytes <= 8 * poolalloc::CHUNK_SIZE,
        "{trimmed}"
    );
}

#[test]
fn trim_from_many_threads_at_once_is_safe() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut live = Vec::new();
                for i in 0..30_000usize {
                    let size = 1 + (i * 131 + t * 7) % 5000;
                    let l = Layout::from_size_align(size, 8).unwrap();
                    // SAFETY: size > 0; blocks freed once with their layout.
                    unsafe {
                        let p = P.alloc(l);
                        p.write_bytes(t as u8, size);
                        live.push((p, l));
                        if i % 3 == 0 {
                            let (q, ql) = live.swap_remove(i % live.len());
                            assert!((0..ql.size()).all(|k| *q.add(k) == t as u8));
                            P.dealloc(q, ql);
                        }
                    }
                    if i % 1000 == 0 {
                        poolalloc::trim();
                    }
                }
                for (q, ql) in live {
                    // SAFETY: as above.
                    unsafe { P.dealloc(q, ql) };
                }
                poolalloc::trim();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Remote frees wait in the freeing thread's batches before they reach their chunk: while both
/// threads run, the counts are already exact (a batched slot is counted as freed, and as cached);
/// the freeing thread's `trim` sends its batches, after which the owner's `trim` collects them
/// and nothing is cached.
#[test]
fn batched_remote_frees_are_counted_at_once_and_sent_by_trim() {
    use std::sync::mpsc::channel;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    poolalloc::trim();
    let c = class_index(48);
    let l = Layout::from_size_align(48, 8).unwrap();
    let before = poolalloc::stats();
    // The owner: allocates, hands the blocks over, trims when told, exits when told.
    let (to_main, from_owner) = channel::<Vec<usize>>();
    let (to_owner, owner_rx) = channel::<()>();
    let owner = std::thread::spawn(move || {
        // SAFETY: a non-zero layout; the blocks are freed by the consumer with it.
        let blocks: Vec<usize> = (0..1000).map(|_| unsafe { P.alloc(l) } as usize).collect();
        to_main.send(blocks).unwrap();
        owner_rx.recv().unwrap();
        poolalloc::trim();
        to_main.send(Vec::new()).unwrap();
        owner_rx.recv().unwrap();
    });
    // The consumer: frees them all, trims when told, exits when told.
    let (to_consumer, consumer_rx) = channel::<Vec<usize>>();
    let (consumer_done, from_consumer) = channel::<()>();
    let consumer = std::thread::spawn(move || {
        for p in consumer_rx.recv().unwrap() {
            // SAFETY: allocated by P with l, freed once.
            unsafe { P.dealloc(p as *mut u8, l) };
        }
        consumer_done.send(()).unwrap();
        consumer_rx.recv().unwrap();
        poolalloc::trim();
        consumer_done.send(()).unwrap();
        consumer_rx.recv().unwrap();
    });
    to_consumer.send(from_owner.recv().unwrap()).unwrap();
    from_consumer.recv().unwrap();
    let freed = poolalloc::stats();
    assert_eq!(
        freed.classes()[c].live_slots,
        before.classes()[c].live_slots,
        "{freed}"
    );
    assert_eq!(
        freed.classes()[c].requested_bytes,
        before.classes()[c].requested_bytes
    );
    assert!(freed.classes()[c].cached_slots >= 1000, "{freed}");
    // The consumer sends what it holds; the owner collects it and gives the empty chunks back.
    to_consumer.send(Vec::new()).unwrap();
    from_consumer.recv().unwrap();
    to_owner.send(()).unwrap();
    from_owner.recv().unwrap();
    let trimmed = poolalloc::stats();
    assert_eq!(trimmed.classes()[c].cached_slots, 0, "{trimmed}");
    assert_eq!(
        trimmed.classes()[c].live_slots,
        before.classes()[c].live_slots
    );
    to_consumer.send(Vec::new()).unwrap();
    to_owner.send(()).unwrap();
    owner.join().unwrap();
    consumer.join().unwrap();
}

/// A block that realloc keeps in its slot stays counted there: one live slot of the slot's class
/// with its new requested size, while it shrinks into a smaller class's sizes, grows back, and is
/// freed (on another thread) with its last layout.
#[test]
fn realloc_in_place_keeps_the_counts_exact() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let slot = class_index(1000);
    let before = poolalloc::stats();
    let l = |s| Layout::from_size_align(s, 8).unwrap();
    let delta = |s: &poolalloc::Stats, c: usize| {
        (
            s.classes()[c].live_slots - before.classes()[c].live_slots,
            s.classes()[c].requested_bytes - before.classes()[c].requested_bytes,
        )
    };
    // SAFETY: sizes > 0; the block is reallocated and freed with the layout it has at each step.
    let p = unsafe { P.alloc(l(1000)) };
    let mut size = 1000;
    for new in [600, 900, 520, 1024] {
        // SAFETY: as above.
        let q = unsafe { P.realloc(p, l(size), new) };
        assert_eq!(
            q,
            p,
            "{size} -> {new} stays in the {}-byte slot",
            poolalloc::class_sizes()[slot]
        );
        size = new;
        let s = poolalloc::stats();
        assert_eq!(delta(&s, slot), (1, new), "after {new}");
        let small = class_index(new);
        if small != slot {
            assert_eq!(
                delta(&s, small),
                (0, 0),
                "nothing counted in the class of {new}"
            );
        }
    }
    let p = p as usize;
    std::thread::spawn(move || {
        // SAFETY: the block's last layout; freed once.
        unsafe { P.dealloc(p as *mut u8, l(size)) }
    })
    .join()
    .unwrap();
    let s = poolalloc::stats();
    assert_eq!(delta(&s, slot), (0, 0));
}

/// `chunks_purged` counts every chunk whose pages went back, with the default settings too
/// (issue 41: a chunk outside a huge-page unit, purged before the source took it back, was never
/// counted, so the figure stayed 0). A thread fills at least 16 chunks of one class and frees
/// them all; `trim` then purges every empty chunk, and the count grows by exactly the chunks
/// that stopped existing (each of them purged, or unmapped with its unit; on wasm32, where memory
/// never goes back, none stops existing and none is purged).
#[test]
fn chunks_purged_grows_by_the_chunks_given_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    poolalloc::trim();
    let before = poolalloc::stats();
    let size = 1000;
    let slot = poolalloc::class_sizes()[class_index(size)];
    let n = 16 * poolalloc::CHUNK_SIZE / slot;
    let l = Layout::from_size_align(size, 8).unwrap();
    let during = std::thread::spawn(move || {
        // SAFETY: a non-zero layout; every block is freed below with it.
        unsafe {
            let blocks: Vec<usize> = (0..n).map(|_| P.alloc(l) as usize).collect();
            assert!(blocks.iter().all(|&p| p != 0));
            let during = poolalloc::stats();
            for p in blocks {
                P.dealloc(p as *mut u8, l);
            }
            during
        }
    })
    .join()
    .unwrap();
    poolalloc::trim();
    let after = poolalloc::stats();
    if cfg!(target_family = "wasm") {
        // Memory never goes back to the OS on wasm32: the chunks given back wait, empty, for
        // reuse by any class (they still exist), and nothing is purged.
        assert_eq!(after.chunks_purged, before.chunks_purged, "{after:?}");
        return;
    }
    let gone = during.chunks - after.chunks;
    assert!(gone >= 16, "{gone} chunks went: {during:?} then {after:?}");
    assert_eq!(
        after.chunks_purged - before.chunks_purged,
        gone,
        "chunks purged, for {gone} chunks given back"
    );
}

/// The cumulative counters move by what the program did (allocations and frees of a known
/// number of blocks, on this quiet binary whose global allocator is not ours), never back, and
/// the JSON rendering carries the same figures as the snapshot.
#[test]
fn cumulative_counters_and_json() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = poolalloc::stats();
    let (n, size) = (3000, 100);
    let c = class_index(size);
    let l = Layout::from_size_align(size, 8).unwrap();
    let large = Layout::from_size_align(100_000, 8).unwrap();
    let (during, after) = std::thread::spawn(move || {
        // SAFETY: non-zero layouts; every block is freed below with its layout.
        unsafe {
            let blocks: Vec<usize> = (0..n).map(|_| P.alloc(l) as usize).collect();
            let big = P.alloc(large);
            assert!(blocks.iter().all(|&p| p != 0) && !big.is_null());
            let during = poolalloc::stats();
            for p in blocks {
                P.dealloc(p as *mut u8, l);
            }
            P.dealloc(big, large);
            (during, poolalloc::stats())
        }
    })
    .join()
    .unwrap();
    let slot = poolalloc::class_sizes()[c];
    // Every slot handed out was supplied first; supply comes in batches of at most a chunk.
    let supplied = during.classes()[c].allocations - before.classes()[c].allocations;
    assert!(supplied >= n, "{supplied} supplied for {n} blocks");
    assert!(supplied < n + poolalloc::CHUNK_SIZE / slot, "{supplied}");
    assert_eq!(
        during.allocations - before.allocations,
        supplied + 1,
        "small supply plus one large block (no other allocation through P)"
    );
    assert!(
        during.allocated_bytes - before.allocated_bytes >= n * slot + large.size(),
        "{during:?}"
    );
    assert_eq!(during.live_blocks() - before.live_blocks(), n + 1);
    assert_eq!(after.live_blocks(), before.live_blocks());
    assert!(
        after.frees > during.frees + n,
        "{} then {}",
        during.frees,
        after.frees
    );
    assert!(after.allocations >= during.allocations);
    assert!(during.peak_reserved_bytes >= during.reserved_bytes);
    assert!(during.chunks_mapped >= during.chunks, "{during:?}");
    assert!(after.chunks_purged >= before.chunks_purged);

    // JSON: the same figures, parsed back by a real parser.
    let text = after.json().to_string();
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    for (key, want) in [
        ("live_bytes", after.live_bytes),
        ("requested_bytes", after.requested_bytes),
        ("allocations", after.allocations),
        ("frees", after.frees),
        ("chunks_mapped", after.chunks_mapped),
        ("peak_reserved_bytes", after.peak_reserved_bytes),
        ("large_blocks", after.large_blocks),
    ] {
        assert_eq!(v[key].as_u64(), Some(want as u64), "{key} in {text}");
    }
    // A Rust program passes every size: requested bytes are known.
    assert_eq!(v["requested_known"].as_bool(), Some(true), "{text}");
    let classes = v["classes"].as_array().unwrap();
    assert_eq!(classes.len(), after.classes().len());
    assert_eq!(
        classes[c]["allocations"].as_u64(),
        Some(after.classes()[c].allocations as u64)
    );
    assert_eq!(classes[c]["slot_size"].as_u64(), Some(slot as u64));
    match after.rss_bytes {
        Some(r) => assert_eq!(v["rss_bytes"].as_u64(), Some(r as u64)),
        None => assert!(v["rss_bytes"].is_null()),
    }
}
