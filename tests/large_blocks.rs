//! The memory promise for large blocks: a second after a program frees its blocks above 64 KiB
//! (with no call to the allocator) its RSS is back within 10% of what it grew by, as for small
//! blocks (`tests/stats.rs`), wherever the default `LargeBlocks` puts them: spans of our own (x86-64
//! Linux, musl), which the purger unmaps once they waited the purge delay, or the system
//! allocator, which glibc alone keeps in its arenas: the purger asks it to give their pages back
//! once the program is quiet.
//!
//! Threads that grow buffers of 16 KiB to 4 MiB by appending and hand some to another thread to
//! free, like a server's response buffers; the threads stay alive (a pool's workers) while RSS
//! is measured.

use std::sync::{Arc, Barrier, mpsc};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

use poolalloc_test_support::rss;

/// The process's resident set, as poolalloc reports it.
fn rss() -> usize {
    rss::bytes(poolalloc::stats().rss_bytes)
}

#[test]
#[cfg_attr(
    not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "freebsd",
        windows
    )),
    ignore = "poolalloc::stats() reports no RSS on this OS"
)]
fn freed_large_blocks_go_back_to_the_os() {
    const THREADS: usize = 2;
    const WINDOW: usize = 24;
    const BUFFERS: usize = 120;
    let start = rss();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let dropper = std::thread::spawn(move || rx.into_iter().for_each(drop));
    // Workers: built, freed, then wait (alive) until RSS was measured.
    let built = Arc::new(Barrier::new(THREADS + 1));
    let freed = Arc::new(Barrier::new(THREADS + 1));
    let measured = Arc::new(Barrier::new(THREADS + 1));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let tx = tx.clone();
            let (built, freed, measured) = (built.clone(), freed.clone(), measured.clone());
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
                let mut window = std::collections::VecDeque::new();
                for i in 0..BUFFERS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let target = (16 << 10) + (x % (4 << 20) as u64) as usize;
                    let mut b: Vec<u8> = Vec::new();
                    while b.len() < target {
                        b.extend_from_slice(&[t as u8 + 1; 4096]);
                    }
                    window.push_back(b);
                    if window.len() > WINDOW {
                        let old = window.pop_front().unwrap();
                        if i % 3 == 0 {
                            tx.send(old).unwrap();
                        }
                    }
                }
                built.wait();
                // Half freed here, half on the dropper thread.
                for (i, b) in window.into_iter().enumerate() {
                    if i % 2 == 0 {
                        tx.send(b).unwrap();
                    }
                }
                drop(tx);
                freed.wait();
                measured.wait();
            })
        })
        .collect();
    drop(tx);
    built.wait();
    let peak = rss();
    let grown = peak.saturating_sub(start);
    freed.wait();
    dropper.join().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = rss();
    measured.wait();
    workers.into_iter().for_each(|w| w.join().unwrap());
    eprintln!(
        "rss: start {} KiB, peak {} KiB, 1 s after freeing everything {} KiB",
        start >> 10,
        peak >> 10,
        after >> 10
    );
    if let Some(why) = rss::not_the_programs() {
        // Under qemu-user the emulator's RSS moves with its own heap and code cache: its growth
        // at the peak was 12 to 114 MiB in 2026-11-26's armv7 runs for the same ~96 MiB of
        // buffers, so neither assertion below says anything there.
        eprintln!("RSS assertions skipped: {why}");
        return;
    }
    assert!(grown > 40 << 20, "expected a large heap, grew {grown}");
    assert!(
        after.saturating_sub(start) * 10 <= grown,
        "after freeing every large block RSS is {} MiB above the start (peak {} MiB above)\n{}",
        after.saturating_sub(start) >> 20,
        grown >> 20,
        poolalloc::stats()
    );
}
