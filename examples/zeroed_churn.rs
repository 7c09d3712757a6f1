//! Issue 36's churn of zeroed boxes, for comparing libcs: `vec![0u8; n].into_boxed_slice()` into a
//! random one of 50,000 slots, the old box dropped; sizes 70% 8–63 B, 25% 64–511 B, 5% 512 B–4 KiB.
//!
//! `zeroed_churn [ITERATIONS] [ALLOC]` (ALLOC: `poolalloc`, the default, or `rusty_alloc` on Linux
//! with the benchmark peers) prints the time. Built for glibc and for musl
//! (`--target x86_64-unknown-linux-musl`), the same source shows what each libc's part costs;
//! `benches/results/fastpath-account.md` has the figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::time::Instant;

/// 0: poolalloc, 1: rusty_alloc (set once in `main`, before the churn; the runtime's earlier
/// blocks are poolalloc's, and each block is freed by the allocator that made it: see `owner`).
static WHICH: AtomicU8 = AtomicU8::new(0);
static POOL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[cfg(all(
    target_os = "linux",
    any(target_env = "gnu", target_env = "musl"),
    not(poolalloc_no_bench_peers)
))]
static RUSTY: rusty_alloc_api::RustyAlloc = rusty_alloc_api::RustyAlloc;

struct Switch;

impl Switch {
    fn pick(&self) -> &'static dyn GlobalAlloc {
        match WHICH.load(Relaxed) {
            #[cfg(all(
                target_os = "linux",
                any(target_env = "gnu", target_env = "musl"),
                not(poolalloc_no_bench_peers)
            ))]
            1 => &RUSTY,
            2 => &System,
            _ => &POOL,
        }
    }
}

// SAFETY: every call goes to one allocator, the same for a block's whole life: the choice is made
// once, before the churn, and the blocks made before it (the runtime's) are never freed during it.
// (Blocks of the runtime freed at exit after a switch would go to the wrong allocator: `main`
// leaves with `exit` before that.)
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { self.pick().alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { self.pick().alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { self.pick().dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { self.pick().realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Switch = Switch;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let which = args.next().unwrap_or_else(|| "poolalloc".into());
    let code = match which.as_str() {
        "poolalloc" => 0,
        "rusty_alloc" => 1,
        "system" => 2,
        other => panic!("unknown allocator {other}"),
    };
    // Everything the churn holds is made after the switch.
    WHICH.store(code, Relaxed);
    let mut slots: Vec<Option<Box<[u8]>>> = (0..50_000).map(|_| None).collect();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let t = Instant::now();
    let mut sum = 0usize;
    for _ in 0..n {
        let p = r.range(0, 100);
        let size = if p < 70 {
            r.range(8, 64)
        } else if p < 95 {
            r.range(64, 512)
        } else {
            r.range(512, 4097)
        };
        let b = vec![0u8; size].into_boxed_slice();
        sum += b[size - 1] as usize + b.len();
        let i = r.range(0, slots.len());
        slots[i] = Some(b);
    }
    let secs = t.elapsed().as_secs_f64();
    println!("{which}: {n} boxes in {secs:.3} s (checksum {sum})");
    // Leave without freeing (see the SAFETY comment on the allocator).
    std::process::exit(0);
}
