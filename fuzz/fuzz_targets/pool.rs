//! Fuzz target: Pool<T> operations against a HashMap model, stale handles included (tests/shadow/pool.rs).
#![no_main]

#[path = "../../tests/shadow/pool.rs"]
mod pool_model;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pool_model::run(data));
