//! `larson-cpp`: a larson-style exchange in C++ with sized delete (`programs/larson.cpp`, built
//! with g++ here); its checksum must be the same under every allocator.

use super::process::{run, with_alloc};
use super::{Alloc, DEPS, Outcome, Setup, outcome};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `programs/larson.cpp` into `work`.
pub fn build(work: &Path) -> PathBuf {
    let exe = work.join("larson");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/programs/larson.cpp");
    let out = Command::new("g++")
        .args(["-O2", "-std=c++17", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap_or_else(|e| panic!("cannot run g++: {e}; {DEPS}"));
    assert!(
        out.status.success(),
        "g++ {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// One run: two threads, 20 rounds in quick mode (else 100) of 20000 replacements in sets of 5000.
pub fn measure(what: &str, a: &Alloc, s: &Setup, scratch: &Path) -> Outcome {
    let mut cmd = Command::new(&s.larson);
    // threads, rounds, replacements per round, objects per set
    cmd.args(["2", if s.quick { "20" } else { "100" }, "20000", "5000"]);
    with_alloc(&mut cmd, a);
    outcome(run(what, &mut cmd, None, scratch))
}

/// The bindings check's command: a tiny exchange.
pub fn probe(s: &Setup) -> Command {
    let mut c = Command::new(&s.larson);
    c.args(["2", "2", "100", "100"]);
    c
}
