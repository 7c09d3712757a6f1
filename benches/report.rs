//! The benchmark and fragmentation report (`report/bench.rs`). Built where its peers (jemalloc and
//! mimalloc, C builds; rusty_alloc, Rust; snmalloc, C++) and its chart renderer
//! are dev-dependencies, Linux with glibc (x86_64 and aarch64) or musl (`--target
//! x86_64-unknown-linux-musl`, the C peers built with musl-gcc; the report then goes to
//! `target/poolalloc-report/musl/`): on other targets (Windows, ...) the bench only says so, so
//! that `cargo clippy --all-targets --target <other>` builds.

#[cfg(all(
    target_os = "linux",
    any(target_env = "gnu", target_env = "musl"),
    not(poolalloc_no_bench_peers)
))]
#[path = "report/bench.rs"]
mod bench;

// The harness the benchmarks share (benches/harness), as `crate::harness` for report/'s modules.
#[cfg(all(
    target_os = "linux",
    any(target_env = "gnu", target_env = "musl"),
    not(poolalloc_no_bench_peers)
))]
use poolalloc_bench_harness as harness;

fn main() {
    #[cfg(all(
        target_os = "linux",
        any(target_env = "gnu", target_env = "musl"),
        not(poolalloc_no_bench_peers)
    ))]
    bench::main();
    #[cfg(not(all(
        target_os = "linux",
        any(target_env = "gnu", target_env = "musl"),
        not(poolalloc_no_bench_peers)
    )))]
    eprintln!(
        "benches/report: Linux (glibc or musl) only, without --cfg poolalloc_no_bench_peers (its peers are dev-dependencies there)"
    );
}
