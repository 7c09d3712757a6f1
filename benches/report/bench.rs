//! The benchmark and fragmentation report: `cargo bench --bench report` (`-- --quick` for a smoke
//! run under two minutes; `-- --rounds=N` for another number of rounds; names, or parts of names,
//! after `--` run only those workloads).
//!
//! Every workload runs as its own child process per allocator (RSS is process-wide), interleaved
//! round by round with the allocator order rotated, several rounds; the table gives medians and the
//! ratio of poolalloc to the best peer. The child is this same binary, re-executed with
//! `POOLALLOC_BENCH_ALLOC` naming the allocator: its global allocator (`Switch` below) reads that
//! variable at its first call and forwards every call to PoolAlloc, System, jemalloc or mimalloc,
//! so the workload uses the allocator exactly as a program would (Box, Vec, String, HashMap).
//! A fifth runner is the same benchmark built with `--features hardened` (built by the parent
//! before the first run, in `target/hardened-build`), for the cost of hardening.
//!
//! Output: a Markdown table on stdout and in `target/poolalloc-report/report.md`, a bar chart of the
//! ratios (`ratios.svg`, `ratios.png`) and, for the fragmentation workloads, RSS over time per
//! allocator (`rss-<workload>.svg`/`.png`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

// Workloads with a file of their own.
mod large_buffers;
mod markdown;
mod rayon_reduce;

// ------------------------------------------------------------------------------------------------
// The switching global allocator.

static POOL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
static JE: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
static MI: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ALLOCATORS: [&str; 4] = ["poolalloc", "system", "jemalloc", "mimalloc"];

/// What the parent runs: the four allocators, then poolalloc built with `--features hardened` (a
/// second build of this benchmark, made by [`build_hardened`]).
const RUNNERS: [&str; 5] = [
    "poolalloc",
    "system",
    "jemalloc",
    "mimalloc",
    "poolalloc-hardened",
];
const HARDENED: usize = 4;

/// 0: not chosen yet; 1 + index into ALLOCATORS afterwards.
static CHOICE: AtomicU8 = AtomicU8::new(0);

struct Switch;

impl Switch {
    #[inline]
    fn choice(&self) -> u8 {
        let c = CHOICE.load(Ordering::Relaxed);
        if c != 0 {
            return c;
        }
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
}

macro_rules! forward {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        // SAFETY: forwarded GlobalAlloc contract; the same allocator serves a block for its life.
        unsafe {
            match $self.choice() {
                1 => POOL.$method($($arg),*),
                3 => JE.$method($($arg),*),
                4 => MI.$method($($arg),*),
                _ => System.$method($($arg),*),
            }
        }
    };
}

// SAFETY: every call goes to one fixed allocator, itself a correct GlobalAlloc.
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        forward!(self, alloc(l))
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        forward!(self, dealloc(p, l))
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        forward!(self, alloc_zeroed(l))
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        forward!(self, realloc(p, l, n))
    }
}

#[global_allocator]
static GLOBAL: Switch = Switch;

// ------------------------------------------------------------------------------------------------
// Helpers for workloads.

struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

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
// The mimalloc-bench patterns, ported (the patterns in our own code; their sources are not vendored).

/// larson: each thread owns 5000 slots; each step frees a random slot and allocates 8–999 B into it.
/// After each round the threads exit and hand their slots to new threads, which free objects they
/// did not allocate.
fn larson(p: Params) -> Extra {
    let rounds = 4;
    let steps = 40_000 * p.scale;
    let mut arrays: Vec<Vec<Box<[u8]>>> = (0..p.threads)
        .map(|t| {
            let mut r = Rng::new(t as u64);
            (0..5000).map(|_| block(r.range(8, 999), 1)).collect()
        })
        .collect();
    for round in 0..rounds {
        let hs: Vec<_> = arrays
            .into_iter()
            .enumerate()
            .map(|(t, mut a)| {
                std::thread::spawn(move || {
                    let mut r = Rng::new((round * 100 + t) as u64);
                    for _ in 0..steps {
                        let i = r.below(a.len());
                        check(&a[i], 1);
                        a[i] = block(r.range(8, 999), 1);
                    }
                    a
                })
            })
            .collect();
        arrays = hs.into_iter().map(|h| h.join().unwrap()).collect();
        arrays.rotate_left(1);
    }
    Extra::default()
}

/// xmalloc-test: producers allocate batches of 64 B blocks, consumers free them.
fn xmalloc(p: Params) -> Extra {
    let pairs = (p.threads / 2).max(1);
    let batches = 20_000 * p.scale;
    let hs: Vec<_> = (0..pairs)
        .flat_map(|_| {
            let (tx, rx) = mpsc::sync_channel::<Vec<Box<[u8; 64]>>>(64);
            let prod = std::thread::spawn(move || {
                for i in 0..batches {
                    let b: Vec<Box<[u8; 64]>> = (0..64).map(|_| Box::new([i as u8; 64])).collect();
                    tx.send(b).unwrap();
                }
            });
            let cons = std::thread::spawn(move || {
                for b in rx {
                    let v = b[0][0];
                    assert!(b.iter().all(|x| x[63] == v));
                }
            });
            [prod, cons]
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// cache-scratch: one thread allocates one 1-byte object per thread; each thread frees its object,
/// then repeatedly allocates 1 B, writes it many times, frees it (false sharing shows up here).
fn cache_scratch(p: Params) -> Extra {
    let objs: Vec<Box<u8>> = (0..p.threads).map(|_| Box::new(0u8)).collect();
    let barrier = Arc::new(Barrier::new(p.threads));
    let iters = 20_000 * p.scale;
    let hs: Vec<_> = objs
        .into_iter()
        .map(|o| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                drop(o);
                barrier.wait();
                for _ in 0..iters {
                    let mut b = Box::new(0u8);
                    for k in 0..100u8 {
                        // SAFETY: b is a live, exclusively owned byte.
                        unsafe { std::ptr::write_volatile(&mut *b, k) };
                    }
                    std::hint::black_box(&b);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// glibc-simple: 16/32/64 B blocks in batches of 25–1600, fully written, half freed FIFO, half LIFO.
fn glibc_simple(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = Rng::new(t as u64 + 7);
                for _ in 0..150 * p.scale {
                    let n = r.range(25, 1600);
                    let size = [16, 32, 64][r.below(3)];
                    let mut v: std::collections::VecDeque<Box<[u8]>> =
                        (0..n).map(|i| block(size, i as u8)).collect();
                    for i in 0..n / 2 {
                        check(&v.pop_front().unwrap(), i as u8);
                    }
                    while let Some(b) = v.pop_back() {
                        std::hint::black_box(b);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// alloc-test: 2^18 slots (2^16 in quick mode), Pareto 80/20 slot choice, 5 B–1 KiB log-skewed
/// sizes, every block fully written and read back.
fn alloc_test(p: Params) -> Extra {
    let slots = if p.scale == 1 { 1 << 16 } else { 1 << 18 };
    let per = 400_000 * p.scale / p.threads.max(1);
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = Rng::new(t as u64 + 99);
                let mut a: Vec<Option<Box<[u8]>>> =
                    (0..slots / p.threads.max(1)).map(|_| None).collect();
                let n = a.len();
                for _ in 0..per {
                    // 80% of the operations on 20% of the slots.
                    let i = if r.below(10) < 8 {
                        r.below(n / 5)
                    } else {
                        r.below(n)
                    };
                    let size = 5 << r.below(8); // 5 B .. 640 B, log-skewed
                    let size = size + r.below(size.min(1024 - size + 1));
                    if let Some(b) = a[i].take() {
                        assert!(b.iter().all(|&x| x == b.len() as u8));
                    }
                    a[i] = Some(block(size, size as u8));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// mstress (mimalloc test-stress): objects of 1–16 words (1% ×100) swapped through a shared transfer
/// array with atomic exchanges, every word checked before free; threads re-created every iteration.
fn mstress(p: Params) -> Extra {
    const COOKIE: usize = 0xbf58_476d_1ce4_e5b9;
    fn obj(r: &mut Rng) -> *mut Vec<usize> {
        let mut w = r.range(1, 16);
        if r.below(100) == 0 {
            w *= 100;
        }
        Box::into_raw(Box::new((0..w).map(|i| i ^ COOKIE).collect()))
    }
    fn free(o: *mut Vec<usize>) {
        if !o.is_null() {
            // SAFETY: o came from Box::into_raw and left the transfer array through a swap.
            let v = unsafe { Box::from_raw(o) };
            assert!(v.iter().enumerate().all(|(i, &w)| w == i ^ COOKIE));
        }
    }
    let transfer: Arc<Vec<AtomicPtr<Vec<usize>>>> = Arc::new(
        (0..1000)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
    );
    for iter in 0..10 * p.scale {
        let hs: Vec<_> = (0..p.threads)
            .map(|t| {
                let transfer = Arc::clone(&transfer);
                std::thread::spawn(move || {
                    let mut r = Rng::new((iter * 64 + t) as u64);
                    let mut keep = Vec::new();
                    for _ in 0..20_000 {
                        let o = obj(&mut r);
                        if r.below(2) == 0 {
                            keep.push(o as usize);
                        } else {
                            free(transfer[r.below(1000)].swap(o, Ordering::AcqRel));
                        }
                        if keep.len() > 500 {
                            let i = r.below(keep.len());
                            free(keep.swap_remove(i) as *mut Vec<usize>);
                        }
                    }
                    keep.into_iter().for_each(|o| free(o as *mut Vec<usize>));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    for s in transfer.iter() {
        free(s.swap(std::ptr::null_mut(), Ordering::AcqRel));
    }
    Extra::default()
}

/// sh6bench-like: sizes grow 1 → 1000 (×1.5+1) and back; the older half is freed FIFO, the rest LIFO.
fn sh6bench(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                for rep in 0..60 * p.scale {
                    let mut sizes = vec![1usize];
                    while *sizes.last().unwrap() < 1000 {
                        let s = *sizes.last().unwrap();
                        sizes.push(s * 3 / 2 + 1);
                    }
                    let back: Vec<usize> = sizes.iter().rev().copied().collect();
                    sizes.extend(back);
                    let mut held = std::collections::VecDeque::new();
                    for &s in &sizes {
                        for k in 0..200 {
                            held.push_back(block(s, (k + rep + t) as u8));
                        }
                    }
                    for _ in 0..held.len() / 2 {
                        std::hint::black_box(held.pop_front());
                    }
                    while let Some(b) = held.pop_back() {
                        std::hint::black_box(b);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// A Rust-shaped workload: maps of Strings to Vecs built, queried and dropped, on every thread.
fn rust_collections(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut total = 0usize;
                for round in 0..4 * p.scale {
                    let mut h: HashMap<String, Vec<u32>> = HashMap::new();
                    let mut b: BTreeMap<u64, String> = BTreeMap::new();
                    for i in 0..20_000u32 {
                        let k = format!("item-{t}-{round}-{i}");
                        h.insert(k.clone(), (0..i % 24).collect());
                        b.insert(u64::from(i) * 31 % 20_011, k);
                    }
                    for i in (0..20_000u32).step_by(3) {
                        total += h
                            .get(&format!("item-{t}-{round}-{i}"))
                            .map_or(0, |v| v.len());
                    }
                    total += b.range(100..5000).map(|(_, v)| v.len()).sum::<usize>();
                    h.retain(|_, v| v.len() % 2 == 0);
                    total += h.len();
                }
                total
            })
        })
        .collect();
    for h in hs {
        std::hint::black_box(h.join().unwrap());
    }
    Extra::default()
}

// ------------------------------------------------------------------------------------------------
// Threads, and real programs: published crates doing their ordinary job on real input.

/// threads: thousands of short threads (500 × scale, `threads` at a time), each allocating and
/// freeing a little and leaving a third of its blocks to a long-lived thread that drops them.
fn threads(p: Params) -> Extra {
    let (tx, rx) = mpsc::channel::<Vec<Box<[u8]>>>();
    let sink = std::thread::spawn(move || {
        let mut n = 0usize;
        for v in rx {
            n += v.len();
        }
        n
    });
    for wave in 0..500 * p.scale / p.threads {
        let hs: Vec<_> = (0..p.threads)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut r = Rng::new((wave * 64 + t) as u64);
                    let mut keep = Vec::new();
                    for i in 0..300 {
                        let b = block(r.range(8, 600), i as u8);
                        if i % 3 == 0 {
                            keep.push(b);
                        } else {
                            check(&b, i as u8);
                        }
                    }
                    let s: String = (0..50).map(|i| format!("{i},")).collect();
                    std::hint::black_box(s);
                    tx.send(keep).unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    drop(tx);
    std::hint::black_box(sink.join().unwrap());
    Extra::default()
}

/// The `.rs` files of the crates in cargo's registry source cache (the sources of this benchmark's
/// own dependencies, so every machine that built it has them), sorted by path, up to `cap` bytes.
fn rust_sources(cap: usize) -> Vec<String> {
    registry_texts("rs", cap)
}

/// The files with extension `ext` in cargo's registry source cache (the sources of this
/// benchmark's own dependencies, present on every machine that built it, with no network at run
/// time), sorted by path, read until `cap` bytes; files over 256 KiB are skipped. The same
/// lockfile gives the same files on every machine.
fn registry_texts(ext: &str, cap: usize) -> Vec<String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("neither CARGO_HOME nor HOME is set");
    let mut files = Vec::new();
    let mut dirs = vec![home.join("registry").join("src")];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == ext) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    let mut total = 0;
    for f in files {
        if total >= cap {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(&f) {
            // Generated files (hundreds of KiB of tables or literals) say little about a heap.
            if text.len() <= 256 * 1024 {
                total += text.len();
                out.push(text);
            }
        }
    }
    assert!(
        total >= cap / 2,
        "found only {total} bytes of .{ext} files under {}: build the benchmark first (its \
         dependencies' sources are the input)",
        home.display()
    );
    out
}

/// syn-parse: `syn` parses a few MB of real Rust sources into full ASTs, kept until all are parsed
/// (a compiler front end's peak), then dropped; twice.
fn syn_parse(p: Params) -> Extra {
    let t = Instant::now();
    let sources = rust_sources(1_500_000 * p.scale);
    let setup = t.elapsed();
    let mut parsed = 0;
    for _ in 0..2 {
        let asts: Vec<syn::File> = sources
            .iter()
            .filter_map(|s| syn::parse_file(s).ok())
            .collect();
        parsed = asts.len();
        std::hint::black_box(&asts);
    }
    assert!(parsed * 2 >= sources.len(), "most sources must parse");
    Extra {
        setup,
        ..Extra::default()
    }
}

/// json-roundtrip: `serde_json` parses a real document (this package's `cargo metadata`, a few
/// MB, written by the parent) into a `Value`, serialises it and parses it back, several times.
fn json_roundtrip(p: Params) -> Extra {
    let t = Instant::now();
    let path = std::env::var("POOLALLOC_BENCH_JSON").expect("the parent passes the JSON document");
    let text = std::fs::read_to_string(&path).expect("cannot read the JSON document");
    let setup = t.elapsed();
    for round in 0..10 * p.scale {
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let out = serde_json::to_string(&v).unwrap();
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        if round == 0 {
            assert_eq!(v, back, "the round trip must give the same document");
        }
        std::hint::black_box((v, back));
    }
    Extra {
        setup,
        ..Extra::default()
    }
}

/// rayon-drop: a `rayon` job counts the words of every source file in parallel into per-file
/// maps; another (plain) thread receives the results and drops them.
fn rayon_drop(p: Params) -> Extra {
    use rayon::prelude::*;
    let t = Instant::now();
    let sources = rust_sources(1_000_000 * p.scale);
    let setup = t.elapsed();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(p.threads)
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<Vec<BTreeMap<String, usize>>>();
    let dropper = std::thread::spawn(move || rx.into_iter().map(|v| v.len()).sum::<usize>());
    for _ in 0..3 {
        let counts: Vec<BTreeMap<String, usize>> = pool.install(|| {
            sources
                .par_iter()
                .map(|s| {
                    let mut m = BTreeMap::new();
                    for w in s.split(|c: char| !c.is_alphanumeric() && c != '_') {
                        if !w.is_empty() {
                            *m.entry(w.to_string()).or_insert(0) += 1;
                        }
                    }
                    m
                })
                .collect()
        });
        tx.send(counts).unwrap();
    }
    drop(tx);
    std::hint::black_box(dropper.join().unwrap());
    Extra {
        setup,
        ..Extra::default()
    }
}

/// Writes this package's `cargo metadata` (a real JSON document of a few MB) for `json-roundtrip`.
fn write_json_input() -> PathBuf {
    let path = out_dir().join("metadata.json");
    if path.exists() {
        return path;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["metadata", "--format-version", "1"])
        .output()
        .expect("cannot run cargo metadata");
    assert!(out.status.success(), "cargo metadata failed");
    std::fs::create_dir_all(out_dir()).unwrap();
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

// ------------------------------------------------------------------------------------------------
// Fragmentation workloads: peak RSS against the peak of live requested bytes, and RSS after free.

/// Measures RSS right after everything was freed and one second later.
fn after_free(e: &mut Extra) {
    e.rss_freed = Some(rss_now());
    std::thread::sleep(Duration::from_secs(1));
    e.rss_freed_1s = Some(rss_now());
}

/// (a) fill with small objects, free 90% at random, then allocate objects of a different size.
fn frag_fill_free90(p: Params) -> Extra {
    let mut r = Rng::new(3);
    let n = 400_000 * p.scale;
    let mut e = Extra::default();
    let mut v: Vec<Option<Box<[u8]>>> = (0..n).map(|_| Some(block(48, 1))).collect();
    let mut live = n * 48;
    for _ in 0..n * 9 / 10 {
        let i = r.below(n);
        if v[i].take().is_some() {
            live -= 48;
        }
    }
    e.peak_live = n * 48;
    let more: Vec<Box<[u8]>> = (0..n / 2).map(|_| block(200, 2)).collect();
    e.peak_live = e.peak_live.max(live + more.len() * 200);
    drop(more);
    drop(v);
    after_free(&mut e);
    e
}

/// (b) long-lived and short-lived objects interleaved: every 50th object survives, pinning chunks.
fn frag_long_short(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut long = Vec::new();
    let mut live = 0;
    for round in 0..20 * p.scale {
        let short: Vec<Box<[u8]>> = (0..50_000)
            .map(|i| {
                let b = block(16 + (i % 7) * 16, round as u8);
                if i % 50 == 0 {
                    long.push(block(16 + (i % 7) * 16, 3));
                    live += 16 + (i % 7) * 16;
                }
                b
            })
            .collect();
        let short_bytes: usize = short.iter().map(|b| b.len()).sum();
        e.peak_live = e.peak_live.max(live + short_bytes);
    }
    drop(long);
    after_free(&mut e);
    e
}

/// (c) request sizes that drift over time: a sliding window of objects whose size grows slowly.
fn frag_drift(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut window = std::collections::VecDeque::new();
    let mut live = 0;
    let steps = 600_000 * p.scale;
    for i in 0..steps {
        let size = 16 + (i * 2000 / steps);
        window.push_back(block(size, 5));
        live += size;
        if window.len() > 60_000 {
            live -= window.pop_front().unwrap().len();
        }
        e.peak_live = e.peak_live.max(live);
    }
    drop(window);
    after_free(&mut e);
    e
}

/// (d) allocate a large mixed heap, free everything, measure RSS at once and after 1 s.
fn frag_free_all(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut r = Rng::new(11);
    let mut v = Vec::new();
    let mut live = 0;
    for _ in 0..300_000 * p.scale {
        let size = if r.below(100) == 0 {
            r.range(33_000, 200_000)
        } else {
            r.range(8, 2000)
        };
        live += size;
        v.push(block(size, 9));
    }
    e.peak_live = live;
    drop(v);
    after_free(&mut e);
    e
}

type Workload = fn(Params) -> Extra;

const WORKLOADS: &[(&str, Workload, bool)] = &[
    ("larson", larson, false),
    ("xmalloc-test", xmalloc, false),
    ("cache-scratch", cache_scratch, false),
    ("glibc-simple", glibc_simple, false),
    ("alloc-test", alloc_test, false),
    ("mstress", mstress, false),
    ("sh6bench", sh6bench, false),
    ("rust-collections", rust_collections, false),
    ("threads", threads, false),
    ("syn-parse", syn_parse, false),
    ("json-roundtrip", json_roundtrip, false),
    ("rayon-drop", rayon_drop, false),
    ("markdown-html", markdown::markdown_html, false),
    ("rayon-reduce", rayon_reduce::rayon_reduce, false),
    ("frag-fill-free90", frag_fill_free90, true),
    ("frag-long-short", frag_long_short, true),
    ("frag-drift", frag_drift, true),
    ("frag-free-all", frag_free_all, true),
    ("large-buffers", large_buffers::large_buffers, true),
];

// ------------------------------------------------------------------------------------------------
// Child and parent.

fn child(workload: &str) {
    let threads = std::env::var("POOLALLOC_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let scale = std::env::var("POOLALLOC_BENCH_SCALE")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let (_, f, frag) = WORKLOADS
        .iter()
        .find(|w| w.0 == workload)
        .expect("unknown workload");
    let sampler = frag.then(Sampler::start);
    let t = Instant::now();
    let e = f(Params { threads, scale });
    // Fragmentation workloads include one second of waiting after free: not part of their time.
    let secs = t.elapsed().as_secs_f64()
        - if e.rss_freed_1s.is_some() { 1.0 } else { 0.0 }
        - e.setup.as_secs_f64();
    let samples = sampler.map(Sampler::finish).unwrap_or_default();
    let samples: Vec<String> = samples.iter().map(|(ms, r)| format!("{ms}:{r}")).collect();
    println!(
        "RESULT secs={secs:.6} peak_rss={} peak_live={} rss_freed={} rss_freed_1s={} samples={}",
        peak_rss(),
        e.peak_live,
        e.rss_freed.unwrap_or(0),
        e.rss_freed_1s.unwrap_or(0),
        samples.join(",")
    );
}

#[derive(Clone, Default)]
struct Run {
    secs: f64,
    peak_rss: usize,
    peak_live: usize,
    rss_freed: usize,
    rss_freed_1s: usize,
    samples: Vec<(u32, usize)>,
}

fn parse(line: &str) -> Option<Run> {
    let mut r = Run::default();
    for kv in line.strip_prefix("RESULT ")?.split(' ') {
        let (k, v) = kv.split_once('=')?;
        match k {
            "secs" => r.secs = v.parse().ok()?,
            "peak_rss" => r.peak_rss = v.parse().ok()?,
            "peak_live" => r.peak_live = v.parse().ok()?,
            "rss_freed" => r.rss_freed = v.parse().ok()?,
            "rss_freed_1s" => r.rss_freed_1s = v.parse().ok()?,
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mib(b: f64) -> String {
    format!("{:.1}", b / (1024.0 * 1024.0))
}

fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // The bench binary lives in <target>/release/deps/.
            let exe = std::env::current_exe().unwrap();
            exe.ancestors()
                .nth(3)
                .map(PathBuf::from)
                .unwrap_or_else(|| "target".into())
        });
    target.join("poolalloc-report")
}

pub fn main() {
    if let Ok(w) = std::env::var("POOLALLOC_BENCH_WORKLOAD") {
        child(&w);
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
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (rounds, scale) = if quick { (1, 1) } else { (5, 4) };
    // `--rounds=N`: more or fewer interleaved rounds than the mode's default.
    let rounds = args
        .iter()
        .find_map(|a| a.strip_prefix("--rounds=")?.parse().ok())
        .unwrap_or(rounds);
    let exe = std::env::current_exe().unwrap();
    let hardened_exe = build_hardened();
    let json = write_json_input();
    let workloads: Vec<&(&str, Workload, bool)> = WORKLOADS
        .iter()
        .filter(|w| only.is_empty() || only.iter().any(|o| w.0.contains(o.as_str())))
        .collect();
    // runs[workload][allocator] = every round's result
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); RUNNERS.len()]; workloads.len()];
    let total = rounds * workloads.len() * RUNNERS.len();
    let mut done = 0;
    let started = Instant::now();
    for round in 0..rounds {
        for (wi, w) in workloads.iter().enumerate() {
            for k in 0..RUNNERS.len() {
                let ai = (k + round + wi) % RUNNERS.len(); // rotate the order
                let (bin, alloc) = if ai == HARDENED {
                    (&hardened_exe, "poolalloc")
                } else {
                    (&exe, ALLOCATORS[ai])
                };
                let out = Command::new(bin)
                    .env("POOLALLOC_BENCH_WORKLOAD", w.0)
                    .env("POOLALLOC_BENCH_JSON", &json)
                    .env("POOLALLOC_BENCH_ALLOC", alloc)
                    .env("POOLALLOC_BENCH_THREADS", threads.to_string())
                    .env("POOLALLOC_BENCH_SCALE", scale.to_string())
                    .output()
                    .expect("cannot run the workload child");
                let stdout = String::from_utf8_lossy(&out.stdout);
                let run = stdout.lines().find_map(parse).unwrap_or_else(|| {
                    panic!(
                        "{} with {} failed ({}):\n{}\n{}",
                        w.0,
                        RUNNERS[ai],
                        out.status,
                        stdout,
                        String::from_utf8_lossy(&out.stderr)
                    )
                });
                done += 1;
                eprintln!(
                    "[{done}/{total} {:>5.0}s] round {} {:<17} {:<10} {:>8.3} s  peak RSS {:>7} MiB",
                    started.elapsed().as_secs_f64(),
                    round + 1,
                    w.0,
                    RUNNERS[ai],
                    run.secs,
                    mib(run.peak_rss as f64)
                );
                runs[wi][ai].push(run);
            }
        }
    }
    let report = table(&workloads, &runs, threads, rounds, quick);
    println!("{report}");
    let dir = out_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.md"), &report).unwrap();
    charts(&dir, &workloads, &runs);
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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = out_dir().parent().unwrap().join("hardened-build");
    eprintln!(
        "building the hardened variant of this benchmark in {}",
        target.display()
    );
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--profile", "bench", "--bench", "report"])
        .args(["--features", "hardened", "--message-format", "json"])
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| {
            l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"name\":\"report\"")
        })
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(PathBuf::from(&l[at..at + end]))
        })
        .expect("cargo did not report the hardened benchmark's executable")
}

/// The Markdown table: medians per workload and allocator, and poolalloc's ratio to the best peer.
fn table(
    workloads: &[&(&str, Workload, bool)],
    runs: &[Vec<Vec<Run>>],
    threads: usize,
    rounds: usize,
    quick: bool,
) -> String {
    let mut s = String::new();
    s += &format!(
        "Medians of {rounds} interleaved run(s) per cell, {threads} threads{}. Time in seconds, peak RSS in MiB; \
         ratio = poolalloc / best of jemalloc and mimalloc (below 1 is better); hardened cost = poolalloc built with \
         `--features hardened` / poolalloc.\n\n",
        if quick {
            ", quick mode (small inputs)"
        } else {
            ""
        }
    );
    s += "| workload | poolalloc s | system s | jemalloc s | mimalloc s | time ratio | poolalloc RSS | system RSS | jemalloc RSS | mimalloc RSS | RSS ratio | hardened s | hardened cost |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (wi, w) in workloads.iter().enumerate() {
        let t: Vec<f64> = (0..RUNNERS.len())
            .map(|a| median(runs[wi][a].iter().map(|r| r.secs).collect()))
            .collect();
        let m: Vec<f64> = (0..4)
            .map(|a| median(runs[wi][a].iter().map(|r| r.peak_rss as f64).collect()))
            .collect();
        s += &format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | **{:.2}** | {} | {} | {} | {} | **{:.2}** | {:.3} | **{:.2}** |\n",
            w.0,
            t[0],
            t[1],
            t[2],
            t[3],
            t[0] / t[2].min(t[3]),
            mib(m[0]),
            mib(m[1]),
            mib(m[2]),
            mib(m[3]),
            m[0] / m[2].min(m[3]),
            t[HARDENED],
            t[HARDENED] / t[0]
        );
    }
    let costs: Vec<f64> = (0..workloads.len())
        .map(|wi| {
            let t = |a: usize| median(runs[wi][a].iter().map(|r| r.secs).collect());
            t(HARDENED) / t(0)
        })
        .collect();
    if !costs.is_empty() {
        let geo = (costs.iter().map(|c| c.ln()).sum::<f64>() / costs.len() as f64).exp();
        s += &format!(
            "\nHardened cost, geometric mean over the workloads: **{geo:.2}** (target: at most 1.05, never above 1.10).\n"
        );
    }
    let frag: Vec<usize> = (0..workloads.len()).filter(|&i| workloads[i].2).collect();
    if !frag.is_empty() {
        s += "\nFragmentation: peak RSS / peak live requested bytes (lower is better), and RSS (MiB) right after \
              freeing everything / one second later, with no call to the allocator.\n\n";
        s += "| workload | poolalloc | system | jemalloc | mimalloc | poolalloc after free | system after free | jemalloc after free | mimalloc after free |\n";
        s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for wi in frag {
            let ratio: Vec<f64> = (0..4)
                .map(|a| {
                    median(
                        runs[wi][a]
                            .iter()
                            .map(|r| r.peak_rss as f64 / r.peak_live.max(1) as f64)
                            .collect(),
                    )
                })
                .collect();
            let after: Vec<String> = (0..4)
                .map(|a| {
                    let f = median(runs[wi][a].iter().map(|r| r.rss_freed as f64).collect());
                    let g = median(runs[wi][a].iter().map(|r| r.rss_freed_1s as f64).collect());
                    format!("{} / {}", mib(f), mib(g))
                })
                .collect();
            s += &format!(
                "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |\n",
                workloads[wi].0,
                ratio[0],
                ratio[1],
                ratio[2],
                ratio[3],
                after[0],
                after[1],
                after[2],
                after[3]
            );
        }
    }
    s
}

fn register_font() -> bool {
    static DONE: AtomicUsize = AtomicUsize::new(0);
    if DONE.load(Ordering::Relaxed) == 1 {
        return true;
    }
    for path in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ] {
        if let Ok(bytes) = std::fs::read(path) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(
                "sans-serif",
                plotters::style::FontStyle::Normal,
                bytes,
            )
            .is_ok()
            {
                DONE.store(1, Ordering::Relaxed);
                return true;
            }
        }
    }
    false
}

fn charts(dir: &std::path::Path, workloads: &[&(&str, Workload, bool)], runs: &[Vec<Vec<Run>>]) {
    if !register_font() {
        eprintln!("no DejaVuSans.ttf found (install fonts-dejavu-core): charts skipped");
        return;
    }
    let names: Vec<&str> = workloads.iter().map(|w| w.0).collect();
    let ratios: Vec<(f64, f64)> = (0..workloads.len())
        .map(|wi| {
            let t: Vec<f64> = (0..4)
                .map(|a| median(runs[wi][a].iter().map(|r| r.secs).collect()))
                .collect();
            let m: Vec<f64> = (0..4)
                .map(|a| median(runs[wi][a].iter().map(|r| r.peak_rss as f64).collect()))
                .collect();
            (t[0] / t[2].min(t[3]), m[0] / m[2].min(m[3]))
        })
        .collect();
    let svg = dir.join("ratios.svg");
    let png = dir.join("ratios.png");
    draw_ratios(
        plotters::prelude::SVGBackend::new(&svg, (1100, 520)),
        &names,
        &ratios,
    );
    draw_ratios(
        plotters::prelude::BitMapBackend::new(&png, (1100, 520)),
        &names,
        &ratios,
    );
    for (wi, w) in workloads.iter().enumerate().filter(|(_, w)| w.2) {
        // The last round's samples of each allocator.
        let series: Vec<(&str, Vec<(u32, usize)>)> = (0..4)
            .map(|a| {
                (
                    ALLOCATORS[a],
                    runs[wi][a]
                        .last()
                        .map(|r| r.samples.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let svg = dir.join(format!("rss-{}.svg", w.0));
        let png = dir.join(format!("rss-{}.png", w.0));
        draw_rss(
            plotters::prelude::SVGBackend::new(&svg, (900, 420)),
            w.0,
            &series,
        );
        draw_rss(
            plotters::prelude::BitMapBackend::new(&png, (900, 420)),
            w.0,
            &series,
        );
    }
}

const COLORS: [plotters::style::RGBColor; 4] = [
    plotters::style::RGBColor(214, 39, 40),
    plotters::style::RGBColor(127, 127, 127),
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(44, 160, 44),
];

fn draw_ratios<B: plotters::prelude::DrawingBackend>(
    backend: B,
    names: &[&str],
    ratios: &[(f64, f64)],
) {
    use plotters::prelude::*;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).ok();
    let ymax = ratios
        .iter()
        .flat_map(|r| [r.0, r.1])
        .fold(1.2f64, f64::max)
        * 1.1;
    let n = names.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "poolalloc / best of jemalloc and mimalloc (below 1 is better)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(90)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n, 0f64..ymax)
        .unwrap();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("ratio")
        .draw()
        .unwrap();
    chart
        .draw_series(ratios.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [(i as f64 + 0.12, 0.0), (i as f64 + 0.48, r.0)],
                COLORS[2].filled(),
            )
        }))
        .unwrap()
        .label("time")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], COLORS[2].filled()));
    chart
        .draw_series(ratios.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [(i as f64 + 0.52, 0.0), (i as f64 + 0.88, r.1)],
                COLORS[1].filled(),
            )
        }))
        .unwrap()
        .label("peak RSS")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], COLORS[1].filled()));
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (n, 1.0)],
            COLORS[0].stroke_width(2),
        ))
        .unwrap();
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .unwrap();
    // Workload names under their bars, turned so they fit.
    let style = ("sans-serif", 14)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK);
    for (i, name) in names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.4, 0.0));
        root.draw(&Text::new(name.to_string(), (x + 6, y + 6), style.clone()))
            .ok();
    }
    root.present().ok();
}

fn draw_rss<B: plotters::prelude::DrawingBackend>(
    backend: B,
    name: &str,
    series: &[(&str, Vec<(u32, usize)>)],
) {
    use plotters::prelude::*;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).ok();
    let tmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1000.0;
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .max()
        .unwrap_or(1) as f64
        / 1048576.0
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{name}: RSS over time"), ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..tmax, 0f64..ymax.max(1.0))
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("RSS (MiB)")
        .draw()
        .unwrap();
    for (k, (alloc, pts)) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                pts.iter()
                    .map(|&(ms, r)| (ms as f64 / 1000.0, r as f64 / 1048576.0)),
                COLORS[k].stroke_width(2),
            ))
            .unwrap()
            .label(*alloc)
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 15, y)], COLORS[k].stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .unwrap();
    root.present().ok();
}
