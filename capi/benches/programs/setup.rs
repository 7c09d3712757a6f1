//! Set-up: the library, the programs, the check that `malloc` and `free` bind to the intended
//! library, and the description of the machine and versions for the report.

use super::process::{run, with_alloc};
use super::{Alloc, DEPS, JEMALLOC, MIMALLOC, Setup, Workload, probe};
use crate::harness::cargo::{cargo, target_dir};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository: the workspace above this package.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `POOLALLOC_TEST_C_SO`, else `libpoolalloc_c.so` built in `target/capi-bench`; it must export the
/// C allocation functions.
pub fn library() -> PathBuf {
    let so = if let Some(p) = std::env::var_os("POOLALLOC_TEST_C_SO") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "POOLALLOC_TEST_C_SO={} is not a file",
            p.display()
        );
        p
    } else {
        let target = target_dir().join("capi-bench");
        eprintln!("building libpoolalloc_c.so in {}", target.display());
        let st = Command::new(cargo())
            .current_dir(workspace())
            .args(["build", "--release", "-p", "poolalloc-c", "--target-dir"])
            .arg(&target)
            .status()
            .expect("cannot run cargo to build libpoolalloc_c.so");
        assert!(st.success(), "building libpoolalloc_c.so failed");
        target.join("release").join("libpoolalloc_c.so")
    };
    let so = so.canonicalize().unwrap();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("cannot run nm (install binutils)");
    let syms = String::from_utf8_lossy(&out.stdout);
    for f in ["malloc", "free", "calloc", "realloc"] {
        assert!(
            syms.lines().any(|l| l
                .split_whitespace()
                .last()
                .and_then(|sym| sym.split('@').next())
                == Some(f)),
            "{} does not export `{f}`: it cannot replace the C allocator",
            so.display()
        );
    }
    so
}

/// Panics with [`DEPS`] unless `name` is a file in a directory of `PATH`.
pub fn need_program(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(found, "`{name}` is not installed: {DEPS}");
}

/// Runs each program once per allocator with `LD_DEBUG=bindings` and checks that `malloc` and
/// `free` bind to the intended library in every process that binds them.
pub fn check_bindings(w: &Workload, a: &Alloc, s: &Setup) {
    let dir = s.work.join(format!("bindings-{}-{}", w.name, a.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = probe(w, s, &dir);
    cmd.env("LD_DEBUG", "bindings")
        .env("LD_DEBUG_OUTPUT", dir.join("ld"))
        .env("TMPDIR", &dir);
    with_alloc(&mut cmd, a);
    let what = format!("{} under {} with LD_DEBUG=bindings", w.name, a.name);
    let scratch = dir.join("out");
    std::fs::create_dir_all(&scratch).unwrap();
    run(&what, &mut cmd, None, &scratch);
    let want = a.preload.file_name().unwrap().to_str().unwrap().to_string();
    let mut processes = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if !e.file_name().to_str().unwrap().starts_with("ld.") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        let mut bound = [false; 2];
        for line in text.lines() {
            for (k, sym) in ["`malloc'", "`free'"].iter().enumerate() {
                if !line.contains(&format!("normal symbol {sym}")) {
                    continue;
                }
                let to = line
                    .split(" to ")
                    .nth(1)
                    .and_then(|t| t.split(" [").next())
                    .unwrap_or("");
                let file = Path::new(to)
                    .file_name()
                    .and_then(|f| f.to_str())
                    .unwrap_or("");
                // An executable that takes the function's address has a canonical PLT entry
                // that other objects bind to; that entry's own binding is checked on its line.
                let executable = !file.contains(".so");
                assert!(
                    file == want || executable,
                    "{what}: {sym} bound to {to}, not to {want}:\n{line}"
                );
                bound[k] |= file == want;
            }
        }
        if bound[0] && bound[1] {
            processes += 1;
        }
    }
    assert!(
        processes > 0,
        "{what}: no process bound malloc and free (see {})",
        dir.display()
    );
}

/// The trimmed stdout of `cmd args`, empty if it cannot run.
fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The first line of `s`, trimmed.
fn first_line(s: String) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// The report's first lines: date, machine, allocators and their versions, programs and theirs.
pub fn environment(so: &Path) -> String {
    let model = sh("lscpu", &[])
        .lines()
        .find_map(|l| l.strip_prefix("Model name:").map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or("?".into(), |k| {
            format!("{:.0} GiB", k as f64 / 1024.0 / 1024.0)
        });
    let pkg = |p: &str| {
        let v = sh("dpkg-query", &["-W", "-f=${Version}", p]);
        if v.is_empty() { "?".into() } else { v }
    };
    let poolalloc = if so.file_name().and_then(|f| f.to_str()) == Some("libpoolalloc_c.so") {
        format!(
            "`{}` (poolalloc-c, commit {})",
            so.display(),
            sh(
                "git",
                &[
                    "-C",
                    env!("CARGO_MANIFEST_DIR"),
                    "rev-parse",
                    "--short",
                    "HEAD"
                ]
            )
        )
    } else {
        format!(
            "**STAND-IN, NOT POOLALLOC**: `{}` (POOLALLOC_TEST_C_SO); the poolalloc column measures that library",
            so.display()
        )
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "- date: {}\n- machine: {model}, {cpus} CPUs, {mem}; Linux {}; {} (libc6 {})",
        sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        sh("uname", &["-r"]),
        sh("getconf", &["GNU_LIBC_VERSION"]),
        pkg("libc6")
    );
    let _ = writeln!(
        s,
        "- allocators: poolalloc {poolalloc}; glibc = `LD_PRELOAD` of `libc.so.6`; jemalloc = libjemalloc2 {} \
         (`{JEMALLOC}`); mimalloc = libmimalloc2.0 {} (`{MIMALLOC}`)",
        pkg("libjemalloc2"),
        pkg("libmimalloc2.0")
    );
    let _ = writeln!(
        s,
        "- programs: {}; sqlite3 {}; {}; {}",
        first_line(sh("redis-server", &["--version"])),
        first_line(sh("sqlite3", &["-version"]))
            .split(' ')
            .next()
            .unwrap_or(""),
        first_line(sh(
            super::python::python().to_str().unwrap(),
            &["--version"]
        )),
        first_line(sh("gcc", &["--version"]))
    );
    s
}
