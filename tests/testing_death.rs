//! Death tests of the `testing` feature: an allocation inside `forbid`, and an infallible allocation
//! above the limit, must abort with a message naming the layout. Each case runs in a child process
//! (this test binary re-run with POOLALLOC_TEST_CHILD naming the case: poolalloc-test-support's
//! `child`). Needs the `testing` feature.
#![cfg(feature = "testing")]

use poolalloc::testing::{count, forbid, set_limit};
use std::hint::black_box;

use poolalloc_test_support::child::{self, Ending};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// (case, substring the abort message must contain).
const CASES: &[(&str, &str)] = &[
    (
        "forbid_box",
        "poolalloc: allocation of 8 bytes (align 8) inside testing::forbid",
    ),
    (
        "forbid_large",
        "poolalloc: allocation of 1048576 bytes (align 1) inside testing::forbid",
    ),
    (
        "forbid_vec_growth",
        "poolalloc: reallocation of 4 bytes to 8 bytes (align 1) inside testing::forbid",
    ),
    (
        "forbid_inside_count",
        "poolalloc: allocation of 100 bytes (align 1) inside testing::forbid",
    ),
    (
        "forbid_nested_after_inner_ends",
        "poolalloc: allocation of 16 bytes (align 8) inside testing::forbid",
    ),
    (
        "infallible_above_limit",
        "memory allocation of 3000 bytes failed",
    ),
];

/// A `u64` aligned to 8 on every target (`u64` is 4-aligned on i686), so that the messages name
/// the same layouts everywhere.
#[repr(align(8))]
#[derive(Clone, Copy)]
struct Word(#[allow(dead_code)] u64);

fn run_case(case: &str) {
    match case {
        "forbid_box" => {
            forbid(|| black_box(Box::new(Word(1))));
        }
        "forbid_large" => {
            forbid(|| black_box(vec![0u8; 1 << 20]));
        }
        "forbid_vec_growth" => {
            let mut v: Vec<u8> = Vec::with_capacity(4);
            forbid(|| {
                for i in 0..5 {
                    v.push(i);
                }
            });
        }
        "forbid_inside_count" => {
            let _ = count(|| forbid(|| black_box(vec![0u8; 100])));
        }
        "forbid_nested_after_inner_ends" => {
            forbid(|| {
                forbid(|| {});
                black_box(Box::new([Word(0); 2]));
            });
        }
        "infallible_above_limit" => {
            let s = poolalloc::stats();
            set_limit(Some(s.requested_bytes + s.large_bytes + 2000));
            black_box(vec![0u8; 3000]);
        }
        other => panic!("unknown case {other}"),
    }
}

/// In a child: run the case named by the environment (a case that returns is reported by the
/// parent). In the parent: does nothing.
#[test]
fn child_entry() {
    child::enter(run_case);
}

#[test]
fn each_case_aborts_with_a_message_naming_the_layout() {
    child::expect_each(
        "child_entry",
        CASES
            .iter()
            .map(|&(case, expect)| (case, Ending::Aborts, expect)),
    );
}

/// Outside `forbid` the same allocations are fine, and a finished `forbid` leaves nothing armed.
#[test]
fn the_same_allocations_outside_forbid_are_fine() {
    forbid(|| {});
    let mut v: Vec<u8> = Vec::with_capacity(4);
    v.extend(0..5);
    black_box((Box::new(1u64), vec![0u8; 1 << 20], v));
}
