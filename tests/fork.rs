//! fork() while other threads hammer the allocator: the child must be able to allocate (a pool lock
//! held by another thread at fork time would deadlock it) and exit 0; with the `profiling` feature,
//! with every allocation sampled.
//!
//! Unix only: on Windows (no fork) the test is listed as ignored.

#[cfg(unix)]
use std::sync::Arc;
#[cfg(unix)]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(unix)]
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
#[cfg_attr(not(unix), ignore = "fork() is POSIX only: Windows has no fork")]
fn child_allocates_after_fork_during_allocation_storm() {
    // With the `profiling` feature, every allocation is sampled meanwhile: the profiler's lock
    // (and the stack walks) must not deadlock the child either.
    #[cfg(feature = "profiling")]
    poolalloc::profile::start(poolalloc::profile::Config {
        interval: 0,
        seed: 0,
    })
    .unwrap();
    #[cfg(unix)]
    fork_during_allocation_storm();
}

#[cfg(unix)]
fn fork_during_allocation_storm() {
    let stop = Arc::new(AtomicBool::new(false));
    let hammers: Vec<_> = (0..3)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut keep: Vec<Vec<u8>> = Vec::new();
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    keep.push(vec![t as u8; 1 + (i * 97) % 3000]);
                    if keep.len() > 2000 {
                        keep.drain(..1000);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    for round in 0..50 {
        // SAFETY: fork in a multi-threaded process; the child only allocates (what is under test),
        // then leaves with _exit, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let v: Vec<u64> = (0..1000).collect();
            let s = format!("child {round} {}", v.iter().sum::<u64>());
            let b = Box::new([1u8; 100_000]);
            let ok = s.len() > 5 && b[99_999] == 1;
            poolalloc::trim();
            // SAFETY: leaving the child process without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let start = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: pid is our child; status is a valid out-pointer.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if start.elapsed() > Duration::from_secs(10) {
                // SAFETY: pid is our child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("child {round} deadlocked after fork");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child {round} status {status}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
}
