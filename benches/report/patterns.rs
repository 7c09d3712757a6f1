//! The mimalloc-bench patterns, ported (the patterns in our own code; their sources are not
//! vendored), a Rust-shaped workload of maps, and thousands of short threads.

use super::{Extra, Params, Rng, block, check};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Barrier, mpsc};

/// larson: each thread owns 5000 slots; each step frees a random slot and allocates 8–999 B into it.
/// After each round the threads exit and hand their slots to new threads, which free objects they
/// did not allocate.
pub fn larson(p: Params) -> Extra {
    let rounds = 4;
    let steps = 40_000 * p.scale;
    let mut arrays: Vec<Vec<Box<[u8]>>> = (0..p.threads)
        .map(|t| {
            let mut r = Rng::new(t as u64);
            (0..5000).map(|_| block(r.range(8, 999), 1)).collect()
        })
        .collect();
    for round in 0..rounds {
        let hs: Vec<_> = arrays
            .into_iter()
            .enumerate()
            .map(|(t, mut a)| {
                std::thread::spawn(move || {
                    let mut r = Rng::new((round * 100 + t) as u64);
                    for _ in 0..steps {
                        let i = r.below(a.len());
                        check(&a[i], 1);
                        a[i] = block(r.range(8, 999), 1);
                    }
                    a
                })
            })
            .collect();
        arrays = hs.into_iter().map(|h| h.join().unwrap()).collect();
        arrays.rotate_left(1);
    }
    Extra {
        // A free and an allocation per step.
        work: Some((rounds * p.threads * steps * 2) as f64),
        ..Extra::default()
    }
}

/// local-churn (issue 46): each thread keeps 20,000 boxes and replaces a random one, 1.5 M times a
/// thread at scale 1; 7/8 of the sizes 8–128 B, 1/8 8 B–2 KiB. Nothing is shared: every free is
/// the thread's own, so the time is the allocator's own blocks and chunk headers in the caches.
pub fn local_churn(p: Params) -> Extra {
    let steps = 1_500_000 * p.scale;
    fn size(r: &mut Rng) -> usize {
        if r.below(8) == 0 {
            r.range(8, 2048)
        } else {
            r.range(8, 128)
        }
    }
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = Rng::new(0x46 + t as u64);
                let mut a: Vec<Box<[u8]>> = (0..20_000).map(|_| block(size(&mut r), 1)).collect();
                for _ in 0..steps {
                    let i = r.below(a.len());
                    check(&a[i], 1);
                    a[i] = block(size(&mut r), 1);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra {
        // A free and an allocation per step.
        work: Some((p.threads * steps * 2) as f64),
        ..Extra::default()
    }
}

/// xmalloc-test: producers allocate batches of 64 B blocks, consumers free them.
pub fn xmalloc(p: Params) -> Extra {
    let pairs = (p.threads / 2).max(1);
    let batches = 20_000 * p.scale;
    let hs: Vec<_> = (0..pairs)
        .flat_map(|_| {
            let (tx, rx) = mpsc::sync_channel::<Vec<Box<[u8; 64]>>>(64);
            let prod = std::thread::spawn(move || {
                for i in 0..batches {
                    let b: Vec<Box<[u8; 64]>> = (0..64).map(|_| Box::new([i as u8; 64])).collect();
                    tx.send(b).unwrap();
                }
            });
            let cons = std::thread::spawn(move || {
                for b in rx {
                    let v = b[0][0];
                    assert!(b.iter().all(|x| x[63] == v));
                }
            });
            [prod, cons]
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra {
        // Each block allocated and freed, and each batch's vector.
        work: Some((pairs * batches * 65 * 2) as f64),
        ..Extra::default()
    }
}

/// cache-scratch: one thread allocates one 1-byte object per thread; each thread frees its object,
/// then repeatedly allocates 1 B, writes it many times, frees it (false sharing shows up here).
/// In mimalloc-bench's proportions (1000 objects of 2,000,000 writes each per thread): few
/// objects, many writes each, so that where the allocator puts them is what is timed. Until
/// 2026-11-24 it was 20,000 objects of 100 writes per thread and scale unit: 8–12 ms, mostly
/// thread start-up, and ratios that moved by ±0.4 between runs.
pub fn cache_scratch(p: Params) -> Extra {
    let objs: Vec<Box<u8>> = (0..p.threads).map(|_| Box::new(0u8)).collect();
    let barrier = Arc::new(Barrier::new(p.threads));
    let iters = 1_000 * p.scale;
    let hs: Vec<_> = objs
        .into_iter()
        .map(|o| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                drop(o);
                barrier.wait();
                for _ in 0..iters {
                    let mut b = Box::new(0u8);
                    for k in 0..20_000u32 {
                        // SAFETY: b is a live, exclusively owned byte.
                        unsafe { std::ptr::write_volatile(&mut *b, k as u8) };
                    }
                    std::hint::black_box(&b);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// glibc-simple: 16/32/64 B blocks in batches of 25–1600, fully written, half freed FIFO, half LIFO.
pub fn glibc_simple(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = Rng::new(t as u64 + 7);
                for _ in 0..150 * p.scale {
                    let n = r.range(25, 1600);
                    let size = [16, 32, 64][r.below(3)];
                    let mut v: std::collections::VecDeque<Box<[u8]>> =
                        (0..n).map(|i| block(size, i as u8)).collect();
                    for i in 0..n / 2 {
                        check(&v.pop_front().unwrap(), i as u8);
                    }
                    while let Some(b) = v.pop_back() {
                        std::hint::black_box(b);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// alloc-test: 2^18 slots (2^16 in quick mode), Pareto 80/20 slot choice, 5 B–1 KiB log-skewed
/// sizes, every block fully written and read back.
pub fn alloc_test(p: Params) -> Extra {
    let slots = if p.scale == 1 { 1 << 16 } else { 1 << 18 };
    let per = 400_000 * p.scale / p.threads.max(1);
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut r = Rng::new(t as u64 + 99);
                let mut a: Vec<Option<Box<[u8]>>> =
                    (0..slots / p.threads.max(1)).map(|_| None).collect();
                let n = a.len();
                for _ in 0..per {
                    // 80% of the operations on 20% of the slots.
                    let i = if r.below(10) < 8 {
                        r.below(n / 5)
                    } else {
                        r.below(n)
                    };
                    let size = 5 << r.below(8); // 5 B .. 640 B, log-skewed
                    let size = size + r.below(size.min(1024 - size + 1));
                    if let Some(b) = a[i].take() {
                        assert!(b.iter().all(|&x| x == b.len() as u8));
                    }
                    a[i] = Some(block(size, size as u8));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// mstress (mimalloc test-stress): objects of 1–16 words (1% ×100) swapped through a shared transfer
/// array with atomic exchanges, every word checked before free; threads re-created every iteration.
pub fn mstress(p: Params) -> Extra {
    const COOKIE: usize = 0xbf58_476d_1ce4_e5b9;
    fn obj(r: &mut Rng) -> *mut Vec<usize> {
        let mut w = r.range(1, 16);
        if r.below(100) == 0 {
            w *= 100;
        }
        Box::into_raw(Box::new((0..w).map(|i| i ^ COOKIE).collect()))
    }
    fn free(o: *mut Vec<usize>) {
        if !o.is_null() {
            // SAFETY: o came from Box::into_raw and left the transfer array through a swap.
            let v = unsafe { Box::from_raw(o) };
            assert!(v.iter().enumerate().all(|(i, &w)| w == i ^ COOKIE));
        }
    }
    let transfer: Arc<Vec<AtomicPtr<Vec<usize>>>> = Arc::new(
        (0..1000)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
    );
    for iter in 0..10 * p.scale {
        let hs: Vec<_> = (0..p.threads)
            .map(|t| {
                let transfer = Arc::clone(&transfer);
                std::thread::spawn(move || {
                    let mut r = Rng::new((iter * 64 + t) as u64);
                    let mut keep = Vec::new();
                    for _ in 0..20_000 {
                        let o = obj(&mut r);
                        if r.below(2) == 0 {
                            keep.push(o as usize);
                        } else {
                            free(transfer[r.below(1000)].swap(o, Ordering::AcqRel));
                        }
                        if keep.len() > 500 {
                            let i = r.below(keep.len());
                            free(keep.swap_remove(i) as *mut Vec<usize>);
                        }
                    }
                    keep.into_iter().for_each(|o| free(o as *mut Vec<usize>));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    for s in transfer.iter() {
        free(s.swap(std::ptr::null_mut(), Ordering::AcqRel));
    }
    Extra::default()
}

/// sh6bench-like: sizes grow 1 → 1000 (×1.5+1) and back; the older half is freed FIFO, the rest LIFO.
pub fn sh6bench(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                for rep in 0..60 * p.scale {
                    let mut sizes = vec![1usize];
                    while *sizes.last().unwrap() < 1000 {
                        let s = *sizes.last().unwrap();
                        sizes.push(s * 3 / 2 + 1);
                    }
                    let back: Vec<usize> = sizes.iter().rev().copied().collect();
                    sizes.extend(back);
                    let mut held = std::collections::VecDeque::new();
                    for &s in &sizes {
                        for k in 0..200 {
                            held.push_back(block(s, (k + rep + t) as u8));
                        }
                    }
                    for _ in 0..held.len() / 2 {
                        std::hint::black_box(held.pop_front());
                    }
                    while let Some(b) = held.pop_back() {
                        std::hint::black_box(b);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    Extra::default()
}

/// A Rust-shaped workload: maps of Strings to Vecs built, queried and dropped, on every thread.
pub fn rust_collections(p: Params) -> Extra {
    let hs: Vec<_> = (0..p.threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut total = 0usize;
                for round in 0..4 * p.scale {
                    let mut h: HashMap<String, Vec<u32>> = HashMap::new();
                    let mut b: BTreeMap<u64, String> = BTreeMap::new();
                    for i in 0..20_000u32 {
                        let k = format!("item-{t}-{round}-{i}");
                        h.insert(k.clone(), (0..i % 24).collect());
                        b.insert(u64::from(i) * 31 % 20_011, k);
                    }
                    for i in (0..20_000u32).step_by(3) {
                        total += h
                            .get(&format!("item-{t}-{round}-{i}"))
                            .map_or(0, |v| v.len());
                    }
                    total += b.range(100..5000).map(|(_, v)| v.len()).sum::<usize>();
                    h.retain(|_, v| v.len() % 2 == 0);
                    total += h.len();
                }
                total
            })
        })
        .collect();
    for h in hs {
        std::hint::black_box(h.join().unwrap());
    }
    Extra::default()
}

/// threads: thousands of short threads (500 × scale, `threads` at a time), each allocating and
/// freeing a little and leaving a third of its blocks to a long-lived thread that drops them.
pub fn threads(p: Params) -> Extra {
    let (tx, rx) = mpsc::channel::<Vec<Box<[u8]>>>();
    let sink = std::thread::spawn(move || {
        let mut n = 0usize;
        for v in rx {
            n += v.len();
        }
        n
    });
    for wave in 0..500 * p.scale / p.threads {
        let hs: Vec<_> = (0..p.threads)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut r = Rng::new((wave * 64 + t) as u64);
                    let mut keep = Vec::new();
                    for i in 0..300 {
                        let b = block(r.range(8, 600), i as u8);
                        if i % 3 == 0 {
                            keep.push(b);
                        } else {
                            check(&b, i as u8);
                        }
                    }
                    let s: String = (0..50).map(|i| format!("{i},")).collect();
                    std::hint::black_box(s);
                    tx.send(keep).unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    drop(tx);
    std::hint::black_box(sink.join().unwrap());
    Extra {
        // 300 blocks allocated and freed per thread (the string and the vector not counted).
        work: Some(((500 * p.scale / p.threads) * p.threads * 300 * 2) as f64),
        ..Extra::default()
    }
}
