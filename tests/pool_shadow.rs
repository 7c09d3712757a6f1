//! The Pool<T> shadow model (tests/shadow/pool.rs) on seeded inputs and fuzz regressions.

#[path = "shadow/pool.rs"]
mod pool_model;
#[path = "shadow/seed.rs"]
mod seed;
use seed::input;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn seeded_inputs() {
    for seed in 0..300 {
        pool_model::run(&input(seed, 3000));
    }
}

#[test]
fn fuzz_regressions() {
    seed::replay("pool", pool_model::run);
}
