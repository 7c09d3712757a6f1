//! A stress test in the manner of mimalloc's test-stress: threads allocate objects of 1–16 words
//! (1% of them ×100), keep about half, swap others through a shared transfer array with atomic
//! exchanges, fill every word with `i ^ cookie` and check every word before freeing. Threads are
//! re-created every round, so thread exit and cross-thread frees are exercised all the time.

use std::sync::atomic::{AtomicPtr, Ordering};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const TRANSFER: usize = 1000;
/// (Its low half on 32-bit targets.)
const COOKIE: usize = 0xbf58_476d_1ce4_e5b9_u64 as usize;

use poolalloc_bench_harness::rng::Rng;

/// An object: its length in words is stored in word 0, every other word holds `i ^ COOKIE ^ len`.
fn alloc_obj(r: &mut Rng) -> *mut Vec<usize> {
    let mut words = 1 + r.below(16);
    if r.below(100) == 0 {
        words *= 100;
    }
    let v: Vec<usize> = (0..words).map(|i| i ^ COOKIE ^ words).collect();
    Box::into_raw(Box::new(v))
}

fn free_obj(p: *mut Vec<usize>) {
    if p.is_null() {
        return;
    }
    // SAFETY: p came from Box::into_raw in alloc_obj and is freed exactly once (it left the transfer
    // array through an atomic swap, or was only ever held by one thread).
    let v = unsafe { Box::from_raw(p) };
    let n = v.len();
    for (i, &w) in v.iter().enumerate() {
        assert_eq!(w, i ^ COOKIE ^ n, "object corrupted at word {i} of {n}");
    }
}

fn worker(transfer: &[AtomicPtr<Vec<usize>>], seed: u64, iters: usize) {
    let mut r = Rng::new(seed | 1);
    let mut keep: Vec<*mut Vec<usize>> = Vec::new();
    for _ in 0..iters {
        match r.below(10) {
            0..=4 => keep.push(alloc_obj(&mut r)),
            5..=6 if !keep.is_empty() => {
                let i = r.below(keep.len());
                free_obj(keep.swap_remove(i));
            }
            _ => {
                let obj = if keep.is_empty() || r.below(2) == 0 {
                    alloc_obj(&mut r)
                } else {
                    let i = r.below(keep.len());
                    keep.swap_remove(i)
                };
                let old = transfer[r.below(TRANSFER)].swap(obj, Ordering::AcqRel);
                free_obj(old);
            }
        }
    }
    for p in keep {
        free_obj(p);
    }
}

#[test]
fn threads_swap_objects_and_every_word_survives() {
    let transfer: &'static [AtomicPtr<Vec<usize>>] = Box::leak(
        (0..TRANSFER)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let threads = 4;
    for round in 0..20u64 {
        let hs: Vec<_> = (0..threads)
            .map(|t| std::thread::spawn(move || worker(transfer, round * 1000 + t + 1, 50_000)))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    for slot in transfer {
        free_obj(slot.swap(std::ptr::null_mut(), Ordering::AcqRel));
    }
    poolalloc::trim();
}
