//! Real programs: published crates doing their ordinary job on real input (the sources and
//! metadata of this benchmark's own dependencies), and the readers of that input.

use super::registry::registry_texts;
use super::{Extra, Params};
use crate::harness::cargo::{cargo, report_dir};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `.rs` files of the crates in cargo's registry source cache (the sources of this benchmark's
/// own dependencies, so every machine that built it has them), sorted by path, up to `cap` bytes.
pub fn rust_sources(cap: usize) -> Vec<String> {
    registry_texts("rs", cap)
}

/// syn-parse: `syn` parses a few MB of real Rust sources into full ASTs, kept until all are parsed
/// (a compiler front end's peak), then dropped; twice.
pub fn syn_parse(p: Params) -> Extra {
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
pub fn json_roundtrip(p: Params) -> Extra {
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

/// The rayon workloads' set-up: 1 MB of sources per scale unit, the time it took to read them,
/// and a pool of `p.threads` threads.
pub fn rayon_setup(p: Params) -> (Vec<String>, Duration, rayon::ThreadPool) {
    let t = Instant::now();
    let sources = rust_sources(1_000_000 * p.scale);
    let setup = t.elapsed();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(p.threads)
        .build()
        .unwrap();
    (sources, setup, pool)
}

/// rayon-drop: a `rayon` job counts the words of every source file in parallel into per-file
/// maps; another (plain) thread receives the results and drops them.
pub fn rayon_drop(p: Params) -> Extra {
    use rayon::prelude::*;
    let (sources, setup, pool) = rayon_setup(p);
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
pub fn write_json_input() -> PathBuf {
    let path = report_dir().join("metadata.json");
    if path.exists() {
        return path;
    }
    let out = Command::new(cargo())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["metadata", "--format-version", "1"])
        .output()
        .expect("cannot run cargo metadata");
    assert!(out.status.success(), "cargo metadata failed");
    std::fs::create_dir_all(report_dir()).unwrap();
    std::fs::write(&path, &out.stdout).unwrap();
    path
}
