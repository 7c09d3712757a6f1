//! `PoolAlloc`'s large blocks from each source (`poolalloc::LargeBlocks`): the system allocator,
//! the same told to keep freed blocks, and spans of our own. A block is freed and resized where it
//! came from whatever the setting says by then, so the setting can change with blocks alive; and
//! spans grown, shrunk and freed on several threads at once stay recognised as spans (a span moved
//! by `mremap` must leave the address map before its old range can be mapped again by another
//! thread, or a new span there is taken for a system block and handed to `free`).
//!
//! One test function: the setting is process-wide, and tests of one binary run concurrently.

use poolalloc::LargeBlocks;
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const SOURCES: [LargeBlocks; 3] = [
    LargeBlocks::System,
    LargeBlocks::SystemKept,
    LargeBlocks::Spans,
];

/// A byte pattern for block `i` at offset `j`.
fn byte(i: usize, j: usize) -> u8 {
    (i * 31 + j * 7) as u8
}

/// Blocks of several large sizes and alignments, filled with a pattern (`zeroed` ones checked
/// zero first), then resized and freed under every other source.
fn mixed_sources() {
    let sizes = [33 << 10, 100 << 10, 256 << 10, 1 << 20, 5 << 20];
    let aligns = [8, 64, 4096, 64 << 10];
    for &made_by in &SOURCES {
        poolalloc::set_large_blocks(made_by);
        let mut blocks = Vec::new();
        for (i, (&size, &align)) in sizes.iter().zip(aligns.iter().cycle()).enumerate() {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a valid, non-zero layout.
            let p = unsafe {
                if i % 2 == 0 {
                    GLOBAL.alloc_zeroed(l)
                } else {
                    GLOBAL.alloc(l)
                }
            };
            assert!(!p.is_null(), "{made_by:?}: {size} bytes at {align}");
            assert_eq!(p as usize % align, 0, "{made_by:?}: alignment");
            // SAFETY: p holds size bytes, ours alone.
            let b = unsafe { std::slice::from_raw_parts_mut(p, size) };
            if i % 2 == 0 {
                assert!(b.iter().all(|&x| x == 0), "{made_by:?}: zeroed block");
            }
            for (j, x) in b.iter_mut().enumerate() {
                *x = byte(i, j);
            }
            blocks.push((p, l));
        }
        for &now in &SOURCES {
            poolalloc::set_large_blocks(now);
            // Grow the first half and shrink the rest (staying large), then check the contents.
            for (i, (p, l)) in blocks.iter_mut().enumerate() {
                let new = if i < 2 {
                    l.size() * 3
                } else {
                    l.size() / 2 + 40_000
                };
                // SAFETY: a live block of layout l; new is large, a valid size at l's alignment.
                let q = unsafe { GLOBAL.realloc(*p, *l, new) };
                assert!(!q.is_null(), "{made_by:?} -> {now:?}: realloc");
                assert_eq!(
                    q as usize % l.align(),
                    0,
                    "{made_by:?} -> {now:?}: alignment"
                );
                let kept = l.size().min(new);
                // SAFETY: q holds new ≥ kept bytes.
                let b = unsafe { std::slice::from_raw_parts_mut(q, new) };
                assert!(
                    (0..kept).all(|j| b[j] == byte(i, j)),
                    "{made_by:?} -> {now:?}: contents moved"
                );
                for (j, x) in b.iter_mut().enumerate() {
                    *x = byte(i, j);
                }
                *p = q;
                *l = Layout::from_size_align(new, l.align()).unwrap();
            }
        }
        for (p, l) in blocks {
            // SAFETY: live blocks of these layouts.
            unsafe { GLOBAL.dealloc(p, l) };
        }
    }
}

/// Threads grow buffers from 16 KiB to a few MiB by appending (each doubling a realloc that may
/// move the span), keep a window of them and hand the rest to a thread that drops them.
fn spans_on_threads() {
    poolalloc::set_large_blocks(LargeBlocks::Spans);
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let dropper = std::thread::spawn(move || {
        for b in rx {
            let t = b[0];
            assert!(b.iter().all(|&x| x == t), "a dropped buffer was corrupted");
        }
    });
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(t);
                let mut window = std::collections::VecDeque::new();
                for _ in 0..60 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let target = (16 << 10) + (x % (3 << 20) as u64) as usize;
                    let mut b: Vec<u8> = Vec::new();
                    while b.len() < target {
                        b.extend_from_slice(&[t + 1; 4096]);
                    }
                    if x % 3 == 0 {
                        b.shrink_to_fit();
                    }
                    window.push_back(b);
                    if window.len() > 6 {
                        tx.send(window.pop_front().unwrap()).unwrap();
                    }
                }
                assert!(window.iter().flatten().all(|&v| v == t + 1));
            })
        })
        .collect();
    drop(tx);
    for w in workers {
        w.join().unwrap();
    }
    dropper.join().unwrap();
}

#[test]
fn large_blocks_from_every_source() {
    mixed_sources();
    for _ in 0..3 {
        spans_on_threads();
    }
}
