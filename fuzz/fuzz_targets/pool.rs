//! Fuzz target: Pool<T> operations against a HashMap model, stale handles included
//! (poolalloc-test-support's `pool`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use poolalloc_test_support::pool;

poolalloc_test_support::pool_under_test!(PoolUnderTest);

fuzz_target!(|data: &[u8]| pool::run::<PoolUnderTest>(data));
