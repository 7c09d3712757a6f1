//! Cross-thread stress with abandonment: short threads allocate, hand their blocks to long-lived
//! consumers and to each other, and exit while the consumers still free those blocks into chunks
//! whose owner is gone (abandoned chunks, adopted by later threads or reaped by the purger).
//!
//! Checked: every block keeps its cookie until it is freed (a slot handed out twice would have its
//! cookie overwritten by the second owner), the statistics come back to the baseline exactly once
//! everything is freed (nothing leaks, nothing is counted twice), and the memory the pools hold
//! stays bounded across waves (abandoned chunks are reused or returned, not piled up).
//!
//! This binary keeps the system allocator global and calls `PoolAlloc` directly, so the pools hold
//! exactly what the test allocates (the channels and vectors use System).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::mpsc;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// A block with a cookie in its first and (from 16 bytes) last word: `addr ^ KEY ^ size`.
struct Block {
    addr: usize,
    size: usize,
}

/// (Its low half on 32-bit targets.)
const KEY: usize = 0x9e37_79b9_7f4a_7c15_u64 as usize;

fn cookie(addr: usize, size: usize) -> usize {
    addr ^ KEY ^ size
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

fn make(size: usize) -> Block {
    // SAFETY: non-zero size; the block is written within its size.
    unsafe {
        let p = P.alloc(layout(size));
        assert!(!p.is_null());
        let c = cookie(p as usize, size);
        p.cast::<usize>().write_unaligned(c);
        if size >= 16 {
            p.add(size - 8).cast::<usize>().write_unaligned(c);
        }
        Block {
            addr: p as usize,
            size,
        }
    }
}

fn free(b: Block) {
    let p = b.addr as *mut u8;
    let c = cookie(b.addr, b.size);
    // SAFETY: the block was made by `make` and is freed once, here.
    unsafe {
        assert_eq!(p.cast::<usize>().read_unaligned(), c, "cookie at start");
        if b.size >= 16 {
            assert_eq!(
                p.add(b.size - 8).cast::<usize>().read_unaligned(),
                c,
                "cookie at end"
            );
        }
        P.dealloc(p, layout(b.size));
    }
}

/// Sizes from 8 B to 64 KiB, mostly small, and now and then a large block (80 KiB).
fn size_of(i: usize, seed: usize) -> usize {
    match (i * 7 + seed * 13) % 50 {
        0 => 80 * 1024,
        1..=3 => 4096 + (i * 131 + seed) % (28 * 1024),
        k => 8 + ((i * 37 + seed * 11 + k) % 500),
    }
}

#[test]
fn blocks_freed_into_abandoned_chunks_are_neither_lost_nor_doubled() {
    let waves = if cfg!(debug_assertions) { 500 } else { 2000 };
    let before = poolalloc::stats();

    // Two long-lived consumers that check and free what short threads send them.
    let mut consumers = Vec::new();
    let mut txs = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel::<Vec<Block>>();
        txs.push(tx);
        consumers.push(std::thread::spawn(move || {
            for blocks in rx {
                for b in blocks {
                    free(b);
                }
            }
        }));
    }

    let mut reserved_at = Vec::new();
    // Blocks one wave's thread leaves for the next wave's thread to free.
    let mut carried: Vec<Block> = Vec::new();
    for wave in 0..waves {
        let txs2: Vec<_> = txs.clone();
        let inherit = std::mem::take(&mut carried);
        let h = std::thread::spawn(move || {
            // Free what the previous (now exited) thread left: frees into abandoned chunks, or
            // into chunks this thread adopted.
            for b in inherit {
                free(b);
            }
            let mut mine: Vec<Block> = (0..300).map(|i| make(size_of(i, wave))).collect();
            // A third freed here, the rest handed on; the thread exits while they are in flight.
            let keep: Vec<Block> = mine.drain(..100).collect();
            for b in keep {
                free(b);
            }
            let to_next: Vec<Block> = mine.drain(..50).collect();
            let half = mine.len() / 2;
            let second: Vec<Block> = mine.drain(half..).collect();
            txs2[0].send(mine).unwrap();
            txs2[1].send(second).unwrap();
            to_next
        });
        // A second short thread in the same wave that only frees and allocates a little.
        let h2 = std::thread::spawn(move || {
            let v: Vec<Block> = (0..20).map(|i| make(size_of(i, wave + 7))).collect();
            v
        });
        carried = h.join().unwrap();
        let v = h2.join().unwrap();
        txs[wave % 2].send(v).unwrap();
        if wave % 20 == 19 {
            reserved_at.push(poolalloc::stats().reserved_bytes);
        }
    }
    for b in std::mem::take(&mut carried) {
        free(b);
    }
    drop(txs);
    for c in consumers {
        c.join().unwrap();
    }

    // Every block is freed and every thread but this one has exited.
    poolalloc::trim();
    let after = poolalloc::stats();
    for (c, cs) in after.classes().iter().enumerate() {
        let b = &before.classes()[c];
        assert_eq!(
            cs.live_slots, b.live_slots,
            "live slots, class {}",
            cs.slot_size
        );
        assert_eq!(
            cs.requested_bytes, b.requested_bytes,
            "requested bytes, class {}",
            cs.slot_size
        );
        assert_eq!(cs.cached_slots, b.cached_slots, "uncollected remote frees");
    }
    assert_eq!(after.large_blocks, before.large_blocks);
    assert_eq!(after.large_bytes, before.large_bytes);
    // trim() reaped every abandoned chunk that became empty and released every empty chunk: the
    // pools hold no more than before (a leak of abandoned chunks would hold one or more per class
    // touched, dozens of chunks). Where memory never goes back to the OS (wasm32) trim keeps the
    // empty chunks for reuse, as retained ones; elsewhere none is retained after a trim.
    let retained: usize = after.classes().iter().map(|c| c.retained_chunks).sum();
    let abandoned: usize = after.classes().iter().map(|c| c.abandoned_chunks).sum();
    assert_eq!(abandoned, 0, "abandoned chunks left after trim\n{after}");
    assert!(
        after.chunks - retained <= before.chunks,
        "chunks held after trim: {} ({retained} retained; before: {})\n{after}",
        after.chunks,
        before.chunks
    );
    // Bounded across waves: the pools held at the last checkpoint not much more than at the
    // second (abandoned chunks are adopted and reaped, not piled up wave after wave).
    let (early, late) = (reserved_at[1], *reserved_at.last().unwrap());
    assert!(
        late <= early + 64 * poolalloc::CHUNK_SIZE,
        "reserved grew from {} KiB to {} KiB over the waves",
        early >> 10,
        late >> 10
    );
}
