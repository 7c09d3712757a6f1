//! The benchmark and fragmentation report: `cargo bench --bench report` (`-- --quick` for 3 rounds
//! with every workload at a scale where each cell takes 50 ms or more, about 4 minutes on 2
//! cores once the hardened variant and the baseline are built; `-- --rounds=N` for another number of rounds; names, or parts of names,
//! after `--` run only those workloads; `-- --soak[=MINUTES]` for the soak instead, `soak.rs`;
//! `-- --threads=1,2,4,8,16` for the threaded workloads' throughput at each thread count instead,
//! `scaling.rs`).
//!
//! Every workload runs as its own child process per allocator (RSS is process-wide), interleaved
//! round by round with the allocator order rotated, several rounds; the table gives medians with
//! their spread over the rounds and the ratio of poolalloc to the best peer (the best of jemalloc,
//! mimalloc, rusty_alloc and snmalloc), taken round by round, with its range and its verdict
//! (slower, faster or level within noise: the harness's `noise.rs`). The child is this same binary, re-executed with `POOLALLOC_BENCH_ALLOC` naming the
//! allocator: its global allocator (`Switch` below) reads that variable at its first call and
//! forwards every call to PoolAlloc, System or a peer, so the workload uses the allocator exactly
//! as a program would (Box, Vec, String, HashMap). The last runner is the same benchmark built
//! with `--features hardened` (built by the parent before the first run, in
//! `target/hardened-build`), for the cost of hardening.
//!
//! Output: a Markdown table on stdout and in `target/poolalloc-report/report.md`, every round's
//! figures in `report.json` beside it, a bar chart of the
//! ratios (`ratios.svg`, `ratios.png`) and, for the fragmentation workloads and http-service, RSS
//! over time per allocator (`rss-<workload>.svg`/`.png`); for http-service also requests per
//! second and p99 latency. Beside time and peak RSS each child reports its minor faults and the
//! share of its memory in transparent huge pages near its peak (`huge_pages.rs`); the header names
//! the machine's THP mode.
//!
//! The workloads live in files of their own (`patterns.rs`, `crates.rs`, `frag.rs`,
//! `large_buffers.rs`, `markdown.rs`, `rayon_reduce.rs`, `groupby.rs`, `service.rs`), the tables
//! and charts in `output.rs`;
//! medians, spreads and verdicts, tables, chart frames, the random number generator and the
//! interleaving of rounds come from the harness both benchmarks share (`benches/harness/`).

use crate::harness::cargo::{bench_executable, cargo, report_dir, target_args, target_dir};
use crate::harness::rng::Rng;
use crate::harness::run::interleaved;
use crate::harness::stats::mib;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

// Workloads, a file a kind (or a workload).
mod crates;
mod frag;
mod groupby;
mod large_buffers;
mod markdown;
mod patterns;
mod rayon_reduce;
mod registry;
mod service;
// The threaded workloads at several thread counts: `--threads=1,2,4,8,16`.
mod scaling;
// RSS over minutes of a service and a real-crate program: `--soak`.
mod soak;
// The share of each child's memory in huge pages, and the THP mode.
mod huge_pages;
// poolalloc as of a pinned earlier commit, the report's baseline column.
mod baseline;
// The Markdown tables and the charts.
mod output;

use crates::write_json_input;
use frag::after_free;
use registry::registry_texts;

// ------------------------------------------------------------------------------------------------
// The switching global allocator.

static POOL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
static JE: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
static MI: mimalloc::MiMalloc = mimalloc::MiMalloc;
static RA: rusty_alloc_api::RustyAlloc = rusty_alloc_api::RustyAlloc;
static SN: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

/// The allocators, by the name `POOLALLOC_BENCH_ALLOC` gives: poolalloc, the system's, then the
/// peers poolalloc's ratios are taken against ([`PEERS`]).
const ALLOCATORS: &[&str] = &[
    "poolalloc",
    "system",
    "jemalloc",
    "mimalloc",
    "rusty_alloc",
    "snmalloc",
];

/// The peers (indices into ALLOCATORS): every allocator after the system's.
const PEERS: std::ops::Range<usize> = 2..ALLOCATORS.len();

/// What the parent runs: the allocators, then poolalloc built with `--features hardened` (a
/// second build of this benchmark, made by [`build_hardened`]), then poolalloc as of the pinned
/// baseline commit (`baseline.rs`).
const RUNNERS: usize = ALLOCATORS.len() + 2;
const HARDENED: usize = ALLOCATORS.len();
const BASELINE: usize = ALLOCATORS.len() + 1;

/// A runner's name in the progress lines and the tables.
fn runner_name(i: usize) -> &'static str {
    match i {
        HARDENED => "poolalloc-hardened",
        BASELINE => "baseline",
        _ => ALLOCATORS[i],
    }
}

/// 0: not chosen yet; 1 + index into ALLOCATORS afterwards.
static CHOICE: AtomicU8 = AtomicU8::new(0);

struct Switch;

impl Switch {
    /// The choice, once made: one load on every call, inlined (the first call's `getenv` is
    /// [`choose`], out of line).
    #[inline(always)]
    fn choice(&self) -> u8 {
        let c = CHOICE.load(Ordering::Relaxed);
        if c != 0 { c } else { choose() }
    }
}

/// Reads `POOLALLOC_BENCH_ALLOC` once.
#[cold]
#[inline(never)]
fn choose() -> u8 {
    // SAFETY: getenv with a NUL-terminated name; it does not allocate. The choice is made before
    // the first block is handed out and never changes, so every block is freed by the
    // allocator that made it (the first call happens before main starts other threads).
    let v = unsafe { libc::getenv(c"POOLALLOC_BENCH_ALLOC".as_ptr()) };
    let name = if v.is_null() {
        &b""[..]
    } else {
        // SAFETY: getenv returns a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(v) }.to_bytes()
    };
    let c = ALLOCATORS
        .iter()
        .position(|a| a.as_bytes() == name)
        .map_or(2, |i| i as u8 + 1); // the parent process uses System
    CHOICE.store(c, Ordering::Relaxed);
    c
}

/// Each call goes to the chosen allocator: one load (the choice, inlined) and one jump through a
/// table, the same for every allocator. poolalloc's fast path is inlined into its branch of the
/// `__rust_alloc` shims; the peers' are calls into their libraries either way. (Issue 40: with
/// `choice` a call of its own, sh6bench's children took 7% more instructions with poolalloc.)
macro_rules! forward {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        // SAFETY: forwarded GlobalAlloc contract; the same allocator serves a block for its life.
        unsafe {
            match $self.choice() {
                1 => POOL.$method($($arg),*),
                3 => JE.$method($($arg),*),
                4 => MI.$method($($arg),*),
                5 => RA.$method($($arg),*),
                6 => SN.$method($($arg),*),
                _ => System.$method($($arg),*),
            }
        }
    };
}

// SAFETY: every call goes to one fixed allocator, itself a correct GlobalAlloc.
unsafe impl GlobalAlloc for Switch {
    #[inline(always)]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        forward!(self, alloc(l))
    }
    #[inline(always)]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        forward!(self, dealloc(p, l))
    }
    #[inline(always)]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        forward!(self, alloc_zeroed(l))
    }
    #[inline(always)]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        forward!(self, realloc(p, l, n))
    }
}

#[global_allocator]
static GLOBAL: Switch = Switch;

// ------------------------------------------------------------------------------------------------
// Helpers for workloads.

/// A block filled with a byte derived from its seed; `check` verifies it.
fn block(size: usize, seed: u8) -> Box<[u8]> {
    vec![seed; size].into_boxed_slice()
}

fn check(b: &[u8], seed: u8) {
    assert!(
        b.first() == Some(&seed) && b.last() == Some(&seed),
        "block corrupted"
    );
}

fn rss_now() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// Minor page faults of this process so far (all its threads; `getrusage`'s `ru_minflt`): first
/// touches of fresh pages, and pages touched again after they went back to the OS.
fn minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_minflt as u64
}

fn peak_rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<usize>().ok())
        .map_or(0, |k| k * 1024)
}

/// Parameters a child gets from its parent.
#[derive(Clone, Copy)]
struct Params {
    threads: usize,
    /// Work multiplier: 1 in quick mode, larger in full mode.
    scale: usize,
}

/// What a fragmentation workload reports besides time and peak RSS.
#[derive(Default)]
struct Extra {
    /// Largest sum of live requested bytes the workload held.
    peak_live: usize,
    /// RSS right after everything was freed, and one second later.
    rss_freed: Option<usize>,
    rss_freed_1s: Option<usize>,
    /// Time spent outside the measured work (reading input files), subtracted from the time.
    setup: Duration,
    /// A service's 99th percentile of request latency (microseconds) and requests per second.
    p99_us: Option<f64>,
    ops_per_sec: Option<f64>,
    /// Operations done (allocations and frees), where the work grows with the threads (larson,
    /// xmalloc-test, threads): the scaling table's throughput is this over the time.
    work: Option<f64>,
}

/// Samples RSS every 10 ms on a thread of its own until dropped; the samples go to the child's
/// output for the RSS-over-time chart.
struct Sampler {
    stop: Arc<AtomicU8>,
    handle: Option<std::thread::JoinHandle<Vec<(u32, usize)>>>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = Arc::new(AtomicU8::new(0));
        let s = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut v = Vec::with_capacity(4096);
            while s.load(Ordering::Relaxed) == 0 {
                v.push((t0.elapsed().as_millis() as u32, rss_now()));
                std::thread::sleep(Duration::from_millis(10));
            }
            v
        });
        Sampler {
            stop,
            handle: Some(handle),
        }
    }
    fn finish(mut self) -> Vec<(u32, usize)> {
        self.stop.store(1, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

// ------------------------------------------------------------------------------------------------
// The workloads.

type Workload = fn(Params) -> Extra;

/// A workload: its name, its function, whether it is a fragmentation workload (RSS sampled, the
/// fragmentation table), and its scale in quick mode (the full mode runs every workload at scale 4).
type Entry = (&'static str, Workload, bool, usize);

/// The quick scales make every cell 50 ms or more on the 2-core Intel Xeon VM. The comment on each
/// gives the fastest allocator's median in a quick report at the scale named (2026-12-04, 3
/// rounds, `quiet`: load 0.47 before, 0.68 after); each scale brings that to about 0.08 s or more.
/// alloc-test's scale 1 has a smaller table of its own, so it runs at 2, the full mode's shape.
const WORKLOADS: &[Entry] = &[
    ("larson", patterns::larson, false, 12),       // 31 ms at 4
    ("xmalloc-test", patterns::xmalloc, false, 4), // 97 ms at 4
    ("local-churn", patterns::local_churn, false, 2), // 53 ms at 1
    ("cache-scratch", patterns::cache_scratch, false, 32), // 53 ms at 16
    ("glibc-simple", patterns::glibc_simple, false, 80), // 60 ms at 50
    ("alloc-test", patterns::alloc_test, false, 2), // 35 ms at 1
    ("mstress", patterns::mstress, false, 3),      // 92 ms at 3
    ("sh6bench", patterns::sh6bench, false, 16),   // 38 ms at 6
    ("rust-collections", patterns::rust_collections, false, 4), // 57 ms at 2
    ("threads", patterns::threads, false, 4),      // 61 ms at 2
    ("syn-parse", crates::syn_parse, false, 1),    // 202 ms at 1
    ("json-roundtrip", crates::json_roundtrip, false, 1), // 79 ms at 1
    ("rayon-drop", crates::rayon_drop, false, 4),  // 54 ms at 2
    ("markdown-html", markdown::markdown_html, false, 3), // 104 ms at 3
    ("rayon-reduce", rayon_reduce::rayon_reduce, false, 4), // 58 ms at 2
    ("groupby", groupby::groupby, false, 1),       // 166 ms at 1
    ("http-service", service::http_service, false, 1), // 206 ms at 1
    ("frag-fill-free90", frag::frag_fill_free90, true, 2), // 70 ms at 1
    ("frag-long-short", frag::frag_long_short, true, 6), // 44 ms at 3
    ("frag-drift", frag::frag_drift, true, 1),     // 159 ms at 1
    ("frag-free-all", frag::frag_free_all, true, 1), // 367 ms at 1
    ("large-buffers", large_buffers::large_buffers, true, 1), // 126 ms at 1
];

/// Workloads that are not fragmentation workloads but whose RSS over time is charted too: a
/// service's RSS under steady load is what its operators watch. The `true` of WORKLOADS would also
/// chart it, but it means more than sampling: the fragmentation table (peak RSS over peak live
/// bytes, which a service does not know, and RSS after everything is freed plus one second of
/// waiting, which a server that stops by dropping its runtime has nothing to show for), so these
/// get the 10 ms sampler and the chart only.
const RSS_OVER_TIME: &[&str] = &["http-service"];

/// Whether the child samples RSS every 10 ms and the parent charts it.
fn sampled(w: &Entry) -> bool {
    w.2 || RSS_OVER_TIME.contains(&w.0)
}

// ------------------------------------------------------------------------------------------------
// Child and parent.

/// The parameters the parent passed to this child.
fn params_from_env() -> Params {
    let threads = std::env::var("POOLALLOC_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let scale = std::env::var("POOLALLOC_BENCH_SCALE")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    Params { threads, scale }
}

fn child(workload: &str) {
    let w = WORKLOADS
        .iter()
        .find(|w| w.0 == workload)
        .expect("unknown workload");
    let f = w.1;
    let sampler = sampled(w).then(Sampler::start);
    let huge = huge_pages::Watch::start(
        std::env::var("POOLALLOC_BENCH_ALLOC").is_ok_and(|v| v == "poolalloc"),
    );
    let t = Instant::now();
    let e = f(params_from_env());
    // Fragmentation workloads include one second of waiting after free: not part of their time.
    let waits = if e.rss_freed_1s.is_some() { 1.0 } else { 0.0 } + e.setup.as_secs_f64();
    plant_slowdown(t.elapsed().as_secs_f64() - waits);
    let secs = t.elapsed().as_secs_f64() - waits;
    let faults = minor_faults();
    let huge = huge.finish();
    // The kernel's count for every allocator; poolalloc's own share (`huge_share=`) for it only.
    let huge = format!(" huge={} anon={}", huge.huge, huge.anon)
        + &huge
            .own_share
            .map(|s| format!(" huge_share={s:.3}"))
            .unwrap_or_default();
    let samples = sampler.map(Sampler::finish).unwrap_or_default();
    let samples: Vec<String> = samples.iter().map(|(ms, r)| format!("{ms}:{r}")).collect();
    // Only the workloads that measure them print these (an empty value would not parse).
    let service: String = [
        ("p99_us", e.p99_us),
        ("ops_per_sec", e.ops_per_sec),
        ("work", e.work),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!(" {k}={v:.3}")))
    .collect();
    println!(
        "RESULT secs={secs:.6} faults={faults} peak_rss={} peak_live={} rss_freed={} rss_freed_1s={}{service}{huge} samples={}",
        peak_rss(),
        e.peak_live,
        e.rss_freed.unwrap_or(0),
        e.rss_freed_1s.unwrap_or(0),
        samples.join(",")
    );
}

/// A planted slowdown, for the test of the report's flags (`--plant=WORKLOAD:PERCENT`, which the
/// parent passes as `POOLALLOC_BENCH_SPIN=PERCENT` to poolalloc's children of that workload only):
/// a busy loop for `PERCENT`% of the work's time, counted in the time.
fn plant_slowdown(work_secs: f64) {
    let percent: f64 = match std::env::var("POOLALLOC_BENCH_SPIN") {
        Ok(p) => p.parse().expect("POOLALLOC_BENCH_SPIN: a percentage"),
        Err(_) => return,
    };
    let until = Instant::now() + Duration::from_secs_f64(work_secs.max(0.0) * percent / 100.0);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Runs `workload` in a child (`bin`, this benchmark or its hardened build) served by `alloc`,
/// with the JSON input at `json`, `threads` and `scale`, and returns what it measured; panics
/// with the child's output, naming it `label`, when it failed.
fn run_child(
    bin: &std::path::Path,
    workload: &str,
    json: &std::path::Path,
    alloc: &str,
    threads: usize,
    scale: usize,
    label: &str,
) -> Run {
    try_run_child(bin, workload, json, alloc, threads, scale, None)
        .unwrap_or_else(|e| panic!("{workload} at {threads} threads with {label} failed: {e}"))
}

/// [`run_child`], with the failure as the error: the child's exit status on the first line, then
/// its output; `spin` plants a slowdown of that many percent in the child ([`plant_slowdown`]).
fn try_run_child(
    bin: &std::path::Path,
    workload: &str,
    json: &std::path::Path,
    alloc: &str,
    threads: usize,
    scale: usize,
    spin: Option<u32>,
) -> Result<Run, String> {
    let mut command = Command::new(bin);
    command
        .env("POOLALLOC_BENCH_WORKLOAD", workload)
        .env("POOLALLOC_BENCH_JSON", json)
        .env("POOLALLOC_BENCH_ALLOC", alloc)
        .env("POOLALLOC_BENCH_THREADS", threads.to_string())
        .env("POOLALLOC_BENCH_SCALE", scale.to_string());
    if let Some(percent) = spin {
        command.env("POOLALLOC_BENCH_SPIN", percent.to_string());
    }
    let out = command.output().expect("cannot run the workload child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().find_map(parse).ok_or_else(|| {
        format!(
            "{}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[derive(Clone, Default)]
struct Run {
    secs: f64,
    /// Minor page faults of the whole child, start-up included.
    faults: u64,
    peak_rss: usize,
    peak_live: usize,
    rss_freed: usize,
    rss_freed_1s: usize,
    p99_us: Option<f64>,
    ops_per_sec: Option<f64>,
    work: Option<f64>,
    /// `AnonHugePages` and `Anonymous` of the child near its peak RSS (`huge_pages.rs`), and
    /// poolalloc's own share of chunk memory in huge pages at the same moment.
    huge: usize,
    anon: usize,
    own_huge_share: Option<f64>,
    samples: Vec<(u32, usize)>,
}

fn parse(line: &str) -> Option<Run> {
    let mut r = Run::default();
    for kv in line.strip_prefix("RESULT ")?.split(' ') {
        let (k, v) = kv.split_once('=')?;
        match k {
            "secs" => r.secs = v.parse().ok()?,
            "faults" => r.faults = v.parse().ok()?,
            "peak_rss" => r.peak_rss = v.parse().ok()?,
            "peak_live" => r.peak_live = v.parse().ok()?,
            "rss_freed" => r.rss_freed = v.parse().ok()?,
            "rss_freed_1s" => r.rss_freed_1s = v.parse().ok()?,
            "p99_us" => r.p99_us = Some(v.parse().ok()?),
            "ops_per_sec" => r.ops_per_sec = Some(v.parse().ok()?),
            "work" => r.work = Some(v.parse().ok()?),
            "huge" => r.huge = v.parse().ok()?,
            "anon" => r.anon = v.parse().ok()?,
            "huge_share" => r.own_huge_share = Some(v.parse().ok()?),
            "samples" => {
                r.samples = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .filter_map(|s| {
                        let (a, b) = s.split_once(':')?;
                        Some((a.parse().ok()?, b.parse().ok()?))
                    })
                    .collect()
            }
            _ => {}
        }
    }
    Some(r)
}

pub fn main() {
    if let Ok(w) = std::env::var("POOLALLOC_BENCH_WORKLOAD") {
        if soak::is_soak_child() {
            soak::child(&w);
        } else {
            child(&w);
        }
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // Names (or parts of names) of the workloads to run; none: all of them.
    let only: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if let Some(length) = soak::length(&args) {
        soak::run(length, &only);
        return;
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Quick mode: 3 rounds (the fewest on which a ratio can be flagged, `noise.rs`), each workload
    // at its own scale (WORKLOADS). Full mode: 5 rounds, every workload at scale 4.
    let (rounds, scale) = if quick { (3, 1) } else { (5, 4) };
    // `--rounds=N`: more or fewer interleaved rounds than the mode's default.
    let rounds = args
        .iter()
        .find_map(|a| a.strip_prefix("--rounds=")?.parse().ok())
        .unwrap_or(rounds);
    if let Some(counts) = scaling::thread_counts(&args) {
        scaling::run(&counts, &only, rounds, scale);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // `--baseline=self`: the baseline column is this very build, so that every verdict against it
    // must be level (`benches/noise-check.sh`).
    let self_baseline = args.iter().any(|a| a == "--baseline=self");
    // `--plant=WORKLOAD:PERCENT`: poolalloc's children of that workload spin for PERCENT% more of
    // their time, a slowdown its verdicts must flag (`benches/noise-check.sh`).
    let plant: Option<(String, u32)> = args.iter().find_map(|a| {
        let (w, p) = a.strip_prefix("--plant=")?.split_once(':')?;
        Some((w.to_string(), p.parse().expect("--plant=WORKLOAD:PERCENT")))
    });
    let hardened_exe = build_hardened();
    let baseline_exe = if self_baseline {
        Ok(exe.clone())
    } else {
        baseline::build()
    };
    if let Err(why) = &baseline_exe {
        eprintln!("no baseline column: {why}");
    }
    let json = write_json_input();
    let workloads: Vec<&Entry> = WORKLOADS
        .iter()
        .filter(|w| only.is_empty() || only.iter().any(|o| w.0.contains(o.as_str())))
        .collect();
    // runs[workload][allocator] = every round's result
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); RUNNERS]; workloads.len()];
    // The scale of each workload in this mode.
    let scales: Vec<usize> = workloads
        .iter()
        .map(|w| if quick { w.3 } else { scale })
        .collect();
    interleaved(rounds, workloads.len(), RUNNERS, |_round, wi, ai| {
        let w = workloads[wi];
        let scale = scales[wi];
        let spin = plant
            .as_ref()
            .filter(|p| ai == 0 && p.0 == w.0)
            .map(|p| p.1);
        let (bin, alloc) = match ai {
            HARDENED => (&hardened_exe, "poolalloc"),
            BASELINE => match &baseline_exe {
                Ok(b) => (b, "poolalloc"),
                Err(_) => return format!("{:<17} baseline    (none)", w.0),
            },
            _ => (&exe, ALLOCATORS[ai]),
        };
        let run = if ai == BASELINE {
            // A workload newer than the baseline fails there: no cell, said in the report.
            match try_run_child(bin, w.0, &json, alloc, threads, scale, None) {
                Ok(run) => run,
                Err(e) => {
                    let first = e.lines().next().unwrap_or_default().to_string();
                    return format!("{:<17} baseline    failed ({first})", w.0);
                }
            }
        } else {
            try_run_child(bin, w.0, &json, alloc, threads, scale, spin).unwrap_or_else(|e| {
                panic!(
                    "{} at {threads} threads with {} failed: {e}",
                    w.0,
                    runner_name(ai)
                )
            })
        };
        let line = format!(
            "{:<17} {:<11} {:>8.3} s  peak RSS {:>7} MiB  {:>8} faults",
            w.0,
            runner_name(ai),
            run.secs,
            mib(run.peak_rss as f64),
            run.faults
        );
        runs[wi][ai].push(run);
        line
    });
    let baseline = match &baseline_exe {
        Ok(_) if self_baseline => Ok("baseline (this build itself, `--baseline=self`)".to_string()),
        Ok(_) => Ok(baseline::name()),
        Err(why) => Err(why.clone()),
    };
    let setup = output::Setup {
        threads,
        rounds,
        quick,
        scales: &scales,
        baseline,
        plant: plant.as_ref().map(|p| (p.0.as_str(), p.1)),
    };
    let report = output::table(&workloads, &runs, &setup);
    println!("{report}");
    // A check's run (`--baseline=self`, `--plant`) writes beside the report, not over it.
    let dir = if self_baseline || plant.is_some() {
        report_dir().join("noise-check")
    } else {
        report_dir()
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.md"), &report).unwrap();
    std::fs::write(
        dir.join("report.json"),
        output::json(&workloads, &runs, &setup),
    )
    .unwrap();
    output::charts(&dir, &workloads, &runs);
    eprintln!("wrote {}", dir.display());
}

/// This benchmark built again with `--features hardened`, for the hardened column: cargo is run
/// with its own target directory (the running `cargo bench` holds the lock of the usual one).
/// A report without that column would hide the cost of hardening, so failing to build is fatal.
fn build_hardened() -> PathBuf {
    if cfg!(feature = "hardened") {
        // Already the hardened build: the column then measures the same binary.
        return std::env::current_exe().unwrap();
    }
    let target = target_dir().join("hardened-build");
    eprintln!(
        "building the hardened variant of this benchmark in {}",
        target.display()
    );
    let out = Command::new(cargo())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--profile", "bench", "--bench", "report"])
        .args([
            "--features",
            "hardened",
            "--message-format",
            "json-render-diagnostics",
        ])
        .args(target_args())
        .arg("--target-dir")
        .arg(&target)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("cannot run cargo to build the hardened benchmark");
    assert!(
        out.status.success(),
        "building the hardened benchmark failed"
    );
    // The artifact message of the report bench names its executable.
    bench_executable(&String::from_utf8_lossy(&out.stdout), "report")
        .expect("cargo did not report the hardened benchmark's executable")
}
