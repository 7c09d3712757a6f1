//! The Pool<T> shadow model (poolalloc-test-support's `pool`) on seeded inputs and fuzz
//! regressions.

use poolalloc_test_support::pool;
use poolalloc_test_support::seed::{self, input};

poolalloc_test_support::pool_under_test!(PoolUnderTest);

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn seeded_inputs() {
    for seed in 0..300 {
        pool::run::<PoolUnderTest>(&input(seed, 3000));
    }
}

#[test]
fn fuzz_regressions() {
    seed::replay(&seed::regressions("pool"), pool::run::<PoolUnderTest>);
}
