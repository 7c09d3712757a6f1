//! Micro benchmarks against jemalloc and mimalloc (`micro/bench.rs`). Built where those peers are
//! dev-dependencies, Linux with glibc (x86_64 and aarch64): on other targets (musl, Windows, ...)
//! the bench only says so, so that `cargo clippy --all-targets --target <other>` builds.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[path = "micro/bench.rs"]
mod bench;

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    bench::main();
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    eprintln!(
        "benches/micro: Linux with glibc only (its peers jemalloc and mimalloc are dev-dependencies there)"
    );
}
