//! Micro benchmarks against jemalloc and mimalloc (`micro/bench.rs`). Built where those peers are
//! dev-dependencies, Linux with glibc (x86_64 and aarch64) without `--cfg poolalloc_no_bench_peers`:
//! on other targets (musl, Windows, ...), and with that cfg, the bench only says so, so that
//! `cargo clippy --all-targets --target <other>` builds.

#[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
#[path = "micro/bench.rs"]
mod bench;

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
    bench::main();
    #[cfg(not(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers))))]
    eprintln!(
        "benches/micro: Linux with glibc only, without --cfg poolalloc_no_bench_peers (its peers jemalloc and mimalloc are dev-dependencies there)"
    );
}
