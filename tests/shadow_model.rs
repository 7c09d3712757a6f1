//! The shadow-model interpreter (poolalloc-test-support's `shadow`) on seeded inputs and on every
//! regression input the fuzzer ever found, against PoolAlloc called directly: on one thread, on two
//! at once, and with the operations of one model spread over worker threads that come and go
//! (`run_threaded`).

use poolalloc_test_support::seed::{self, input};
use poolalloc_test_support::shadow;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// With the `profiling` feature every test runs with every allocation sampled (the profiler's
/// highest rate): its records, its lock and its stack walks on every path of the model, threads
/// included. Without it, nothing.
fn profiled() {
    #[cfg(feature = "profiling")]
    poolalloc::profile::start(poolalloc::profile::Config {
        interval: 0,
        seed: 0,
    })
    .unwrap();
}

#[test]
fn seeded_inputs() {
    profiled();
    for seed in 0..100 {
        shadow::Shadow::new(&P).run(&input(seed, 2048));
    }
}

#[test]
fn two_threads_at_once() {
    profiled();
    let hs: Vec<_> = (0..2u64)
        .map(|t| {
            std::thread::spawn(move || {
                for seed in 0..30 {
                    shadow::Shadow::new(&P).run(&input(1000 + t * 100 + seed, 2048));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn threaded_seeded_inputs() {
    profiled();
    let n = if cfg!(debug_assertions) { 60 } else { 300 };
    for seed in 0..n {
        shadow::run_threaded(&P, &input(5000 + seed, 2048));
    }
}

#[test]
fn threaded_fuzz_regressions() {
    profiled();
    seed::replay(&seed::regressions("threaded"), |input| {
        shadow::run_threaded(&P, input)
    });
}

#[test]
fn fuzz_regressions() {
    profiled();
    seed::replay(&seed::regressions("global_alloc"), |input| {
        shadow::Shadow::new(&P).run(input)
    });
}
