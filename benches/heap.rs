//! `poolalloc::Heap`'s drop-all against freeing one by one and against bumpalo's reset: a million
//! small objects (24 bytes) allocated, then all released. `cargo bench --bench heap`.
//!
//! Each round runs the four ways in turn (the order rotated); the table gives the median over
//! rounds of the time to allocate them and the time to release them, and each release over the
//! heap's drop:
//! - `Heap`, dropped: `Box::leak` into a heap, then the heap dropped (its chunks go back at once);
//! - `Heap`, one by one: `Box<T, &Heap>` in a `Vec`, dropped (each block freed), then the heap;
//! - `PoolAlloc`, one by one: `Box<T>` in a `Vec` through the global allocator, dropped;
//! - bumpalo: `Bump::alloc`, then `reset` (which keeps its largest chunk for reuse).

use allocator_api2::boxed::Box as ABox;
use poolalloc_bench_harness::stats::median;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const N: usize = 1_000_000;
type Obj = [u64; 3];

fn heap_dropped() -> (Duration, Duration) {
    let heap = poolalloc::Heap::new();
    let t = Instant::now();
    for i in 0..N {
        let o: &mut Obj = ABox::leak(ABox::new_in([i as u64; 3], &heap));
        black_box(o);
    }
    let a = t.elapsed();
    let t = Instant::now();
    drop(heap);
    (a, t.elapsed())
}

fn heap_one_by_one() -> (Duration, Duration) {
    let heap = poolalloc::Heap::new();
    let t = Instant::now();
    let mut v = Vec::with_capacity(N);
    for i in 0..N {
        v.push(ABox::new_in([i as u64; 3], &heap));
    }
    let a = t.elapsed();
    let t = Instant::now();
    drop(v);
    drop(heap);
    (a, t.elapsed())
}

fn global_one_by_one() -> (Duration, Duration) {
    let t = Instant::now();
    let mut v = Vec::with_capacity(N);
    for i in 0..N {
        v.push(Box::new([i as u64; 3]));
    }
    let a = t.elapsed();
    let t = Instant::now();
    drop(v);
    (a, t.elapsed())
}

fn bumpalo_reset(bump: &mut bumpalo::Bump) -> (Duration, Duration) {
    let t = Instant::now();
    for i in 0..N {
        let o: &mut Obj = bump.alloc([i as u64; 3]);
        black_box(o);
    }
    let a = t.elapsed();
    let t = Instant::now();
    bump.reset();
    (a, t.elapsed())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 11 };
    let names = [
        "Heap, dropped",
        "Heap, one by one",
        "PoolAlloc, one by one",
        "bumpalo, reset",
    ];
    let mut alloc = vec![Vec::new(); 4];
    let mut release = vec![Vec::new(); 4];
    let mut bump = bumpalo::Bump::new();
    for r in 0..rounds {
        for k in 0..4 {
            let w = (k + r) % 4;
            let (a, f) = match w {
                0 => heap_dropped(),
                1 => heap_one_by_one(),
                2 => global_one_by_one(),
                _ => bumpalo_reset(&mut bump),
            };
            alloc[w].push(a.as_secs_f64());
            release[w].push(f.as_secs_f64());
        }
    }
    let rel: Vec<f64> = release.into_iter().map(median).collect();
    println!(
        "{N} objects of {} bytes, median of {rounds} rounds",
        size_of::<Obj>()
    );
    println!("| way | allocate ms | release µs | release / Heap dropped |");
    println!("|---|---:|---:|---:|");
    for (w, name) in names.iter().enumerate() {
        let a = median(alloc[w].clone());
        println!(
            "| {name} | {:.2} | {:.1} | {:.3} |",
            a * 1e3,
            rel[w] * 1e6,
            rel[w] / rel[0]
        );
    }
}
