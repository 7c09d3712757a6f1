//! Issue 46's controlled experiment on chunk headers in the caches: one size class, `CHUNKS`
//! chunks' worth of live blocks (nine tenths of their slots), and a random one replaced `OPS`
//! times. Every free reads and writes the header of a random one of the chunks, so the time per
//! replacement shows how the headers share the L1 and L2 sets: with every header at the same
//! offset in its chunk, more than a few chunks evict each other's header lines.
//!
//! `chunk_sets [SIZE [OPS [CHUNKS...]]]` (defaults: 64 B, 20 M, 1 4 8 16 36 64) prints
//! nanoseconds per replacement for each chunk count; compare two builds (main, and headers coloured
//! as in commit `b7c8e36`) with `farm-bench` or in turn. Blocks are not touched beyond what the
//! allocator does. Figures: `benches/results/local-churn-2026-12-04.md`.

use std::alloc::{GlobalAlloc, Layout};
use std::time::Instant;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let ops: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let mut counts: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if counts.is_empty() {
        counts = vec![1, 4, 8, 16, 36, 64];
    }
    let l = Layout::from_size_align(size, 8).expect("a valid size");
    // Slots a chunk holds, about (the class's size is the request's rounded up; the header and
    // the tail left unused take a little of the chunk).
    let per_chunk = poolalloc::CHUNK_SIZE / size.next_multiple_of(16);
    for chunks in counts {
        let live = (per_chunk * chunks * 9 / 10).max(1);
        // SAFETY: l has a non-zero size; every block is freed once, with l.
        let mut a: Vec<*mut u8> = (0..live).map(|_| unsafe { GLOBAL.alloc(l) }).collect();
        assert!(a.iter().all(|p| !p.is_null()), "out of memory");
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let t = Instant::now();
        for _ in 0..ops {
            let i = r.below(live);
            // SAFETY: a[i] is live, allocated with l; it is replaced at once.
            unsafe {
                GLOBAL.dealloc(a[i], l);
                a[i] = GLOBAL.alloc(l);
            }
        }
        let ns = t.elapsed().as_secs_f64() * 1e9 / ops as f64;
        println!("chunks {chunks:3}  live {live:8}  {ns:6.2} ns per replacement");
        for p in a {
            // SAFETY: as above.
            unsafe { GLOBAL.dealloc(p, l) };
        }
    }
}
