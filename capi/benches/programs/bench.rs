//! Real programs under four allocators: glibc malloc, Debian's jemalloc and mimalloc, and
//! `libpoolalloc_c.so`, each put in place with `LD_PRELOAD`.
//!
//! `cargo bench -p poolalloc-c --bench programs` (five interleaved rounds) or `-- --quick` (small
//! inputs, two rounds). An argument that does not start with `-` keeps only the workloads whose
//! name contains it. Writes `target/poolalloc-report/programs.md` and `programs.png` and prints the
//! table.
//!
//! The workloads, each run as its own process(es) per allocator and round, rounds interleaved
//! (every round runs every allocator once, in a rotating order), medians reported:
//! - `redis`: a preloaded `redis-server` on the loopback address, driven by `redis-benchmark`
//!   (not preloaded) with small pipelined values, medium values and values above 32 KiB; the
//!   figure is the geometric mean of the requests per second of every test, the RSS is the
//!   server's `VmHWM`. Every reply must be fine (`total_error_replies:0`) and a fixed script of
//!   commands run with `redis-cli` afterwards must print the same under every allocator.
//! - `sqlite`: `sqlite3` on an in-memory database runs a generated script (bulk inserts of text
//!   rows, some above 32 KiB, index creation, joins, group-bys, a window function, updates,
//!   deletes, `VACUUM`, an integrity check); its output must be the same under every allocator.
//! - `python` and `python-malloc`: CPython runs a standard-library workload (dicts, lists,
//!   strings, objects with reference cycles, JSON, big buffers, a producer and a consumer thread),
//!   once with its own small-object allocator (as people run it) and once with
//!   `PYTHONMALLOC=malloc`, so that every object comes from the allocator under test. Its output
//!   (digests of what it built) must be the same under every allocator.
//! - `gcc`: `gcc -O2 -c` on mimalloc's single-file builds (`static.c`), found in the cargo
//!   registry's `libmimalloc-sys` sources, one file after the other (`SOURCE_DATE_EPOCH=0`, as
//!   they embed `__DATE__`); the objects must be byte-identical under every allocator.
//! - `larson-cpp`: a larson-style exchange in C++ with sized delete (`programs/larson.cpp`, built
//!   with g++ here): two threads each replace random objects of 16 B to 1 KiB in a working set of
//!   5000 with `::operator delete(p, size)` and `::operator new(size)`, and hand their sets on after
//!   every round, so that most frees are of objects the other thread made. Its checksum must be
//!   the same under every allocator.
//!
//! Time is wall-clock from the start of the process to its end (`wait4`); peak RSS is `wait4`'s
//! `ru_maxrss`, which on Linux is the largest of the process and of the descendants it waited for,
//! so `gcc` counts `cc1` and `as`.
//!
//! "glibc" preloads `libc.so.6` itself: a program linked against another allocator (Debian links
//! `redis-server` with `libjemalloc.so.2`) then still gets glibc's `malloc`, because preloaded
//! objects come before the program's own libraries in symbol lookup. Before measuring, every
//! program is run once per allocator with `LD_DEBUG=bindings` and the benchmark fails unless
//! `malloc` and `free` bind to the intended library in every process it started.
//!
//! The library: `POOLALLOC_TEST_C_SO=<path>` if set, else built with `$CARGO build --release -p
//! poolalloc-c` in its own target directory (`target/capi-bench`: the running `cargo bench` holds
//! the lock of the usual one). A `POOLALLOC_TEST_C_SO` whose file name is not `libpoolalloc_c.so`
//! (a stand-in while the library is being written) is named as such in the report.
//!
//! Missing programs or peers make the benchmark fail with a message naming `bash .ci/deps`.
//!
//! A file a program (`redis.rs`, `sqlite.rs`, `python.rs`, `gcc.rs`, `larson.rs`), their inputs in
//! `capi/benches/inputs/` (the Python workload, the SQL schema and queries); processes are run and
//! measured in `process.rs`, the library and the checks are made in `setup.rs`, the report is
//! written by `output.rs`. Medians, tables, the chart, the random number generator and the
//! interleaving of rounds come from the harness both benchmarks share (`benches/harness/`).

use crate::harness::cargo::report_dir;
use crate::harness::run::interleaved;
use crate::harness::stats::mib;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod gcc;
mod larson;
mod output;
mod process;
mod python;
mod redis;
mod setup;
mod sqlite;
mod text;

use process::Finished;

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const MIMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";
const LIBC: [&str; 2] = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
];
const DEPS: &str = "run `bash .ci/deps` (as root) in the repository";

/// Column order everywhere: poolalloc first, then glibc, jemalloc, mimalloc.
const NAMES: [&str; 4] = ["poolalloc", "glibc", "jemalloc", "mimalloc"];

/// An allocator: its name in the report and the library preloaded.
struct Alloc {
    name: &'static str,
    preload: PathBuf,
}

// ------------------------------------------------------------------------------------------------
// Workloads.

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Redis,
    Sqlite,
    Python,
    PythonMalloc,
    Gcc,
    Larson,
}

struct Workload {
    name: &'static str,
    kind: Kind,
}

const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "redis",
        kind: Kind::Redis,
    },
    Workload {
        name: "sqlite",
        kind: Kind::Sqlite,
    },
    Workload {
        name: "python",
        kind: Kind::Python,
    },
    Workload {
        name: "python-malloc",
        kind: Kind::PythonMalloc,
    },
    Workload {
        name: "gcc",
        kind: Kind::Gcc,
    },
    Workload {
        name: "larson-cpp",
        kind: Kind::Larson,
    },
];

/// What a workload's run gives: its figure (seconds, or requests per second for redis), its peak
/// RSS in bytes, and the output that must be the same under every allocator.
struct Outcome {
    figure: f64,
    /// User + system seconds of the measured processes (0 for redis: not measured).
    cpu: f64,
    rss: u64,
    output: Vec<u8>,
    /// redis only: requests per second of each test, by name.
    tests: Vec<(String, f64)>,
}

struct Setup {
    quick: bool,
    work: PathBuf,
    sql: PathBuf,
    py: PathBuf,
    python: PathBuf,
    redis_check: PathBuf,
    gcc_units: Vec<(PathBuf, PathBuf)>, // (include dir, static.c)
    /// `programs/larson.cpp`, built with g++.
    larson: PathBuf,
}

/// One run of `w` under `a`, in a fresh scratch directory.
fn run_workload(w: &Workload, a: &Alloc, s: &Setup) -> Outcome {
    let scratch = s.work.join(format!("run-{}-{}", w.name, a.name));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let what = format!("{} under {}", w.name, a.name);
    match w.kind {
        Kind::Redis => redis::measure(a, s, &scratch),
        Kind::Sqlite => sqlite::measure(&what, a, s, &scratch),
        Kind::Python => python::measure(&what, a, s, &scratch, false),
        Kind::PythonMalloc => python::measure(&what, a, s, &scratch, true),
        Kind::Gcc => gcc::measure(&what, a, s, &scratch),
        Kind::Larson => larson::measure(&what, a, s, &scratch),
    }
}

/// The command that runs `w`'s program briefly for the bindings check (`dir`: its scratch folder).
fn probe(w: &Workload, s: &Setup, dir: &Path) -> std::process::Command {
    match w.kind {
        Kind::Redis => redis::probe(),
        Kind::Sqlite => sqlite::probe(),
        Kind::Python => python::probe(s, false),
        Kind::PythonMalloc => python::probe(s, true),
        Kind::Gcc => gcc::probe(dir),
        Kind::Larson => larson::probe(s),
    }
}

/// The outcome of a workload that is one process: its time, CPU time, peak RSS and stdout.
fn outcome(f: Finished) -> Outcome {
    Outcome {
        figure: f.secs,
        cpu: f.cpu,
        rss: f.maxrss,
        output: f.stdout,
        tests: Vec::new(),
    }
}

// ------------------------------------------------------------------------------------------------
// Main.

/// Every round's figures of one workload under one allocator.
struct Cell {
    figures: Vec<f64>,
    cpu: Vec<f64>,
    rss: Vec<f64>,
    tests: Vec<Vec<(String, f64)>>,
}

pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<&String> = args.iter().find(|a| !a.starts_with('-'));
    let rounds = if quick { 2 } else { 5 };

    let libc_so = check_dependencies();
    let so = setup::library();
    let allocs = allocators(&so, libc_so);
    let out = report_dir();
    let setup = prepare(&out, quick);
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| only.is_none_or(|o| w.name.contains(o.as_str())))
        .collect();
    assert!(!workloads.is_empty(), "no workload matches {only:?}");

    for w in &workloads {
        for a in &allocs {
            setup::check_bindings(w, a, &setup);
        }
    }
    eprintln!("malloc and free bind to the intended library in every program");

    let cells = measure(&workloads, &allocs, &setup, rounds, &out);
    let report = output::table(&workloads, &cells, rounds, quick, &setup::environment(&so));
    println!("{report}");
    std::fs::write(out.join("programs.md"), &report).unwrap();
    let png = out.join("programs.png");
    output::chart(&png, &workloads, &cells);
    eprintln!(
        "wrote {} and {}",
        out.join("programs.md").display(),
        png.display()
    );
}

/// Panics with [`DEPS`] unless the programs, the peers and the chart's font are installed; returns
/// the path of `libc.so.6`.
fn check_dependencies() -> PathBuf {
    for p in [
        "redis-server",
        "redis-benchmark",
        "redis-cli",
        "sqlite3",
        "gcc",
        "g++",
        "nm",
    ] {
        setup::need_program(p);
    }
    for (peer, pkg) in [(JEMALLOC, "libjemalloc2"), (MIMALLOC, "libmimalloc2.0")] {
        assert!(
            Path::new(peer).is_file(),
            "{peer} is missing (Debian package {pkg}): {DEPS}"
        );
    }
    let libc_so = LIBC
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("no libc.so.6 in /lib/x86_64-linux-gnu or /usr/lib/x86_64-linux-gnu");
    let font = crate::harness::chart::register_font();
    assert!(
        font,
        "no DejaVuSans.ttf for the chart (Debian package fonts-dejavu-core): {DEPS}"
    );
    libc_so
}

/// The four allocators in column order: poolalloc (`so`), glibc (`libc_so`), jemalloc, mimalloc.
fn allocators(so: &Path, libc_so: PathBuf) -> [Alloc; 4] {
    [
        Alloc {
            name: NAMES[0],
            preload: so.to_path_buf(),
        },
        Alloc {
            name: NAMES[1],
            preload: libc_so,
        },
        Alloc {
            name: NAMES[2],
            preload: JEMALLOC.into(),
        },
        Alloc {
            name: NAMES[3],
            preload: MIMALLOC.into(),
        },
    ]
}

/// Writes the inputs into `out/programs-work` (the SQL script, smaller in quick mode; the Python
/// workload; the redis-cli script), finds the gcc units (one in quick mode) and builds larson.
fn prepare(out: &Path, quick: bool) -> Setup {
    let work = out.join("programs-work");
    std::fs::create_dir_all(&work).unwrap();
    let sql = work.join("bulk.sql");
    std::fs::write(&sql, sqlite::script(if quick { 20_000 } else { 200_000 })).unwrap();
    let py = work.join("workload.py");
    std::fs::write(&py, python::WORKLOAD).unwrap();
    let redis_check = work.join("redis-check.txt");
    std::fs::write(&redis_check, redis::check_script()).unwrap();
    let mut units = gcc::units();
    if quick {
        units.truncate(1);
    }
    let larson = larson::build(&work);
    Setup {
        quick,
        work,
        sql,
        py,
        python: python::python(),
        redis_check,
        gcc_units: units,
        larson,
    }
}

/// `rounds` interleaved rounds of every workload under every allocator; panics (keeping both
/// outputs in `out`) if a program's output under one allocator differs from its first one.
fn measure(
    workloads: &[&Workload],
    allocs: &[Alloc],
    setup: &Setup,
    rounds: usize,
    out: &Path,
) -> Vec<Vec<Cell>> {
    let mut cells: Vec<Vec<Cell>> = workloads
        .iter()
        .map(|_| {
            (0..allocs.len())
                .map(|_| Cell {
                    figures: Vec::new(),
                    cpu: Vec::new(),
                    rss: Vec::new(),
                    tests: Vec::new(),
                })
                .collect()
        })
        .collect();
    let mut reference: HashMap<&str, (usize, Vec<u8>)> = HashMap::new();
    interleaved(rounds, workloads.len(), allocs.len(), |_round, wi, ai| {
        let w = workloads[wi];
        let a = &allocs[ai];
        let o = run_workload(w, a, setup);
        match reference.get(w.name) {
            None => {
                reference.insert(w.name, (ai, o.output.clone()));
            }
            Some((ri, expected)) if *expected != o.output => {
                let mine = out.join(format!("programs-mismatch-{}-{}.out", w.name, a.name));
                let theirs = out.join(format!(
                    "programs-mismatch-{}-{}.reference",
                    w.name, allocs[*ri].name
                ));
                std::fs::write(&mine, &o.output).unwrap();
                std::fs::write(&theirs, expected).unwrap();
                panic!(
                    "{} behaves differently under {} than under {}: outputs in {} and {}",
                    w.name,
                    a.name,
                    allocs[*ri].name,
                    mine.display(),
                    theirs.display()
                );
            }
            Some(_) => {}
        }
        let line = format!(
            "{:<14} {:<10} {:>12} {}  peak RSS {:>7} MiB",
            w.name,
            a.name,
            if w.kind == Kind::Redis {
                format!("{:.0}", o.figure)
            } else {
                format!("{:.3}", o.figure)
            },
            if w.kind == Kind::Redis {
                "req/s"
            } else {
                "s    "
            },
            mib(o.rss as f64)
        );
        let c = &mut cells[wi][ai];
        c.figures.push(o.figure);
        c.cpu.push(o.cpu);
        c.rss.push(o.rss as f64);
        c.tests.push(o.tests);
        line
    });
    cells
}
