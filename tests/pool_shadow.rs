//! The Pool<T> shadow model (tests/shadow/pool.rs) on seeded inputs and fuzz regressions.

#[path = "shadow/pool.rs"]
mod pool_model;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fn input(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn seeded_inputs() {
    for seed in 0..300 {
        pool_model::run(&input(seed, 3000));
    }
}

#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/pool");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return; // none found yet
    };
    for e in entries {
        pool_model::run(&std::fs::read(e.unwrap().path()).unwrap());
    }
}
