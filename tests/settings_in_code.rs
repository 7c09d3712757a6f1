//! Settings fixed in code (`poolalloc::settings!`): in force at the program's first allocation,
//! before `main`; below the environment and the run-time setters. Each case runs this binary again
//! as a child (settings are process-wide; poolalloc-test-support's `child`), which prints what it
//! saw at its first allocation and what it sees in `main`.

use poolalloc::{LargeBlocks, PoolAlloc, Settings};
use poolalloc_test_support::child;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

poolalloc::settings!(
    Settings::new()
        .purge_delay(Duration::from_millis(123))
        .retained_chunks(3)
        .large_blocks(LargeBlocks::SystemKept)
);

/// `PoolAlloc`, and a note of the purge delay and retained chunks in force at the first
/// allocation of the process (Rust's runtime allocates before `main`).
struct Probe;

static FIRST_DELAY: AtomicUsize = AtomicUsize::new(usize::MAX);
static FIRST_RETAINED: AtomicUsize = AtomicUsize::new(usize::MAX);
static POOL: PoolAlloc = PoolAlloc::new();

// SAFETY: every call is forwarded to PoolAlloc with its own arguments; the note allocates nothing
// (the getters read atomics and, once, the environment, without allocating).
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if FIRST_DELAY.load(Relaxed) == usize::MAX {
            FIRST_RETAINED.store(poolalloc::retained_chunks(), Relaxed);
            FIRST_DELAY.store(poolalloc::purge_delay().as_millis() as usize, Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { POOL.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { POOL.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Probe = Probe;

fn child() {
    if std::env::var_os("POOLALLOC_TEST_SET_DELAY").is_some() {
        poolalloc::set_purge_delay(Duration::from_millis(7));
    }
    println!(
        "first={}/{} main={}/{}/{:?}",
        FIRST_DELAY.load(Relaxed),
        FIRST_RETAINED.load(Relaxed),
        poolalloc::purge_delay().as_millis(),
        poolalloc::retained_chunks(),
        poolalloc::large_blocks()
    );
}

#[test]
fn the_child() {
    child::enter(|_| child());
}

/// What the child printed: (first allocation's delay and retained, main's delay, retained, large).
fn run(env: &[(&str, &str)]) -> String {
    let mut cmd = child::test("the_child", "settings_in_code");
    for (k, _) in std::env::vars() {
        if k.starts_with("POOLALLOC_") && !k.starts_with("POOLALLOC_TEST_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let o = cmd.output().expect("run the child");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        child::returned(&o.status),
        "child failed: {}\n{out}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let i = out
        .find("first=")
        .unwrap_or_else(|| panic!("no line in:\n{out}"));
    out[i..].lines().next().unwrap().to_string()
}

/// Where constructors run (the macro's section); elsewhere the macro does nothing.
const CONSTRUCTORS: bool = cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "macos",
    windows
));

#[test]
fn settings_in_code_are_in_force_at_the_first_allocation() {
    if !CONSTRUCTORS {
        return;
    }
    assert_eq!(run(&[]), "first=123/3 main=123/3/SystemKept");
}

#[test]
fn the_environment_wins_over_settings_in_code() {
    if !CONSTRUCTORS {
        return;
    }
    assert_eq!(
        run(&[
            ("POOLALLOC_PURGE_DELAY_MS", "40"),
            ("POOLALLOC_LARGE_BLOCKS", "spans")
        ]),
        "first=40/3 main=40/3/Spans"
    );
}

#[test]
fn a_setter_wins_over_both() {
    if !CONSTRUCTORS {
        return;
    }
    assert_eq!(
        run(&[
            ("POOLALLOC_PURGE_DELAY_MS", "40"),
            ("POOLALLOC_TEST_SET_DELAY", "1")
        ]),
        "first=40/3 main=7/3/SystemKept"
    );
}
