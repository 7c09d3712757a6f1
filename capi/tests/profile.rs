//! The profiler through the C library: `POOLALLOC_PROF=<prefix>` on a C program with known
//! allocation sites (`tests/c/prof_sites.c`: 70% of the live bytes from one function, 30% from
//! another, small blocks and large spans) samples from the first malloc and writes
//! `<prefix>.<pid>.pb.gz` at exit, in which each site's live bytes are within ±5% of the truth the
//! program prints. A bad `POOLALLOC_PROF_INTERVAL` gets its warning line and the default.
//!
//! Builds the library with the `profiling` feature into `target/capi-test-prof` (a target dir of
//! its own: the outer `cargo test` holds the usual one's lock). Linux only, as the library is.
#![cfg(target_os = "linux")]

use poolalloc_test_support::pprof;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The profiling library and the test program, built once under `target/capi-test-prof` (once for
/// all the tests of this file: two builds at once would rewrite the program while the other test
/// runs it, ETXTBSY).
fn build() -> (PathBuf, PathBuf) {
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_once).clone()
}

fn build_once() -> (PathBuf, PathBuf) {
    let root = workspace().join("target").join("capi-test-prof");
    fs::create_dir_all(&root).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let st = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "poolalloc-c",
            "--features",
            "profiling",
        ])
        .arg("--target-dir")
        .arg(&root)
        .current_dir(workspace())
        .env_remove("LD_PRELOAD")
        .status()
        .unwrap();
    assert!(st.success(), "building libpoolalloc_c.so with profiling");
    let exe = root.join("prof_sites");
    let st = Command::new("gcc")
        .args([
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-Wall",
            "-Werror",
            "-o",
        ])
        .arg(&exe)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/prof_sites.c"))
        .env_remove("LD_PRELOAD")
        .status()
        .expect("gcc (bash .ci/deps installs what the C tests need)");
    assert!(st.success(), "building prof_sites");
    (root.join("release").join("libpoolalloc_c.so"), exe)
}

#[test]
fn pprof_at_exit_attributes_each_site_within_five_percent() {
    let (so, exe) = build();
    let dir = workspace()
        .join("target")
        .join("capi-test-prof")
        .join("out");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("heap");
    let out = Command::new(&exe)
        .env("LD_PRELOAD", &so)
        .env("POOLALLOC_PROF", &prefix)
        .env("POOLALLOC_PROF_INTERVAL", "lots")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "prof_sites failed: {stderr}");
    assert!(
        stderr.contains("POOLALLOC_PROF_INTERVAL=lots is not a whole number"),
        "no warning for the bad interval: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = stdout.split_whitespace().collect();
    let (a, b): (f64, f64) = (w[1].parse().unwrap(), w[3].parse().unwrap());
    let file = dir.join(format!("heap.{}.pb.gz", out_pid(&dir)));
    let p = pprof::read(&file);
    for (site, truth) in [("site_a_", a), ("site_b_", b)] {
        let est = p.total(site, "inuse_space");
        println!("{site}: estimated {est:.0} B, truth {truth:.0} B");
        assert!(
            (est - truth).abs() <= 0.05 * truth,
            "{site}: estimated {est} bytes live, truth {truth}"
        );
    }
    assert_eq!(p.total("site_churn", "inuse_space"), 0.0);
}

/// The pid in the one profile file the run wrote.
fn out_pid(dir: &Path) -> u32 {
    let names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "expected one profile, found {names:?}");
    names[0]
        .strip_prefix("heap.")
        .and_then(|n| n.strip_suffix(".pb.gz"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected file {}", names[0]))
}

/// Profiles on demand through the C library: `POOLALLOC_PROF_SIGNAL=1` and
/// `POOLALLOC_PROF_EVERY_S=1` (and no minimum gap) on `sleep 2.5`, sent `SIGUSR2` once: numbered profiles
/// `<prefix>.<pid>.<seq>.pb.gz` (two or more every second, one on the signal) besides the exit's,
/// each one a pprof file, and the signal does not end the program (the profiler handles it).
#[test]
fn numbered_profiles_on_a_signal_and_every_second() {
    let (so, _) = build();
    let dir = workspace()
        .join("target")
        .join("capi-test-prof")
        .join("on-demand");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new("sleep")
        .arg("2.5")
        .env("LD_PRELOAD", &so)
        .env("POOLALLOC_PROF", dir.join("heap"))
        .env("POOLALLOC_PROF_SIGNAL", "1")
        .env("POOLALLOC_PROF_EVERY_S", "1")
        // No minimum gap (default 1 s): the signal's dump at 0.4 s would otherwise put the
        // periodic one at 1 s off until 2 s, and two numbered profiles come out of 2.5 s, not
        // three (CI, 2026-11-28). The gap has its own test (tests/profile_on_demand.rs).
        .env("POOLALLOC_PROF_MIN_GAP_MS", "0")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let kill = Command::new("kill")
        .args(["-USR2", &child.id().to_string()])
        .env_remove("LD_PRELOAD")
        .status()
        .unwrap();
    assert!(kill.success());
    let st = child.wait().unwrap();
    assert!(st.success(), "sleep under the preload: {st:?}");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let numbered: Vec<&String> = names.iter().filter(|n| n.split('.').count() == 5).collect();
    assert!(
        numbered.len() >= 3,
        "expected 3 or more numbered profiles (1 signal, 2 periodic), found {names:?}"
    );
    for n in &numbered {
        let p = pprof::read(&dir.join(n));
        assert!(p.index_of("inuse_space") < 4, "{n}: no inuse_space");
    }
    assert_eq!(names.len(), numbered.len() + 1, "and the exit's: {names:?}");
}
