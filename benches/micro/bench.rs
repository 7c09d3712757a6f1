//! Micro benchmarks: each allocator called through `GlobalAlloc` directly, side by side in one
//! criterion group per pattern. `cargo bench --bench micro` (add `-- --quick` for a short run).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::mpsc;

static POOL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
static SYSTEM: System = System;
static JE: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
static MI: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs `f` once per allocator, with the allocator as a `&'static dyn`-free generic so calls inline
/// exactly as they would in a program.
macro_rules! for_each_allocator {
    ($group:expr, $param:expr, $f:ident) => {
        $group.bench_with_input(BenchmarkId::new("poolalloc", $param), &$param, |b, p| {
            $f(b, &POOL, *p)
        });
        $group.bench_with_input(BenchmarkId::new("system", $param), &$param, |b, p| {
            $f(b, &SYSTEM, *p)
        });
        $group.bench_with_input(BenchmarkId::new("jemalloc", $param), &$param, |b, p| {
            $f(b, &JE, *p)
        });
        $group.bench_with_input(BenchmarkId::new("mimalloc", $param), &$param, |b, p| {
            $f(b, &MI, *p)
        });
    };
}

fn pair<A: GlobalAlloc>(b: &mut criterion::Bencher, a: &A, size: usize) {
    let l = Layout::from_size_align(size, 8).unwrap();
    b.iter(|| {
        // SAFETY: non-zero layout; the block is freed with it.
        unsafe {
            let p = a.alloc(black_box(l));
            p.write(1);
            a.dealloc(black_box(p), l);
        }
    });
}

fn batch<A: GlobalAlloc>(b: &mut criterion::Bencher, a: &A, fifo: bool) {
    let l = Layout::from_size_align(64, 8).unwrap();
    let mut v = vec![std::ptr::null_mut::<u8>(); 1000];
    b.iter(|| {
        // SAFETY: non-zero layout; every block is freed once with it.
        unsafe {
            for s in v.iter_mut() {
                *s = a.alloc(l);
                s.write(1);
            }
            if fifo {
                v.iter().for_each(|&p| a.dealloc(p, l));
            } else {
                v.iter().rev().for_each(|&p| a.dealloc(p, l));
            }
        }
    });
}

fn realloc_growth<A: GlobalAlloc>(b: &mut criterion::Bencher, a: &A, _: usize) {
    b.iter(|| {
        let mut size = 8;
        // SAFETY: sizes are non-zero; each realloc passes the block's current layout.
        unsafe {
            let mut p = a.alloc(Layout::from_size_align(size, 8).unwrap());
            while size < 1 << 20 {
                p.write(size as u8);
                p = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), size * 2);
                size *= 2;
            }
            a.dealloc(p, Layout::from_size_align(size, 8).unwrap());
        }
    });
}

fn cross_thread<A: GlobalAlloc + Sync>(b: &mut criterion::Bencher, a: &'static A, n: usize) {
    let l = Layout::from_size_align(64, 8).unwrap();
    b.iter(|| {
        let (tx, rx) = mpsc::sync_channel::<Vec<usize>>(8);
        let consumer = std::thread::spawn(move || {
            for batch in rx {
                for p in batch {
                    // SAFETY: allocated by the producer with l, freed once here.
                    unsafe { a.dealloc(p as *mut u8, l) };
                }
            }
        });
        for _ in 0..n / 256 {
            let batch = (0..256)
                .map(|_| {
                    // SAFETY: non-zero layout.
                    let p = unsafe { a.alloc(l) };
                    // SAFETY: p holds 64 bytes.
                    unsafe { p.write(1) };
                    p as usize
                })
                .collect();
            tx.send(batch).unwrap();
        }
        drop(tx);
        consumer.join().unwrap();
    });
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc+free pair");
    for size in [16usize, 64, 256, 1024, 8192, 65536] {
        for_each_allocator!(g, size, pair);
    }
    g.finish();

    let mut g = c.benchmark_group("1000 allocs then frees (64 B)");
    g.throughput(Throughput::Elements(1000));
    for order in ["LIFO", "FIFO"] {
        let fifo = order == "FIFO";
        g.bench_function(BenchmarkId::new("poolalloc", order), |b| {
            batch(b, &POOL, fifo)
        });
        g.bench_function(BenchmarkId::new("system", order), |b| {
            batch(b, &SYSTEM, fifo)
        });
        g.bench_function(BenchmarkId::new("jemalloc", order), |b| batch(b, &JE, fifo));
        g.bench_function(BenchmarkId::new("mimalloc", order), |b| batch(b, &MI, fifo));
    }
    g.finish();

    let mut g = c.benchmark_group("realloc growth 8 B to 1 MiB");
    for_each_allocator!(g, 0usize, realloc_growth);
    g.finish();

    let mut g = c.benchmark_group("cross-thread free, 2 threads, 64 B");
    let n = 64 * 1024;
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    for_each_allocator!(g, n, cross_thread);
    g.finish();
}

criterion_group!(micro, benches);
/// What `criterion_main!(micro)` would define, public for the crate root (`benches/micro.rs`).
pub fn main() {
    micro();
    Criterion::default().configure_from_args().final_summary();
}
