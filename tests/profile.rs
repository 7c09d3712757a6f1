//! The sampling profiler against the truth: a program with known allocation sites (one function
//! holds 70% of the live bytes, another 30%; many small blocks and a few large ones; a third
//! site allocates and frees) is profiled at the default rate, dumped, and the pprof file parsed
//! back. Each site's live bytes must come out within ±5% of the truth, and the small blocks'
//! share within four standard deviations of the sampling error (the estimator's variance for
//! blocks much smaller than the interval R is about R × bytes), which a biased weight or a lost
//! record would miss. Runs in `main` (no test harness): one thread, so nothing else samples.

use poolalloc::profile::{self, Config};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const MIB: usize = 1 << 20;

/// Small blocks of varied sizes (16 B to 4 KiB) summing to at least `bytes`; returns their sum.
fn small_blocks(bytes: usize, keep: &mut Vec<Box<[u8]>>) -> usize {
    let mut total = 0;
    let mut i = 0usize;
    while total < bytes {
        let n = 16 + (i * 7919) % 4080;
        keep.push(vec![1u8; n].into_boxed_slice());
        total += n;
        i += 1;
    }
    total
}

/// A few large blocks (the system allocator's, never touched, so they cost address space only).
fn large_blocks(count: usize, each: usize, keep: &mut Vec<Vec<u8>>) -> usize {
    for _ in 0..count {
        keep.push(black_box(Vec::with_capacity(each)));
    }
    count * each
}

// Each site returns through black_box so that its call is not a tail call (which would leave the
// site out of the stack in an optimized build).
#[inline(never)]
fn site_a_small(keep: &mut Vec<Box<[u8]>>) -> usize {
    black_box(small_blocks(56 * MIB, keep))
}
#[inline(never)]
fn site_a_large(keep: &mut Vec<Vec<u8>>) -> usize {
    black_box(large_blocks(4, 200 * MIB, keep))
}
#[inline(never)]
fn site_b_small(keep: &mut Vec<Box<[u8]>>) -> usize {
    black_box(small_blocks(24 * MIB, keep))
}
#[inline(never)]
fn site_b_large(keep: &mut Vec<Vec<u8>>) -> usize {
    black_box(large_blocks(3, 115 * MIB, keep))
}
/// Allocates and frees: nothing of it is live at the dump.
#[inline(never)]
fn site_churn() -> usize {
    let mut total = 0;
    for round in black_box(0..64) {
        let mut v = Vec::new();
        total += small_blocks(MIB + round, &mut v);
        drop(black_box(v));
    }
    total
}

use poolalloc_test_support::pprof;

fn main() {
    let mut small = Vec::with_capacity(1 << 16);
    let mut large = Vec::new();
    profile::start(Config::default()).unwrap();
    let a_small = site_a_small(&mut small);
    let churn = site_churn();
    let a_large = site_a_large(&mut large);
    let b_small = site_b_small(&mut small);
    let b_large = site_b_large(&mut large);
    let dir = option_env!("CARGO_TARGET_TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = std::path::Path::new(&dir).join("profile-70-30.pb.gz");
    profile::dump(&path).unwrap();
    profile::stop();

    let p = pprof::read(&path);
    let r = profile::DEFAULT_INTERVAL as f64;
    let (a, b) = ((a_small + a_large) as f64, (b_small + b_large) as f64);
    println!("profile: {}", path.display());
    println!(
        "truth: site_a {:.1} MiB ({:.1}%), site_b {:.1} MiB",
        a / MIB as f64,
        100.0 * a / (a + b),
        b / MIB as f64
    );
    let mut failures = Vec::new();
    let mut check = |what: &str, est: f64, truth: f64, tol: f64| {
        let ok = (est - truth).abs() <= tol;
        println!(
            "{what}: estimated {:.2} MiB, truth {:.2} MiB ({:+.2}%; allowed ±{:.2} MiB) {}",
            est / MIB as f64,
            truth / MIB as f64,
            100.0 * (est - truth) / truth.max(1.0),
            tol / MIB as f64,
            if ok { "ok" } else { "FAIL" }
        );
        if !ok {
            failures.push(what.to_owned());
        }
    };
    // Each site's live bytes within ±5%.
    check(
        "site_a inuse_space",
        p.total("site_a_", "inuse_space"),
        a,
        0.05 * a,
    );
    check(
        "site_b inuse_space",
        p.total("site_b_", "inuse_space"),
        b,
        0.05 * b,
    );
    // The small blocks alone, within 4 standard deviations (sqrt(R × bytes)).
    for (f, t) in [("site_a_small", a_small), ("site_b_small", b_small)] {
        let t = t as f64;
        check(
            &format!("{f} inuse_space"),
            p.total(f, "inuse_space"),
            t,
            4.0 * (r * t).sqrt(),
        );
    }
    // The large blocks (> 100 × R) are sampled with certainty: exact.
    for (f, t) in [("site_a_large", a_large), ("site_b_large", b_large)] {
        check(
            &format!("{f} inuse_space"),
            p.total(f, "inuse_space"),
            t as f64,
            1.0,
        );
    }
    // Freed blocks hold nothing live, but count in the cumulative allocations.
    let churn = churn as f64;
    check(
        "site_churn inuse_space",
        p.total("site_churn", "inuse_space"),
        0.0,
        0.0,
    );
    check(
        "site_churn alloc_space",
        p.total("site_churn", "alloc_space"),
        churn,
        4.0 * (r * churn).sqrt(),
    );
    // The flamegraph names both sites, the larger wider.
    let svg = path.with_file_name("profile-70-30.svg");
    profile::flamegraph(&svg).unwrap();
    let svg = std::fs::read_to_string(&svg).unwrap();
    let width = |f: &str| -> f64 {
        // inferno writes each frame as <title>NAME (BYTES bytes, P%)</title>
        svg.split("<title>")
            .filter(|t| t.starts_with(f))
            .filter_map(|t| {
                t.split(" (")
                    .nth(1)?
                    .split(" bytes")
                    .next()?
                    .replace(',', "")
                    .parse::<f64>()
                    .ok()
            })
            .sum()
    };
    let (wa, wb) = (width("profile::site_a_"), width("profile::site_b_"));
    println!("flamegraph: site_a {wa} bytes, site_b {wb} bytes");
    check(
        "flamegraph site_a",
        wa,
        p.total("site_a_", "inuse_space"),
        0.001 * a,
    );
    check(
        "flamegraph site_b",
        wb,
        p.total("site_b_", "inuse_space"),
        0.001 * b,
    );

    // Freed, they leave the profile: no record outlives its block.
    drop(black_box((small, large)));
    let path = path.with_file_name("profile-70-30-freed.pb.gz");
    profile::dump(&path).unwrap();
    let p = pprof::read(&path);
    for f in ["site_a_", "site_b_"] {
        check(
            &format!("{f} inuse_space after the frees"),
            p.total(f, "inuse_space"),
            0.0,
            0.0,
        );
    }
    assert!(failures.is_empty(), "outside the bounds: {failures:?}");
}
