//! Real programs under glibc, jemalloc, mimalloc and `libpoolalloc_c.so`, preloaded
//! (`programs/bench.rs`). Linux only, as the library is: on other targets the bench only says so.

#[cfg(target_os = "linux")]
#[path = "programs/bench.rs"]
mod bench;

// The harness shared with poolalloc's report benchmark; not every item serves this one.
#[cfg(target_os = "linux")]
#[allow(dead_code)]
#[path = "../../benches/harness/mod.rs"]
mod harness;

fn main() {
    #[cfg(target_os = "linux")]
    bench::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("poolalloc-c's programs benchmark: Linux only (LD_PRELOAD of the C library)");
}
