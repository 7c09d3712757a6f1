//! Real programs under glibc, jemalloc, mimalloc and `libpoolalloc_c.so`, preloaded
//! (`programs/bench.rs`). Linux only, as the library is: on other targets the bench only says so.

#[cfg(target_os = "linux")]
#[path = "programs/bench.rs"]
mod bench;

// The harness the benchmarks share (benches/harness), as `crate::harness` for programs/'s modules.
#[cfg(target_os = "linux")]
use poolalloc_bench_harness as harness;

fn main() {
    #[cfg(target_os = "linux")]
    bench::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("poolalloc-c's programs benchmark: Linux only (LD_PRELOAD of the C library)");
}
