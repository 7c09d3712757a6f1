//! The benchmark and fragmentation report (`report/bench.rs`). Built where its peers (jemalloc and
//! mimalloc, C builds) and its chart renderer are dev-dependencies, Linux with glibc (x86_64 and
//! aarch64): on other targets (musl, Windows, ...) the bench only says so, so that
//! `cargo clippy --all-targets --target <other>` builds.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[path = "report/bench.rs"]
mod bench;

// The harness shared with poolalloc-c's programs benchmark; not every item serves this one.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(dead_code)]
#[path = "harness/mod.rs"]
mod harness;

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    bench::main();
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    eprintln!(
        "benches/report: Linux with glibc only (its peers jemalloc and mimalloc are dev-dependencies there)"
    );
}
