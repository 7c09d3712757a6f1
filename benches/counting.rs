//! What counting costs: `poolalloc::testing`'s `count` and `set_limit` next to the two counting
//! wrappers crate authors use, `stats_alloc` and `cap` (both over `System`).
//!
//! `cargo bench --bench counting --features testing` (add `-- --quick` for a short run).
//!
//! Every variant is called through `GlobalAlloc` directly in this one process, no variant being the
//! global allocator, so each pays the same calling cost and none runs with another's caches warmed
//! by the harness. The variants:
//!
//! | variant | what it is |
//! |---|---|
//! | system | `System` |
//! | stats_alloc | `stats_alloc::StatsAlloc<System>` (four atomic counters, `SeqCst`) |
//! | cap | `cap::Cap<System>` with its `stats` feature (limit, total and peak; atomics) |
//! | poolalloc | `PoolAlloc`, built with `testing`, no count and no limit active |
//! | pool+count | the same inside `testing::count` |
//! | pool+limit | the same with `testing::set_limit(Some(1 GiB))` |
//! | pool+count+limit | both |
//!
//! Rounds are interleaved (each round runs every variant once, in an order that rotates) and the
//! figure is the median over rounds. The ratios compare each counting layer with the allocator it
//! wraps: stats_alloc and cap with system, the `testing` variants with poolalloc; the last two
//! compare whole stacks a test would run on (poolalloc counting against System counting). The
//! cost of the `testing` feature when idle (poolalloc built with it versus without) is not
//! measured here: both builds cannot be in one process (examples/fastpath.rs counts its
//! instructions under callgrind).

use allocator_api2::alloc::{AllocError, Allocator};
use hashbrown::{DefaultHashBuilder, HashMap};
use poolalloc::PoolAlloc;
use poolalloc::testing::{Counts, count, set_limit};
use poolalloc_bench_harness::stats::{geomean, median};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

static SYSTEM: System = System;
static STATS: stats_alloc::StatsAlloc<System> = stats_alloc::StatsAlloc::system();
static CAP: cap::Cap<System> = cap::Cap::new(System, usize::MAX);
static POOL: PoolAlloc = PoolAlloc::new();

/// The limit of the `limit` variants: far above what any workload holds, so it never refuses.
const LIMIT: usize = 1 << 30;

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    System,
    StatsAlloc,
    Cap,
    Pool,
    PoolCount,
    PoolLimit,
    PoolCountLimit,
}

const VARIANTS: [Variant; 7] = [
    Variant::System,
    Variant::StatsAlloc,
    Variant::Cap,
    Variant::Pool,
    Variant::PoolCount,
    Variant::PoolLimit,
    Variant::PoolCountLimit,
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::System => "system",
            Variant::StatsAlloc => "stats_alloc",
            Variant::Cap => "cap",
            Variant::Pool => "poolalloc",
            Variant::PoolCount => "pool+count",
            Variant::PoolLimit => "pool+limit",
            Variant::PoolCountLimit => "pool+count+limit",
        }
    }
}

#[derive(Clone, Copy)]
enum Workload {
    /// alloc, touch, free of one size, again and again.
    Pair(usize),
    /// 1000 blocks of 64 B allocated, then freed in reverse.
    Batch,
    /// An `allocator_api2` Vec<u64> pushed to 4096 elements from empty (growth by realloc).
    VecBuild,
    /// A `hashbrown` map of 400 u64 pairs built from empty (its table stays within the size
    /// classes).
    MapBuild,
}

const WORKLOADS: [Workload; 6] = [
    Workload::Pair(16),
    Workload::Pair(256),
    Workload::Pair(4096),
    Workload::Batch,
    Workload::VecBuild,
    Workload::MapBuild,
];

impl Workload {
    fn name(self) -> String {
        match self {
            Workload::Pair(n) => format!("alloc/free {n} B"),
            Workload::Batch => "1000 x 64 B, then free".into(),
            Workload::VecBuild => "Vec<u64> push 4096".into(),
            Workload::MapBuild => "HashMap 400 inserts".into(),
        }
    }

    /// Allocations, frees and reallocations one iteration makes, so the counters can be checked:
    /// a benchmark whose counter stayed at zero would be measuring nothing.
    fn expected_allocations(self) -> Option<usize> {
        match self {
            Workload::Pair(_) => Some(1),
            Workload::Batch => Some(1000),
            // Growth goes through realloc after the first allocation; the map's count depends on
            // hashbrown's growth policy.
            Workload::VecBuild => Some(1),
            Workload::MapBuild => None,
        }
    }

    /// Runs `iters` iterations on `a`.
    fn run<G: GlobalAlloc>(self, a: &G, iters: usize, slots: &mut [*mut u8]) {
        match self {
            Workload::Pair(size) => {
                let l = Layout::from_size_align(size, 8).unwrap();
                for _ in 0..iters {
                    // SAFETY: non-zero layout; the block is written within its size and freed
                    // once with the layout it was allocated with.
                    unsafe {
                        let p = a.alloc(black_box(l));
                        assert!(!p.is_null());
                        p.write(1);
                        a.dealloc(black_box(p), l);
                    }
                }
            }
            Workload::Batch => {
                let l = Layout::from_size_align(64, 8).unwrap();
                for _ in 0..iters {
                    for s in slots.iter_mut() {
                        // SAFETY: non-zero layout.
                        let p = unsafe { a.alloc(l) };
                        assert!(!p.is_null());
                        // SAFETY: the block is 64 bytes.
                        unsafe { p.write(1) };
                        *s = p;
                    }
                    for &p in slots.iter().rev() {
                        // SAFETY: each block was allocated above with `l` and is freed once.
                        unsafe { a.dealloc(p, l) };
                    }
                }
            }
            Workload::VecBuild => {
                for _ in 0..iters {
                    let mut v = allocator_api2::vec::Vec::new_in(Via(a));
                    for i in 0..4096u64 {
                        v.push(i);
                    }
                    black_box(&v);
                }
            }
            Workload::MapBuild => {
                for _ in 0..iters {
                    let mut m = HashMap::with_hasher_in(DefaultHashBuilder::default(), Via(a));
                    for i in 0..400u64 {
                        m.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i);
                    }
                    black_box(&m);
                }
            }
        }
    }
}

/// Any `GlobalAlloc` as an `allocator_api2` allocator, growing and shrinking through `realloc`,
/// so the containers reach every variant by the same path.
struct Via<'a, G>(&'a G);

fn dangling(layout: Layout) -> NonNull<[u8]> {
    let p = NonNull::new(std::ptr::without_provenance_mut::<u8>(layout.align())).unwrap();
    NonNull::slice_from_raw_parts(p, 0)
}

// SAFETY: blocks come from the wrapped `GlobalAlloc` with the caller's layout and go back to it
// with the same layout (the trait's callers pass the layout a block was allocated or last resized
// with); zero-sized requests never reach it and get a dangling, aligned pointer.
unsafe impl<G: GlobalAlloc> Allocator for Via<'_, G> {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.0.alloc(layout) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: the caller passes a block of this allocator with its layout.
            unsafe { self.0.dealloc(ptr.as_ptr(), layout) }
        }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's contract for grow is the one this function forwards.
        unsafe { self.resize(ptr, old, new) }
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's contract for shrink is the one this function forwards.
        unsafe { self.resize(ptr, old, new) }
    }
}

impl<G: GlobalAlloc> Via<'_, G> {
    /// # Safety
    /// `ptr` is a block of this allocator allocated with `old`.
    unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if old.size() == 0 || new.size() == 0 || old.align() != new.align() {
            let b = self.allocate(new)?;
            let n = old.size().min(new.size());
            // SAFETY: both blocks hold at least `n` bytes and are distinct; the old one is
            // freed once with its layout.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr.as_ptr(), b.cast::<u8>().as_ptr(), n);
                self.deallocate(ptr, old);
            }
            return Ok(b);
        }
        // SAFETY: `ptr` was allocated with `old` (non-zero size), the new size is non-zero and
        // the alignment is unchanged, which is what `GlobalAlloc::realloc` requires.
        let p = unsafe { self.0.realloc(ptr.as_ptr(), old, new.size()) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, new.size()))
            .ok_or(AllocError)
    }
}

/// Runs the workload under the variant and returns the elapsed time. Checks the counters the
/// variant keeps, so every counting variant is shown to count.
fn measure(v: Variant, w: Workload, iters: usize, slots: &mut [*mut u8]) -> Duration {
    let limit = matches!(v, Variant::PoolLimit | Variant::PoolCountLimit);
    if limit {
        set_limit(Some(LIMIT));
    }
    let t = Instant::now();
    let counts: Option<Counts> = match v {
        Variant::System => {
            w.run(&SYSTEM, iters, slots);
            None
        }
        Variant::StatsAlloc => {
            let before = STATS.stats();
            w.run(&STATS, iters, slots);
            let d = STATS.stats() - before;
            assert_eq!(d.allocations, d.deallocations, "stats_alloc saw a leak");
            check_allocations(w, iters, d.allocations, "stats_alloc");
            None
        }
        Variant::Cap => {
            let before = CAP.total_allocated();
            w.run(&CAP, iters, slots);
            assert_eq!(CAP.allocated(), 0, "cap saw a leak");
            assert!(CAP.total_allocated() > before, "cap counted nothing");
            None
        }
        Variant::Pool | Variant::PoolLimit => {
            w.run(&POOL, iters, slots);
            None
        }
        Variant::PoolCount | Variant::PoolCountLimit => {
            Some(count(|| w.run(&POOL, iters, slots)).1)
        }
    };
    let elapsed = t.elapsed();
    if limit {
        set_limit(None);
    }
    if let Some(c) = counts {
        assert_eq!(c.live_blocks, 0, "count saw a leak: {c:?}");
        assert_eq!(c.allocations, c.frees, "{c:?}");
        check_allocations(w, iters, c.allocations, "count");
    }
    elapsed
}

fn check_allocations(w: Workload, iters: usize, got: usize, who: &str) {
    match w.expected_allocations() {
        Some(per) => assert_eq!(got, per * iters, "{who} on {}", w.name()),
        None => assert!(got >= iters, "{who} on {}: {got} allocations", w.name()),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; anything else but `--quick` is ignored.
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, target) = if quick {
        (5, Duration::from_millis(3))
    } else {
        (21, Duration::from_millis(15))
    };
    let mut slots = vec![std::ptr::null_mut::<u8>(); 1000];
    println!(
        "counting benchmark: {rounds} interleaved rounds, ~{} ms per measurement, median ns per iteration\n",
        target.as_millis()
    );
    let mut header = String::from("| workload |");
    let mut rule = String::from("|---|");
    for v in VARIANTS {
        header += &format!(" {} ns |", v.name());
        rule += "---:|";
    }
    let ratio_names = [
        "stats_alloc / system",
        "cap / system",
        "pool+count / poolalloc",
        "pool+limit / poolalloc",
        "pool+count+limit / poolalloc",
        "pool+count / stats_alloc",
        "pool+count+limit / cap",
    ];
    for r in ratio_names {
        header += &format!(" {r} |");
        rule += "---:|";
    }
    println!("{header}\n{rule}");
    let mut all_ratios = vec![Vec::new(); ratio_names.len()];
    for w in WORKLOADS {
        // Calibrate on the system allocator: iterations for about `target` per measurement.
        let mut iters = 1;
        loop {
            let t = measure(Variant::System, w, iters, &mut slots);
            if t >= target / 4 {
                iters = (iters as f64 * target.as_secs_f64() / t.as_secs_f64()).ceil() as usize;
                break;
            }
            iters *= 4;
        }
        let mut times = vec![Vec::new(); VARIANTS.len()];
        for round in 0..rounds {
            for k in 0..VARIANTS.len() {
                let i = (k + round) % VARIANTS.len();
                let t = measure(VARIANTS[i], w, iters, &mut slots);
                times[i].push(t.as_secs_f64() * 1e9 / iters as f64);
            }
        }
        let med: Vec<f64> = times.into_iter().map(median).collect();
        let at = |v: Variant| med[VARIANTS.iter().position(|&x| x == v).unwrap()];
        let ratios = [
            at(Variant::StatsAlloc) / at(Variant::System),
            at(Variant::Cap) / at(Variant::System),
            at(Variant::PoolCount) / at(Variant::Pool),
            at(Variant::PoolLimit) / at(Variant::Pool),
            at(Variant::PoolCountLimit) / at(Variant::Pool),
            at(Variant::PoolCount) / at(Variant::StatsAlloc),
            at(Variant::PoolCountLimit) / at(Variant::Cap),
        ];
        let mut line = format!("| {} |", w.name());
        for m in &med {
            line += &format!(" {m:.1} |");
        }
        for (k, r) in ratios.iter().enumerate() {
            line += &format!(" **{r:.2}** |");
            all_ratios[k].push(*r);
        }
        println!("{line}");
    }
    let mut line = String::from("| geometric mean |");
    for _ in VARIANTS {
        line += " |";
    }
    for rs in &all_ratios {
        line += &format!(" **{:.2}** |", geomean(rs));
    }
    println!("{line}");
}
