//! Pool<T> against slotmap::SlotMap and thunderdome::Arena: insert, remove, get, and iteration over
//! a dense and a 10%-full container. `cargo bench --bench pools`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const N: usize = 10_000;

type Item = [u64; 4];

fn item(i: usize) -> Item {
    [i as u64; 4]
}

/// Keeps one in ten of 0..N (the sparse case).
fn sparse(i: usize) -> bool {
    i % 10 != 0
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert 10k");
    g.bench_function("poolalloc::Pool", |b| {
        b.iter(|| {
            let mut p = poolalloc::Pool::new();
            for i in 0..N {
                black_box(p.insert(item(i)));
            }
            p
        })
    });
    g.bench_function("slotmap", |b| {
        b.iter(|| {
            let mut p = slotmap::SlotMap::new();
            for i in 0..N {
                black_box(p.insert(item(i)));
            }
            p
        })
    });
    g.bench_function("thunderdome", |b| {
        b.iter(|| {
            let mut p = thunderdome::Arena::new();
            for i in 0..N {
                black_box(p.insert(item(i)));
            }
            p
        })
    });
    g.finish();

    let mut g = c.benchmark_group("remove 10k then reinsert");
    g.bench_function("poolalloc::Pool", |b| {
        let mut p = poolalloc::Pool::new();
        let mut hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        b.iter(|| {
            for h in hs.iter_mut() {
                black_box(p.remove(*h));
                *h = p.insert(item(1));
            }
        })
    });
    g.bench_function("slotmap", |b| {
        let mut p = slotmap::SlotMap::new();
        let mut hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        b.iter(|| {
            for h in hs.iter_mut() {
                black_box(p.remove(*h));
                *h = p.insert(item(1));
            }
        })
    });
    g.bench_function("thunderdome", |b| {
        let mut p = thunderdome::Arena::new();
        let mut hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        b.iter(|| {
            for h in hs.iter_mut() {
                black_box(p.remove(*h));
                *h = p.insert(item(1));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("get 10k");
    {
        let mut p = poolalloc::Pool::new();
        let hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        g.bench_function("poolalloc::Pool", |b| {
            b.iter(|| hs.iter().map(|h| p.get(*h).unwrap()[0]).sum::<u64>())
        });
    }
    {
        let mut p = slotmap::SlotMap::new();
        let hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        g.bench_function("slotmap", |b| {
            b.iter(|| hs.iter().map(|h| p.get(*h).unwrap()[0]).sum::<u64>())
        });
    }
    {
        let mut p = thunderdome::Arena::new();
        let hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        g.bench_function("thunderdome", |b| {
            b.iter(|| hs.iter().map(|h| p.get(*h).unwrap()[0]).sum::<u64>())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("iterate 10k slots");
    for fill in ["dense", "10% full"] {
        let keep = |i: usize| fill == "dense" || !sparse(i);
        let mut p = poolalloc::Pool::new();
        let hs: Vec<_> = (0..N).map(|i| p.insert(item(i))).collect();
        let mut s = slotmap::SlotMap::new();
        let ks: Vec<_> = (0..N).map(|i| s.insert(item(i))).collect();
        let mut t = thunderdome::Arena::new();
        let ts: Vec<_> = (0..N).map(|i| t.insert(item(i))).collect();
        for i in (0..N).filter(|&i| !keep(i)) {
            p.remove(hs[i]);
            s.remove(ks[i]);
            t.remove(ts[i]);
        }
        g.bench_with_input(BenchmarkId::new("poolalloc::Pool", fill), &(), |b, _| {
            b.iter(|| p.iter().map(|(_, v)| v[0]).sum::<u64>())
        });
        g.bench_with_input(BenchmarkId::new("slotmap", fill), &(), |b, _| {
            b.iter(|| s.iter().map(|(_, v)| v[0]).sum::<u64>())
        });
        g.bench_with_input(BenchmarkId::new("thunderdome", fill), &(), |b, _| {
            b.iter(|| t.iter().map(|(_, v)| v[0]).sum::<u64>())
        });
    }
    g.finish();
}

criterion_group!(pools, benches);
criterion_main!(pools);
