//! poolalloc against the allocators of the `no_std` field, on the host and on wasm32-wasip1.
//!
//! ```text
//! cargo run --release -p poolalloc-field                                  # the host
//! cargo build --release -p poolalloc-field --target wasm32-wasip1
//! wasmtime run target/wasm32-wasip1/release/poolalloc-field.wasm          # wasm32 (WASI)
//! poolalloc-field [ROUNDS] [ACTIONS]                                      # defaults: 5, 1000000
//! ```
//!
//! **Random actions.** Each allocator gets a fresh region of `REGION` bytes (the region
//! allocators claim it; `PoolAlloc` and `System` take their memory from the OS, or linear memory on
//! wasm32) and a table of `SLOTS` blocks. An action picks a slot at random: an empty one gets a
//! block of a random size in `1..=bound` (alignment 8, or 16 for one request in eight); a full one
//! is freed (two times in three) or reallocated to a random size (once in three), its first and
//! last bytes checked. Sizes and choices come from one seeded generator, the same sequence for every
//! allocator. The table is sized so that the live bytes stay near a quarter of the region, so no
//! allocator runs out. Reported: million actions per second, the median of `ROUNDS` rounds run in
//! turn (allocator by allocator within a round, the order rotated each round), and the ratio to
//! talc's.
//!
//! **Heap efficiency** (region allocators only): a fresh region of `EFF_REGION` bytes filled with
//! blocks of random sizes in `1..=bound` until the first refusal; the share of the region that the
//! requested bytes of the live blocks take then (the median of 5 seeds).
//!
//! The workloads are written here; none of the contenders' benchmark code is used.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;
use poolalloc_bench_harness::stats::median;
use std::alloc::System;
use std::cell::RefCell;
use std::time::Instant;

/// Bytes of each region for the random actions.
const REGION: usize = if cfg!(target_family = "wasm") {
    32 << 20
} else {
    64 << 20
};
/// Bytes of each region for heap efficiency.
const EFF_REGION: usize = 1 << 20;
/// The size bounds measured.
const BOUNDS: [usize; 5] = [64, 256, 1024, 4096, 65536];

/// A small, fast generator (xorshift64*): the same sequence for every allocator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

/// A region of `len` bytes from the system allocator, 64-aligned, for a region allocator to claim.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Region {
        let l = Layout::from_size_align(len, 64).unwrap();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { System.alloc(l) };
        assert!(!ptr.is_null(), "no memory for a region of {len} bytes");
        Region { ptr, len }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { System.dealloc(self.ptr, Layout::from_size_align(self.len, 64).unwrap()) };
    }
}

/// rlsf's TLSF (no lock of its own) behind a `RefCell`: these runs have one thread.
struct Rlsf<'a>(RefCell<rlsf::Tlsf<'a, u32, u32, 28, 8>>);

// SAFETY: used by one thread only (this program has one), never shared across threads.
unsafe impl Sync for Rlsf<'_> {}

unsafe impl GlobalAlloc for Rlsf<'_> {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        self.0
            .borrow_mut()
            .allocate(l)
            .map_or(ptr::null_mut(), |p| p.as_ptr())
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: p came from `alloc` of this allocator with this alignment (caller).
        unsafe {
            self.0
                .borrow_mut()
                .deallocate(ptr::NonNull::new_unchecked(p), l.align())
        };
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let nl = Layout::from_size_align(new, l.align()).unwrap();
        // SAFETY: as in dealloc.
        unsafe {
            self.0
                .borrow_mut()
                .reallocate(ptr::NonNull::new_unchecked(p), nl)
                .map_or(ptr::null_mut(), |p| p.as_ptr())
        }
    }
}

/// The contenders, each built fresh over its own region.
#[derive(Clone, Copy, PartialEq)]
enum Who {
    PoolAlloc,
    Region,
    System,
    Talc,
    Rlsf,
    LinkedList,
    EmbeddedTlsf,
    EmbeddedLlff,
}

impl Who {
    const ALL: [Who; 8] = [
        Who::PoolAlloc,
        Who::Region,
        Who::System,
        Who::Talc,
        Who::Rlsf,
        Who::LinkedList,
        Who::EmbeddedTlsf,
        Who::EmbeddedLlff,
    ];

    fn name(self) -> &'static str {
        match self {
            Who::PoolAlloc => "poolalloc (PoolAlloc)",
            Who::Region => "poolalloc::region (RegionAlloc)",
            Who::System => {
                if cfg!(target_family = "wasm") {
                    "System (wasi-libc dlmalloc)"
                } else {
                    "System (glibc)"
                }
            }
            Who::Talc => "talc 5 (TalcLock, spin)",
            Who::Rlsf => "rlsf 0.2 (Tlsf)",
            Who::LinkedList => "linked_list_allocator 0.10",
            Who::EmbeddedTlsf => "embedded-alloc 0.7 TLSF",
            Who::EmbeddedLlff => "embedded-alloc 0.7 LLFF",
        }
    }

    /// Whether it allocates from a region it is given (else from the OS).
    fn regional(self) -> bool {
        !matches!(self, Who::PoolAlloc | Who::System)
    }

    /// Runs `f` with this allocator built over `region`.
    fn with<R>(self, region: &Region, f: impl FnOnce(&dyn GlobalAlloc) -> R) -> R {
        match self {
            Who::PoolAlloc => f(&poolalloc::PoolAlloc::new()),
            Who::Region => {
                // SAFETY: the region is ours, unused, and outlives the allocator.
                let r = poolalloc::region::RegionAlloc::new(unsafe {
                    poolalloc::region::Region::from_raw(region.ptr, region.len)
                });
                f(&r)
            }
            Who::System => f(&System),
            Who::Talc => {
                // SAFETY: the region is ours, unused, and outlives the allocator.
                let t: talc::TalcLock<spinning_top::RawSpinlock, _> = talc::TalcLock::new(unsafe {
                    talc::source::Claim::new(region.ptr, region.len)
                });
                f(&t)
            }
            Who::Rlsf => {
                let mut t = rlsf::Tlsf::new();
                // SAFETY: as above.
                unsafe {
                    t.insert_free_block_ptr(ptr::NonNull::slice_from_raw_parts(
                        ptr::NonNull::new(region.ptr).unwrap(),
                        region.len,
                    ))
                };
                f(&Rlsf(RefCell::new(t)))
            }
            Who::LinkedList => {
                // SAFETY: as above.
                let h = unsafe { linked_list_allocator::LockedHeap::new(region.ptr, region.len) };
                f(&h)
            }
            Who::EmbeddedTlsf => {
                let h = embedded_alloc::TlsfHeap::empty();
                // SAFETY: as above.
                unsafe { h.init(region.ptr as usize, region.len) };
                f(&h)
            }
            Who::EmbeddedLlff => {
                let h = embedded_alloc::LlffHeap::empty();
                // SAFETY: as above.
                unsafe { h.init(region.ptr as usize, region.len) };
                f(&h)
            }
        }
    }
}

fn layout(rng: &mut Rng, bound: usize) -> Layout {
    let size = 1 + rng.below(bound);
    let align = if rng.below(8) == 0 { 16 } else { 8 };
    Layout::from_size_align(size, align).unwrap()
}

/// `actions` random actions on `a`; returns the seconds taken and the refusals.
fn random_actions(a: &dyn GlobalAlloc, bound: usize, actions: usize) -> (f64, usize) {
    let slots = (REGION / 4 / (bound / 2 + 16)).clamp(64, 8192);
    let mut table: Vec<(*mut u8, Layout)> = vec![(ptr::null_mut(), Layout::new::<u8>()); slots];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ bound as u64);
    let mut refused = 0;
    let t = Instant::now();
    for _ in 0..actions {
        let i = rng.below(slots);
        let (p, l) = table[i];
        // SAFETY: every pointer in the table is a live block of `a` with its layout; written only
        // within its size.
        unsafe {
            if p.is_null() {
                let l = layout(&mut rng, bound);
                let q = a.alloc(l);
                if q.is_null() {
                    refused += 1;
                    continue;
                }
                *q = i as u8;
                *q.add(l.size() - 1) = i as u8;
                table[i] = (q, l);
            } else {
                assert!(
                    *p == i as u8 && *p.add(l.size() - 1) == i as u8,
                    "block {i} corrupted"
                );
                if rng.below(3) == 0 {
                    let new = 1 + rng.below(bound);
                    let q = a.realloc(p, l, new);
                    if q.is_null() {
                        refused += 1;
                        continue;
                    }
                    assert_eq!(*q, i as u8, "realloc kept block {i}'s first byte");
                    *q.add(new - 1) = i as u8;
                    table[i] = (q, Layout::from_size_align(new, l.align()).unwrap());
                } else {
                    a.dealloc(p, l);
                    table[i].0 = ptr::null_mut();
                }
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    for (p, l) in table {
        if !p.is_null() {
            // SAFETY: a live block of `a` with its layout.
            unsafe { a.dealloc(p, l) };
        }
    }
    (secs, refused)
}

/// Fills a fresh allocator with random blocks until it refuses one: requested bytes / region.
fn efficiency(a: &dyn GlobalAlloc, bound: usize, seed: u64) -> f64 {
    let mut rng = Rng(seed);
    let mut live: Vec<(*mut u8, Layout)> = Vec::new();
    let mut requested = 0usize;
    loop {
        let l = layout(&mut rng, bound);
        // SAFETY: a valid layout of non-zero size.
        let p = unsafe { a.alloc(l) };
        if p.is_null() {
            break;
        }
        requested += l.size();
        live.push((p, l));
    }
    for (p, l) in live {
        // SAFETY: live blocks of `a` with their layouts.
        unsafe { a.dealloc(p, l) };
    }
    requested as f64 / EFF_REGION as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let actions: usize = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("ACTIONS"));
    let target = if cfg!(target_family = "wasm") {
        "wasm32-wasip1 (wasmtime)"
    } else {
        "host"
    };
    println!(
        "random actions, {target}: {actions} actions per run, median of {rounds} rounds, million actions/s (ratio to talc)\n"
    );
    print!("| allocator |");
    for b in BOUNDS {
        print!(" ≤ {b} B |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(BOUNDS.len()));
    // rates[who][bound] over rounds.
    let mut rates = vec![vec![Vec::new(); BOUNDS.len()]; Who::ALL.len()];
    let mut refusals = 0;
    for round in 0..rounds {
        for (bi, &bound) in BOUNDS.iter().enumerate() {
            for k in 0..Who::ALL.len() {
                let wi = (k + round) % Who::ALL.len();
                let who = Who::ALL[wi];
                let region = Region::new(if who.regional() { REGION } else { 64 });
                let (secs, refused) = who.with(&region, |a| random_actions(a, bound, actions));
                refusals += refused;
                rates[wi][bi].push(actions as f64 / secs / 1e6);
            }
        }
    }
    let talc = Who::ALL.iter().position(|&w| w == Who::Talc).unwrap();
    let talc_rates: Vec<f64> = (0..BOUNDS.len())
        .map(|b| median(rates[talc][b].clone()))
        .collect();
    for (wi, who) in Who::ALL.iter().enumerate() {
        print!("| {} |", who.name());
        for b in 0..BOUNDS.len() {
            let m = median(rates[wi][b].clone());
            print!(" {m:.1} ({:.2}) |", m / talc_rates[b]);
        }
        println!();
    }
    println!("\n(refused allocations over all runs: {refusals})");

    println!(
        "\nheap efficiency, {target}: a {} KiB region filled with random blocks until the first refusal; requested bytes / region, median of 5 seeds\n",
        EFF_REGION >> 10
    );
    print!("| allocator |");
    for b in BOUNDS {
        print!(" ≤ {b} B |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(BOUNDS.len()));
    for who in Who::ALL.iter().filter(|w| w.regional()) {
        print!("| {} |", who.name());
        for &b in &BOUNDS {
            let e: Vec<f64> = (0..5u64)
                .map(|s| {
                    let region = Region::new(EFF_REGION);
                    who.with(&region, |a| efficiency(a, b, 0x1234_5678 + s))
                })
                .collect();
            print!(" {:.1}% |", 100.0 * median(e));
        }
        println!();
    }
}
