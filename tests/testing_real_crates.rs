//! `poolalloc::testing` pointed at published crates doing their job: `FailingAlloc` under
//! `hashbrown` and `allocator_api2`'s `Vec`, `count` around `serde_json` and `syn` parsing,
//! `forbid` around calls that are supposed not to allocate, and `set_limit` under a `serde_json`
//! parse too big for it. Each test asserts what was found; the figures are in
//! benches/results/testing.md (`cargo test --features testing --test testing_real_crates --
//! --nocapture` prints them).
//!
//! Limit cases change the whole process, so they run in a child process (this binary re-run with
//! POOLALLOC_TEST_CHILD naming the case: poolalloc-test-support's `child`), as do the cases that
//! must abort.

use allocator_api2::vec::Vec as AVec;
use hashbrown::{DefaultHashBuilder, HashMap};
use poolalloc::PoolAlloc;
use poolalloc::testing::{Counts, FailingAlloc, count, forbid, set_limit};
use poolalloc_test_support::child::{self, Ending};
use poolalloc_test_support::{collections, seed};
use std::fmt::Write as _;
use std::path::Path;

poolalloc_test_support::failing_pool_alloc!(FailingPoolAlloc);

#[global_allocator]
static GLOBAL: PoolAlloc = PoolAlloc::new();

// ---- FailingAlloc under hashbrown and allocator_api2's Vec -------------------------------------

#[test]
fn collections_model_on_seeded_inputs() {
    let n = if cfg!(debug_assertions) { 150 } else { 1500 };
    for seed in 0..n {
        collections::run::<FailingPoolAlloc>(&seed::input(seed, 1200));
    }
}

/// Every input the fuzzer saved, replayed in a child process (a hardened build aborts on misuse,
/// which must not take the other tests down with it).
#[test]
fn collections_model_on_fuzz_regressions() {
    run_in_child("replay_collections_regressions", "replayed");
}

fn replay_collections_regressions() {
    let n = seed::replay(&seed::regressions("collections"), |input| {
        // Several times: what an input does can depend on the slots earlier runs left behind
        // (the fuzzer runs inputs one after another in one process).
        for _ in 0..32 {
            collections::run::<FailingPoolAlloc>(input);
        }
    });
    eprintln!("replayed {n} inputs");
}

/// Builds a map of `n` keys whose values are vectors, all on `fa`, with fallible calls only.
/// Returns how many keys it inserted before the first refusal.
fn fallible_map_build(fa: &FailingAlloc, n: usize) -> Result<usize, usize> {
    let mut m: HashMap<usize, AVec<u8, &FailingAlloc>, DefaultHashBuilder, &FailingAlloc> =
        HashMap::with_hasher_in(DefaultHashBuilder::default(), fa);
    for i in 0..n {
        let mut v = AVec::new_in(fa);
        if v.try_reserve_exact(i % 48 + 1).is_err() {
            return Err(m.len());
        }
        v.extend((0..i % 48 + 1).map(|b| b as u8));
        if m.try_reserve(1).is_err() {
            return Err(m.len());
        }
        m.insert(i, v);
        assert_eq!(m.len(), i + 1);
    }
    for (k, v) in &m {
        assert_eq!(v.len(), k % 48 + 1);
        assert!(v.iter().enumerate().all(|(b, &x)| x == b as u8));
    }
    Ok(m.len())
}

/// Every refusal point of a 300-key build: the build stops cleanly at the refused allocation, with
/// every key before it in place, and leaves no block; and it needs exactly the allocations the
/// unrefused build made, no fewer.
#[test]
fn every_refusal_point_of_a_map_build_is_clean() {
    let fa = FailingAlloc::new(PoolAlloc::new());
    let (r, c) = count(|| fallible_map_build(&fa, 300));
    assert_eq!(r, Ok(300));
    assert_eq!(c.live_blocks, 0, "{c:?}");
    let needed = fa.allocations();
    assert_eq!(fa.failures(), 0);
    // 300 values plus the table's growth steps.
    assert!(needed > 300, "{needed}");
    for n in 0..needed {
        let fa = FailingAlloc::new(PoolAlloc::new()).fail_after(n);
        let (r, c) = count(|| fallible_map_build(&fa, 300));
        let inserted = r.expect_err("a build with a refusal in it succeeded");
        assert!(inserted < 300);
        assert_eq!(fa.failures(), 1, "the build went on after a refusal");
        assert_eq!(fa.allocations(), n + 1);
        assert_eq!(
            c.live_blocks, 0,
            "refusal after {n} allocations leaked: {c:?}"
        );
    }
    eprintln!("hashbrown + Vec build of 300 keys: {needed} allocations, every refusal point clean");
}

/// `allocator_api2`'s zeroed boxes on recycled, dirty slots, every other allocation refused: a
/// refusal is an `Err` and nothing else, a success is all zeros, and nothing is left.
#[test]
fn zeroed_boxes_on_dirty_slots_with_refusals() {
    let sizes = [
        1usize,
        7,
        8,
        9,
        24,
        100,
        1000,
        4095,
        32 * 1024,
        40 * 1024,
        300 * 1024,
    ];
    let fa = FailingAlloc::new(PoolAlloc::new()).fail_pattern(&[0b1010_1010; 8]);
    let ((), c) = count(|| {
        for (i, &n) in sizes.iter().enumerate() {
            // Dirty a slot of the class first, through the same allocator (even attempt: allowed).
            let mut dirty = allocator_api2::boxed::Box::try_new_uninit_slice_in(n, &fa).unwrap();
            for b in dirty.iter_mut() {
                b.write(0xa5);
            }
            drop(dirty);
            // Odd attempt: refused.
            let refused = allocator_api2::boxed::Box::<[u8], _>::try_new_zeroed_slice_in(n, &fa);
            assert!(
                refused.is_err(),
                "attempt {} was scheduled to fail",
                2 * i + 1
            );
        }
        assert_eq!(fa.failures(), sizes.len());
        // Past the pattern's 64 attempts nothing fails.
        for _ in fa.allocations()..64 {
            let _ = allocator_api2::boxed::Box::try_new_in(0u8, &fa);
        }
        for &n in &sizes {
            let mut dirty = allocator_api2::boxed::Box::try_new_uninit_slice_in(n, &fa).unwrap();
            for b in dirty.iter_mut() {
                b.write(0xa5);
            }
            drop(dirty);
            let z = allocator_api2::boxed::Box::<[u8], _>::try_new_zeroed_slice_in(n, &fa).unwrap();
            // SAFETY: try_new_zeroed_slice_in returned zeroed memory, a valid [u8].
            let z = unsafe { z.assume_init() };
            assert!(
                z.iter().all(|&b| b == 0),
                "zeroed box of {n} bytes is dirty"
            );
        }
    });
    assert_eq!(c.live_blocks, 0, "{c:?}");
}

// ---- count around serde_json and syn ----------------------------------------------------------

/// A JSON document of about 300 KB with the usual mix: objects, arrays, numbers, strings with and
/// without escapes.
fn json_document() -> String {
    let mut s = String::from("[");
    for i in 0..2000 {
        if i > 0 {
            s.push(',');
        }
        write!(
            s,
            r#"{{"id":{i},"name":"item-{i}","note":"line\n\"{i}\"","price":{}.{:02},"tags":["a","b{}"],"nested":{{"k":[1,2,{i}],"empty":{{}}}}}}"#,
            i * 3,
            i % 100,
            i % 7
        )
        .unwrap();
    }
    s.push(']');
    s
}

#[test]
fn serde_json_parse_counts_are_exact_and_leak_free() {
    let text = json_document();
    // The value kept: what it holds is live; dropping it inside a second count frees exactly that.
    let (value, kept) = count(|| serde_json::from_str::<serde_json::Value>(&text).unwrap());
    assert!(kept.live_blocks > 2000, "{kept:?}");
    assert_eq!(kept.live_blocks, kept.allocations - kept.frees, "{kept:?}");
    let ((), dropped) = count(|| drop(value));
    assert_eq!(dropped.allocations, 0);
    // Blocks freed inside a count that it did not see allocated do not make its own count negative.
    assert_eq!(dropped.live_blocks, 0, "{dropped:?}");
    assert_eq!(
        dropped.frees, kept.live_blocks,
        "the drop freed what the parse kept"
    );
    // Parse and drop: nothing left, and the same figures every time (the parser is deterministic).
    let once = || count(|| drop(serde_json::from_str::<serde_json::Value>(&text).unwrap())).1;
    let a = once();
    let b = once();
    assert_eq!(a, b);
    assert_eq!(a.live_blocks, 0, "{a:?}");
    assert_eq!(a.allocations, kept.allocations);
    // Skipping the document: only the strings with escapes need the scratch buffer, and that
    // buffer is one block reused (grown by realloc), so a handful of allocations at most.
    let skip = count(|| serde_json::from_str::<serde::de::IgnoredAny>(&text).unwrap()).1;
    assert!(skip.allocations <= 2, "{skip:?}");
    assert_eq!(skip.live_blocks, 0);
    eprintln!(
        "serde_json Value of {} bytes: {} allocations ({:.1} per KB), {} reallocations, {} bytes \
         allocated, peak live {} bytes, {} blocks held by the Value; IgnoredAny: {skip:?}",
        text.len(),
        a.allocations,
        a.allocations as f64 * 1000.0 / text.len() as f64,
        a.reallocations,
        a.bytes_allocated,
        a.peak_live_bytes,
        kept.live_blocks
    );
}

/// Every `.rs` file under src/ (its folders included), by its path below src/, sorted.
fn this_crates_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    assert!(files.len() > 5, "sources not found in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned();
            (name, text)
        })
        .collect()
}

#[test]
fn syn_parse_of_this_crates_sources_leaks_nothing() {
    let files = this_crates_sources();
    let mut total = Counts {
        allocations: 0,
        frees: 0,
        reallocations: 0,
        bytes_allocated: 0,
        peak_live_bytes: 0,
        live_blocks: 0,
    };
    let mut bytes = 0;
    for (name, text) in &files {
        let ((), c) = count(|| drop(syn::parse_file(text).unwrap()));
        assert_eq!(c.live_blocks, 0, "syn parse of {name} left blocks: {c:?}");
        assert!(c.allocations > 0);
        // Parsing the same text again makes the same allocations.
        let ((), again) = count(|| drop(syn::parse_file(text).unwrap()));
        assert_eq!(again, c, "{name}");
        total.allocations += c.allocations;
        total.reallocations += c.reallocations;
        total.bytes_allocated += c.bytes_allocated;
        total.peak_live_bytes = total.peak_live_bytes.max(c.peak_live_bytes);
        bytes += text.len();
    }
    eprintln!(
        "syn::parse_file of {} files, {bytes} bytes: {} allocations ({:.1} per KB), {} \
         reallocations, {} bytes allocated, largest peak live {} bytes",
        files.len(),
        total.allocations,
        total.allocations as f64 * 1000.0 / bytes as f64,
        total.reallocations,
        total.bytes_allocated,
        total.peak_live_bytes
    );
}

// ---- forbid around calls that should not allocate ----------------------------------------------

#[test]
fn calls_that_really_do_not_allocate() {
    let mut map: hashbrown::HashMap<String, u64> = hashbrown::HashMap::new();
    for i in 0..100 {
        map.insert(format!("key-{i}"), i);
    }
    let mut std_map: std::collections::HashMap<u64, u64> = (0..100).map(|i| (i, i)).collect();
    let mut s = String::with_capacity(64);
    let mut v: Vec<u64> = Vec::with_capacity(16);
    let mut keys: Vec<u64> = (0..1000).rev().collect();
    let json_number = "1234567.25";
    let total = forbid(|| {
        let mut total = 0.0;
        // Lookups by borrowed key.
        total += *map.get("key-42").unwrap() as f64;
        total += std_map.get(&7).copied().unwrap() as f64;
        // Replacing the value of a present key.
        *std_map.get_mut(&8).unwrap() += 1;
        // Parsing numbers.
        total += "3.25".parse::<f64>().unwrap();
        total += "-12345678901234".parse::<i64>().unwrap() as f64;
        total += serde_json::from_str::<f64>(json_number).unwrap();
        // Formatting into a string with room for the result.
        write!(s, "{:.3} {} {:?}", 2.5f64, 17u64, "x").unwrap();
        // Pushing within capacity.
        v.extend_from_slice(&[1, 2, 3]);
        v.push(4);
        // Unstable sort and binary search.
        keys.sort_unstable();
        total += keys.binary_search(&500).unwrap() as f64;
        total
    });
    assert_eq!(s, "2.500 17 \"x\"");
    assert_eq!(v, [1, 2, 3, 4]);
    let expected = 42.0 + 7.0 + 3.25 - 12_345_678_901_234.0 + 1_234_567.25 + 500.0;
    assert_eq!(total, expected);
}

#[test]
fn calls_that_allocate_though_it_is_easy_to_think_they_do_not() {
    let mut small: Vec<u64> = (0..20).rev().collect();
    let mut big: Vec<u64> = (0..1000).rev().collect();
    // The stable sort of a short slice sorts in place; of a long one, it takes a buffer.
    assert_eq!(count(|| small.sort()).1.allocations, 0);
    let c = count(|| big.sort()).1;
    assert_eq!((c.allocations, c.live_blocks), (1, 0), "{c:?}");
    // A float's Display into a fresh String, and a lowercase conversion of ASCII.
    assert!(count(|| 2.5f64.to_string()).1.allocations >= 1);
    assert!(count(|| "ABC".to_lowercase()).1.allocations >= 1);
    // serde_json's number parse into a Value does not allocate, but a string value does, even
    // without escapes (the Value owns a copy).
    assert_eq!(
        count(|| serde_json::from_str::<serde_json::Value>("12.5").unwrap())
            .1
            .allocations,
        0
    );
    assert_eq!(
        count(|| serde_json::from_str::<serde_json::Value>("\"ab\"").unwrap())
            .1
            .allocations,
        1
    );
}

// ---- child processes: limits and aborts --------------------------------------------------------

/// The cases run in a child: (case, how it must end, substring its stderr must contain).
const CASES: &[(&str, Ending, &str)] = &[
    (
        "json_over_limit_aborts",
        Ending::Aborts,
        "memory allocation of",
    ),
    (
        "json_skip_under_limit_succeeds",
        Ending::Returns,
        "skip under limit ok",
    ),
    (
        "try_reserve_over_limit_is_an_error",
        Ending::Returns,
        "try_reserve refused",
    ),
    ("forbid_catches_a_stable_sort", Ending::Aborts, "8000"),
];

/// The live requested bytes of the process right now, as the limit counts them.
fn live_requested() -> usize {
    let s = poolalloc::stats();
    s.requested_bytes + s.large_bytes
}

fn run_case(case: &str) {
    match case {
        "json_over_limit_aborts" => {
            // serde_json has no fallible path: the Value's first allocation over the limit goes
            // to Rust's out-of-memory handler, which aborts.
            let text = json_document();
            set_limit(Some(live_requested() + 64 * 1024));
            let v = serde_json::from_str::<serde_json::Value>(&text);
            set_limit(None);
            println!("parse returned: {}", v.is_ok());
        }
        "json_skip_under_limit_succeeds" => {
            let text = json_document();
            set_limit(Some(live_requested() + 1024));
            serde_json::from_str::<serde::de::IgnoredAny>(&text).unwrap();
            set_limit(None);
            eprintln!("skip under limit ok");
        }
        "try_reserve_over_limit_is_an_error" => {
            let mut v: Vec<u8> = Vec::new();
            set_limit(Some(live_requested() + 4096));
            let big = v.try_reserve(1 << 20);
            let small = v.try_reserve(1024);
            set_limit(None);
            assert!(big.is_err(), "1 MiB reserved under a 4 KiB limit");
            assert!(small.is_ok(), "1 KiB refused under a 4 KiB limit");
            eprintln!("try_reserve refused: {}", big.unwrap_err());
        }
        "forbid_catches_a_stable_sort" => {
            let mut big: Vec<u64> = (0..1000).rev().collect();
            forbid(|| big.sort());
        }
        "shrink_into_an_8_byte_block" => {
            // Found by the fuzz target `collections` (fuzz/regressions/collections/): with
            // `hardened`, a realloc into the 8-byte class copies the old block's first word, which,
            // when the program never wrote it, is still the encoded free-list link the slot had
            // when free; an encoded end-of-list reads as "this 8-byte slot is free", so the next
            // free of the block aborts with "double free". Without `hardened` nothing is checked.
            for _ in 0..100 {
                let mut v: Vec<u64> = Vec::with_capacity(25);
                v.shrink_to(1);
            }
            eprintln!("shrunk 100 times");
        }
        "replay_collections_regressions" => replay_collections_regressions(),
        "rayon_first_and_second_use" => {
            use rayon::prelude::*;
            let work = || (0..100_000u64).into_par_iter().map(|x| x * x).sum::<u64>();
            // The first use builds rayon's global pool, which lives as long as the process: a
            // count around it reports those blocks as left behind.
            let (a, first) = count(work);
            assert!(first.live_blocks > 0, "{first:?}");
            // Afterwards the calling thread only hands the job over and waits: nothing.
            let (b, second) = count(work);
            assert_eq!(a, b);
            assert_eq!(second.allocations + second.frees + second.live_blocks, 0);
            // Blocks the workers allocate are not this thread's: only the result vector counts as
            // an allocation, while the 10 000 vectors the workers made are counted when this
            // thread frees them. `live_blocks` stays right where allocations - frees would not.
            let n = 10_000;
            let (_, third) = count(|| {
                (0..n as u64)
                    .into_par_iter()
                    .map(|x| vec![x; 4])
                    .collect::<Vec<_>>()
                    .len()
            });
            assert_eq!((third.allocations, third.frees), (1, n + 1), "{third:?}");
            assert_eq!(third.live_blocks, 0);
            eprintln!("rayon first use: {first:?}; second use: {second:?}; collect: {third:?}");
        }
        _ => panic!("unknown case {case}"),
    }
}

/// In a child: run the case named by the environment. In the parent: does nothing.
#[test]
fn child_entry() {
    child::enter(run_case);
}

/// Runs `case` in a child process, which must return and print `expect` on stderr.
fn run_in_child(case: &str, expect: &str) {
    child::expect_each("child_entry", [(case, Ending::Returns, expect)]);
}

/// `count` around a crate that works on other threads and keeps a global pool.
#[test]
fn rayon_under_count() {
    run_in_child("rayon_first_and_second_use", "rayon first use");
}

/// The bug the fuzz target `collections` found in `hardened` (see the case's comment): fails with
/// `--features testing,hardened` until it is fixed.
#[test]
fn shrinking_a_vec_into_an_8_byte_block_is_not_a_double_free() {
    run_in_child("shrink_into_an_8_byte_block", "shrunk 100 times");
}

#[test]
fn limit_and_abort_cases_in_child_processes() {
    child::expect_each("child_entry", CASES.iter().copied());
}
