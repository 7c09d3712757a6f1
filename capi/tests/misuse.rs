//! The hardened C library against a catalogue of heap misuse (`tests/c/misuse.c`: double and
//! invalid frees, writes after free, overflows and underflows by one byte and by a megabyte,
//! underflows by 1 and 32 bytes of a process's first block of a size (a store, or memcpy), a freed
//! block reused at once for a smaller one, zero-size access, at 8 B, 4 KiB and 256 KiB). Each case
//! runs in a process of its own under
//! `libpoolalloc_c.so` built with `--features hardened-full` (every check), and, for comparison, under glibc alone and
//! Debian's jemalloc and mimalloc where installed. A case is *caught* when the process dies of a
//! signal (an abort naming the problem, or a fault) instead of going on, or (`reuse_downsize`) when
//! the smaller block is not put where the freed one was.
//!
//! Asserted: every case in [`CLAIMED`] is caught by the hardened library with an abort whose
//! message names the problem (or, for the cases the table says, a fault), and the hardened library
//! catches more cases than glibc does on this machine. The comparison table goes to
//! `<workspace>/target/capi-test/misuse.md` and to stderr.
//!
//! The library: `POOLALLOC_TEST_C_SO_HARDENED` if set, else built here with `$CARGO build
//! --release -p poolalloc-c --features hardened-full --target-dir <workspace>/target/capi-test-hardened`.
//! Needs gcc. Linux only, as the library is.
#![cfg(target_os = "linux")]

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a claimed case must end.
#[derive(Clone, Copy)]
enum Claim {
    /// An abort whose message names the problem.
    Abort(&'static str),
    /// A fault (a freed large block waits for reuse read-only).
    Fault,
    /// The freed block's address is not handed out again at once for a smaller block (the case
    /// exits with 4 and says "not reused").
    NotReused,
}
use Claim::{Abort, Fault, NotReused};

/// The cases the hardened library promises to catch.
const CLAIMED: &[(&str, Claim)] = &[
    ("double_free_8", Abort("double free")),
    ("double_free_4k", Abort("double free")),
    ("double_free_256k", Abort("not a live block")),
    ("double_free_interleaved_8", Abort("double free")),
    ("double_free_interleaved_4k", Abort("double free")),
    ("double_free_interleaved_256k", Abort("not a live block")),
    ("realloc_freed_8", Abort("realloc of freed block")),
    ("realloc_freed_4k", Abort("realloc of freed block")),
    ("realloc_freed_256k", Abort("not a live block")),
    ("free_interior_8", Abort("not the start of a block")),
    ("free_interior_4k", Abort("not the start of a block")),
    ("free_interior_256k", Abort("not a live block")),
    ("free_unaligned_8", Abort("not the start of a block")),
    ("free_unaligned_4k", Abort("not the start of a block")),
    ("free_unaligned_256k", Abort("not a live block")),
    ("free_stack", Abort("not a heap block")),
    ("free_global", Abort("not a heap block")),
    ("free_wild_1", Abort("not a heap block (misaligned)")),
    (
        "free_low_page",
        Abort("not a heap block (in the first 64 KiB"),
    ),
    (
        "free_unmapped",
        Abort("not a heap block (nothing is mapped there)"),
    ),
    // A freed small block waits in quarantine zeroed (hardened-full): any nonzero write to it is
    // seen when it leaves, before it is reused.
    ("write_after_free_start_8", Abort("write after free")),
    ("write_after_free_start_4k", Abort("write after free")),
    ("write_after_free_start_256k", Fault),
    ("write_after_free_middle_8", Abort("write after free")),
    ("write_after_free_middle_4k", Abort("write after free")),
    ("write_after_free_middle_256k", Fault),
    // One byte past a small block is its canary (hardened-full: a request is served with room
    // for one), checked when the block is freed.
    ("overflow_1_8", Abort("heap overflow")),
    ("overflow_1_4k", Abort("heap overflow")),
    ("overflow_1_256k", Abort("heap overflow")),
    // One byte below an 8-byte or 4 KiB block is the last byte of the previous slot, freed and
    // waiting in quarantine, zeroed.
    ("underflow_1_8", Abort("write after free")),
    ("underflow_1_4k", Abort("write after free")),
    ("underflow_1_256k", Abort("heap underflow")),
    // The process's first block of a size is the first slot of the first chunk of a region of
    // chunks, which has an inaccessible guard of 2 MiB below it (hardened, 64-bit): a write up to
    // a megabyte below it faults, whether a store or memcpy makes it.
    ("lone_underflow_1_8", Fault),
    ("lone_underflow_1_4k", Fault),
    ("lone_underflow_1_256k", Abort("heap underflow")),
    ("lone_underflow_32_8", Fault),
    ("lone_underflow_32_4k", Fault),
    ("lone_memcpy_underflow_1_8", Fault),
    ("lone_memcpy_underflow_1_4k", Fault),
    ("lone_memcpy_underflow_32_8", Fault),
    ("lone_memcpy_underflow_32_4k", Fault),
    ("lone_underflow_1m_8", Fault),
    ("lone_underflow_1m_4k", Fault),
    // A span cut from a larger freed one for a smaller block is its last part (hardened); a
    // freed small block waits in quarantine (hardened-full).
    ("reuse_downsize_8", NotReused),
    ("reuse_downsize_4k", NotReused),
    ("reuse_downsize_256k", NotReused),
    ("reuse_same_8", NotReused),
    ("reuse_same_4k", NotReused),
    ("reuse_same_256k", NotReused),
    // hardened-full: each allocation checks the canaries of the last blocks handed out that are
    // still live, and the zeros of the last ones freed.
    ("memcpy_overflow_32_8", Abort("heap overflow")),
    ("memcpy_overflow_32_4k", Abort("heap overflow")),
    ("memcpy_overflow_32_256k", Abort("heap overflow")),
    ("write_after_free_other_size_8", Abort("write after free")),
    ("write_after_free_other_size_4k", Abort("write after free")),
    ("write_after_free_other_size_256k", Fault),
    // A span cut from an arena has guards (hardened): a granule below it, a megabyte above it;
    // the 64 bytes just below the block are its header, sealed by the canary below the block.
    ("overflow_1m_256k", Fault),
    ("underflow_1m_256k", Fault),
    ("lone_underflow_1m_256k", Fault),
    ("lone_underflow_32_256k", Abort("heap underflow")),
    ("lone_memcpy_underflow_32_256k", Abort("heap underflow")),
    // A zero-size block lies in address space that faults on any access.
    ("zero_size_read", Fault),
    ("zero_size_write", Fault),
];

/// Processes each claimed case runs in.
const RUNS: usize = 20;
/// Misses allowed in [`RUNS`] for a claim that rests on one changed byte: at a 1.5% miss rate,
/// five or more misses in 20 runs happen about once in 80,000 checks of a case, so the test does
/// not fail by chance, and a claim that stopped holding (20 misses) still fails it.
const BY_CHANCE_MISSES: usize = 4;

/// Whether catching `case` rests on the byte a one-byte misuse changes: a canary (one byte past
/// or below a block) or the zeros of a freed neighbour.
fn by_chance(case: &str) -> bool {
    case.starts_with("overflow_1_") || case.starts_with("underflow_1_")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("capi/ has a parent")
        .to_path_buf()
}

fn hardened_library(root: &Path) -> PathBuf {
    if let Some(p) = env::var_os("POOLALLOC_TEST_C_SO_HARDENED") {
        return fs::canonicalize(&p).expect("POOLALLOC_TEST_C_SO_HARDENED is not a file");
    }
    let target = root.join("capi-test-hardened");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--release", "-p", "poolalloc-c", "--features"])
        .arg("hardened-full")
        .arg("--target-dir")
        .arg(&target)
        .current_dir(workspace())
        .env_remove("LD_PRELOAD")
        .output()
        .expect("cannot run cargo");
    assert!(
        out.status.success(),
        "building the hardened library failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::canonicalize(target.join("release/libpoolalloc_c.so")).expect("no hardened library")
}

/// What one case did under one allocator.
#[derive(Clone, Debug)]
enum Outcome {
    /// Killed by this signal; the first line of its stderr.
    Caught(i32, String),
    /// Went on to the end.
    Survived,
    /// `reuse_downsize` found the smaller block elsewhere (exit 4, "not reused").
    NotReused,
    /// Exited otherwise (a status, or a time-out): counted as not caught.
    Other(String),
}

impl Outcome {
    fn caught(&self) -> bool {
        matches!(self, Outcome::Caught(..) | Outcome::NotReused)
    }

    fn cell(&self) -> String {
        match self {
            Outcome::Caught(sig, line) => {
                let name = match *sig {
                    6 => "SIGABRT",
                    11 => "SIGSEGV",
                    7 => "SIGBUS",
                    _ => "signal",
                };
                let line: String = line.chars().take(60).collect();
                if line.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}: {}", line.replace('|', "/"))
                }
            }
            Outcome::Survived => "—".to_string(),
            Outcome::NotReused => "not reused".to_string(),
            Outcome::Other(s) => s.clone(),
        }
    }
}

fn run_case(exe: &Path, case: &str, preload: Option<&Path>) -> Outcome {
    let mut cmd = Command::new(exe);
    cmd.arg(case)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("LD_PRELOAD")
        .env_remove("MALLOC_CHECK_")
        .env_remove("GLIBC_TUNABLES");
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
    }
    let mut child = cmd.spawn().expect("cannot start misuse");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match status {
        None => Outcome::Other("time-out".into()),
        Some(s) => match s.signal() {
            Some(sig) => Outcome::Caught(sig, stderr.lines().next().unwrap_or("").to_string()),
            None if s.code() == Some(0) && stdout.contains("survived") => Outcome::Survived,
            None if s.code() == Some(4) && stdout.contains("not reused") => Outcome::NotReused,
            None => Outcome::Other(format!("exit {:?}", s.code())),
        },
    }
}

/// The hardened library's check of a C++ sized delete: the size must name the block's class.
#[test]
fn hardened_sized_delete_checks_the_size() {
    let root = workspace().join("target");
    let dir = root.join("capi-test").join("misuse");
    fs::create_dir_all(&dir).expect("create target/capi-test/misuse");
    let so = hardened_library(&root);
    let exe = dir.join("sized_delete");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/sized_delete.cpp");
    let built = Command::new("g++")
        .args(["-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&source)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("g++ not found: run `bash .ci/deps`");
    assert!(
        built.status.success(),
        "compiling sized_delete.cpp:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    for (case, want) in [
        ("right", None),
        ("wrong-class", Some("size mismatch")),
        ("small-size-of-large", Some("not allocated by poolalloc")),
    ] {
        match (run_case(&exe, case, Some(&so)), want) {
            (Outcome::Survived, None) => {}
            (Outcome::Caught(6, line), Some(what)) if line.contains(what) => {}
            (o, _) => panic!("sized_delete {case}: expected {want:?}, got {o:?}"),
        }
    }
}

#[test]
fn hardened_library_catches_the_misuse_catalogue() {
    let root = workspace().join("target");
    let dir = root.join("capi-test").join("misuse");
    fs::create_dir_all(&dir).expect("create target/capi-test/misuse");
    let so = hardened_library(&root);
    let exe = dir.join("misuse");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/misuse.c");
    let built = Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-fno-builtin", "-o"])
        .arg(&exe)
        .arg(&source)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("gcc not found: run `bash .ci/deps`");
    assert!(
        built.status.success(),
        "compiling misuse.c:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let list = Command::new(&exe)
        .arg("--list")
        .output()
        .expect("misuse --list");
    let mut cases: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    // Not a misuse: zero-size blocks used as C allows (distinct, freed, reallocated) must work
    // under the hardened library, whose zero-size blocks fault on access.
    let legal = run_case(&exe, "zero_size_legal", Some(&so));
    assert!(
        matches!(legal, Outcome::Survived),
        "zero_size_legal under the hardened library: {legal:?}"
    );
    cases.retain(|c| c != "zero_size_legal");
    assert!(cases.len() >= 30, "too few cases: {cases:?}");
    for (c, _) in CLAIMED {
        assert!(
            cases.iter().any(|x| x == c),
            "claimed case {c} is not in the catalogue"
        );
    }

    // The allocators: ours first, then glibc, then the peers that are installed.
    let mut allocs: Vec<(String, Option<PathBuf>)> = vec![
        ("poolalloc hardened".into(), Some(so.clone())),
        ("glibc".into(), None),
    ];
    for (name, path) in [
        ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
        ("mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"),
    ] {
        if Path::new(path).is_file() {
            allocs.push((name.into(), Some(PathBuf::from(path))));
        }
    }
    let results: Vec<Vec<Outcome>> = allocs
        .iter()
        .map(|(_, p)| {
            cases
                .iter()
                .map(|c| run_case(&exe, c, p.as_deref()))
                .collect()
        })
        .collect();

    let mut table = String::new();
    let _ = writeln!(
        table,
        "| case | {} |\n|---|{}",
        allocs
            .iter()
            .map(|a| a.0.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(allocs.len())
    );
    for (i, c) in cases.iter().enumerate() {
        let cells: Vec<String> = results.iter().map(|r| r[i].cell()).collect();
        let _ = writeln!(table, "| {c} | {} |", cells.join(" | "));
    }
    let counts: Vec<usize> = results
        .iter()
        .map(|r| r.iter().filter(|o| o.caught()).count())
        .collect();
    let _ = writeln!(
        table,
        "| **caught** | {} |",
        counts
            .iter()
            .map(|n| format!("**{n} of {}**", cases.len()))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    fs::write(root.join("capi-test").join("misuse.md"), &table).expect("write misuse.md");
    eprintln!("{table}");

    // Every claim is checked over RUNS processes (the table's run and RUNS - 1 more): the link
    // keys and canaries are drawn per process. A claim that rests on one changed byte is missed by
    // chance now and then (the byte written equals the one there, 1 in 256; or a link's changed
    // bits make it another slot start of the same chunk, which then may be handed out twice):
    // 0.4–0.6% of runs per case (1000 runs each, 2026-11-24), mostly the first. Such claims may miss BY_CHANCE_MISSES times;
    // the others never.
    for &(case, needs) in CLAIMED {
        let i = cases.iter().position(|c| c == case).expect("listed");
        let holds = |o: &Outcome| {
            let named = |what: &str| matches!(o, Outcome::Caught(6, line) if line.starts_with("poolalloc: ") && line.contains(what));
            let fault = matches!(o, Outcome::Caught(11 | 7, _));
            match needs {
                Abort(what) => named(what),
                Fault => fault,
                NotReused => matches!(o, Outcome::NotReused),
            }
        };
        let mut misses: Vec<Outcome> = Vec::new();
        if !holds(&results[0][i]) {
            misses.push(results[0][i].clone());
        }
        for _ in 1..RUNS {
            let o = run_case(&exe, case, Some(&so));
            if !holds(&o) {
                misses.push(o);
            }
        }
        let allowed = if by_chance(case) { BY_CHANCE_MISSES } else { 0 };
        assert!(
            misses.len() <= allowed,
            "{case}: not caught as claimed in {} of {RUNS} runs (at most {allowed} allowed): {misses:?}\n{table}",
            misses.len()
        );
    }
    assert!(
        counts[0] > counts[1],
        "the hardened library catches {} cases, glibc {}: no more than glibc\n{table}",
        counts[0],
        counts[1]
    );
}
