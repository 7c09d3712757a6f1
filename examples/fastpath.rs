//! The fast path, for instruction counting with `valgrind --tool=callgrind` (release build).
//!
//! Three ways to run it:
//!
//! - `fastpath [N [SIZE]]`: `N` alloc+free pairs of one size (default 16 B) on `PoolAlloc`; the
//!   functions `fast_alloc` and `fast_free`, inclusive, divided by `N` are the instructions of
//!   one `alloc` and one `dealloc` (call excluded, return included). See docs/how-it-works.md,
//!   "Fast path".
//! - `fastpath pairs ALLOC N [SIZE...]`: the loop of issue 36: `N` pairs whose sizes cycle through
//!   the `SIZE`s (default 16, 24, 48, 64 B), one block of each size kept live throughout, on
//!   `ALLOC` (`poolalloc`, `rusty_alloc`, `jemalloc` or `mimalloc`). Each call goes through an
//!   `#[inline(never)]` function standing for `__rust_alloc` / `__rust_dealloc` (`rust_alloc`,
//!   `rust_dealloc`: the allocator's `GlobalAlloc` method inlined into it, the layout in
//!   registers, as in the shims `#[global_allocator]` generates). The loop is `counted_pairs`.
//! - `fastpath count [N [ALLOC...]]`: runs the `pairs` mode under callgrind for every allocator, with the
//!   sizes mixed and one at a time, and prints instructions per pair: the inclusive cost of the
//!   calls `counted_pairs` makes to `rust_alloc` and `rust_dealloc`, divided by `N`. That is the
//!   loop function's inclusive count minus its own instructions (the loop overhead: the counter,
//!   the layout loads, the argument moves and the two `call`s); the bodies, what they call and
//!   their returns are counted. Needs `valgrind` on the `PATH`.
//!
//! The peers are dev-dependencies on Linux (glibc or musl) without `--cfg
//! poolalloc_no_bench_peers` (Cargo.toml); elsewhere only `poolalloc` exists.

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[inline(never)]
fn fast_alloc(l: Layout) -> *mut u8 {
    // SAFETY: l has a non-zero size.
    unsafe { P.alloc(l) }
}

#[inline(never)]
fn fast_free(p: *mut u8, l: Layout) {
    // SAFETY: p was allocated by P with l and is freed once.
    unsafe { P.dealloc(p, l) }
}

/// `__rust_alloc` for allocator `A`: its `alloc` inlined, the layout a run-time argument.
#[inline(never)]
fn rust_alloc<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: every layout of this program has a non-zero size.
    unsafe { a.alloc(l) }
}

/// `__rust_dealloc` for allocator `A`.
#[inline(never)]
fn rust_dealloc<A: GlobalAlloc>(a: &A, p: *mut u8, l: Layout) {
    // SAFETY: p was allocated by a with l and is freed once.
    unsafe { a.dealloc(p, l) }
}

/// `n` alloc+free pairs on `a`, cycling through `layouts`.
#[inline(never)]
fn counted_pairs<A: GlobalAlloc>(a: &A, n: usize, layouts: &[Layout; 4]) {
    for i in 0..n {
        let l = layouts[i % 4];
        let p = rust_alloc(a, l);
        black_box(p);
        rust_dealloc(a, p, l);
    }
}

/// The `pairs` mode on `a`: one block of each size kept live, a warm-up, then the counted loop.
fn pairs<A: GlobalAlloc>(a: &A, n: usize, sizes: &[usize]) {
    assert!(
        matches!(sizes.len(), 1 | 2 | 4),
        "1, 2 or 4 sizes (the loop cycles through four)"
    );
    let mut layouts = [Layout::new::<u8>(); 4];
    for (i, l) in layouts.iter_mut().enumerate() {
        *l = Layout::from_size_align(sizes[i % sizes.len()], 8).unwrap();
    }
    let live: Vec<*mut u8> = sizes
        .iter()
        .map(|&s| rust_alloc(a, Layout::from_size_align(s, 8).unwrap()))
        .collect();
    // Warm-up: each class's chunk carved and the thread's heap made before counting starts.
    for _ in 0..64 {
        for l in &layouts {
            let p = rust_alloc(a, *l);
            assert!(!p.is_null());
            rust_dealloc(a, p, *l);
        }
    }
    counted_pairs(a, n, &layouts);
    for (p, &s) in live.into_iter().zip(sizes) {
        rust_dealloc(a, p, Layout::from_size_align(s, 8).unwrap());
    }
}

#[cfg(all(
    target_os = "linux",
    any(target_env = "gnu", target_env = "musl"),
    not(poolalloc_no_bench_peers)
))]
mod peers {
    pub static RUSTY: rusty_alloc_api::RustyAlloc = rusty_alloc_api::RustyAlloc;
    pub static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
    pub static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
    pub const NAMES: &[&str] = &["poolalloc", "rusty_alloc", "jemalloc", "mimalloc"];
}
#[cfg(not(all(
    target_os = "linux",
    any(target_env = "gnu", target_env = "musl"),
    not(poolalloc_no_bench_peers)
)))]
mod peers {
    pub const NAMES: &[&str] = &["poolalloc"];
}

/// The `pairs` mode on the allocator named `name`.
fn pairs_on(name: &str, n: usize, sizes: &[usize]) {
    match name {
        "poolalloc" => pairs(&P, n, sizes),
        #[cfg(all(
            target_os = "linux",
            any(target_env = "gnu", target_env = "musl"),
            not(poolalloc_no_bench_peers)
        ))]
        other => match other {
            "rusty_alloc" => pairs(&peers::RUSTY, n, sizes),
            "jemalloc" => pairs(&peers::JEMALLOC, n, sizes),
            "mimalloc" => pairs(&peers::MIMALLOC, n, sizes),
            _ => panic!("unknown allocator {other}: one of {:?}", peers::NAMES),
        },
        #[cfg(not(all(
            target_os = "linux",
            any(target_env = "gnu", target_env = "musl"),
            not(poolalloc_no_bench_peers)
        )))]
        other => panic!("unknown allocator {other}: one of {:?}", peers::NAMES),
    }
}

/// Instructions of `rust_alloc` and of `rust_dealloc` (inclusive: the body, its return and
/// anything it calls) when called from `counted_pairs`, in one `pairs` run under callgrind.
fn callgrind_count(name: &str, n: usize, sizes: &[usize]) -> (u64, u64) {
    let exe = std::env::current_exe().expect("own path");
    let out = std::env::temp_dir().join(format!("fastpath-{}-{name}.cg", std::process::id()));
    let status = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["pairs", name, &n.to_string()])
        .args(sizes.iter().map(|s| s.to_string()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("valgrind on the PATH");
    assert!(status.success(), "callgrind run of {name} failed: {status}");
    let text = std::fs::read_to_string(&out).expect("callgrind output");
    let _ = std::fs::remove_file(&out);
    // The format (callgrind's docs, "Callgrind Format Specification"): `fn=` names the function
    // whose costs follow and `cfn=` a callee, each as `(id) name` the first time and `(id)` after;
    // a `calls=` line is followed by the line holding that call's inclusive cost, its first event
    // (Ir) after the position.
    let mut names = std::collections::HashMap::new();
    let mut name_of = |v: &str| -> String {
        let (id, rest) = v.split_once(')').unwrap_or((v, ""));
        let rest = rest.trim();
        if !rest.is_empty() {
            names.insert(id.to_string(), rest.to_string());
        }
        names.get(id).cloned().unwrap_or_default()
    };
    let (mut caller, mut callee) = (String::new(), String::new());
    let (mut alloc, mut free) = (0, 0);
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(v) = l.strip_prefix("fn=") {
            caller = name_of(v);
        } else if let Some(v) = l.strip_prefix("cfn=") {
            callee = name_of(v);
        } else if l.starts_with("calls=") {
            let cost: u64 = lines
                .next()
                .and_then(|c| c.split_whitespace().nth(1)?.parse().ok())
                .expect("a call's cost line");
            if caller.ends_with("counted_pairs") {
                if callee.ends_with("rust_alloc") {
                    alloc += cost;
                } else if callee.ends_with("rust_dealloc") {
                    free += cost;
                }
            }
        }
    }
    (alloc, free)
}

/// The `count` mode: instructions per pair for every allocator, sizes mixed and one at a time.
fn count(n: usize, only: &[String]) {
    let runs: [&[usize]; 5] = [&[16, 24, 48, 64], &[16], &[24], &[48], &[64]];
    println!(
        "instructions per alloc+free pair (alloc + free), callgrind, {n} pairs, call and loop excluded"
    );
    print!("{:<12}", "allocator");
    for r in &runs {
        let label = r
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("/");
        print!(" {label:>20}");
    }
    println!();
    for name in peers::NAMES {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        print!("{name:<12}");
        for s in &runs {
            let (a, f) = callgrind_count(name, n, s);
            let per = |x: u64| x as f64 / n as f64;
            let cell = format!("{:.2} ({:.2} + {:.2})", per(a + f), per(a), per(f));
            print!(" {cell:>20}");
        }
        println!();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    match args.get(1).map(String::as_str) {
        Some("pairs") => {
            let name = args.get(2).map(String::as_str).unwrap_or("poolalloc");
            let n = num(3, 1_000_000);
            let mut sizes: Vec<usize> = args[4.min(args.len())..]
                .iter()
                .map(|s| s.parse().expect("a size"))
                .collect();
            if sizes.is_empty() {
                sizes = vec![16, 24, 48, 64];
            }
            pairs_on(name, n, &sizes);
            println!("{n} alloc+free pairs on {name}, sizes {sizes:?}");
            return;
        }
        Some("count") => return count(num(2, 100_000), args.get(3..).unwrap_or_default()),
        _ => {}
    }
    let n = num(1, 1_000_000);
    // The block size (default 16: the figures in docs/how-it-works.md); `hardened` marks slots of
    // 24 bytes and more with poison words, so its counts depend on it.
    let size = num(2, 16);
    let l = Layout::from_size_align(black_box(size), 8).unwrap();
    // Warm up: the chunk is carved and the thread's heap exists before counting starts.
    let warm: Vec<*mut u8> = (0..64).map(|_| fast_alloc(l)).collect();
    for p in warm {
        fast_free(p, l);
    }
    for _ in 0..n {
        let p = fast_alloc(l);
        black_box(p);
        fast_free(p, l);
    }
    println!("{n} alloc+free pairs of {size} B");
}
