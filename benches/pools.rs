//! Pool<T> against slotmap::SlotMap and thunderdome::Arena: insert, remove, get, and iteration over
//! a dense and a 10%-full container of 10 000 items of 32 bytes. `cargo bench --bench pools`
//! (`-- --quick` for fewer rounds).
//!
//! The three containers run side by side: each round times every operation on each container in
//! turn, rotating which goes first, and the table gives the median over rounds of the time per
//! operation, and Pool's ratio to slotmap (below 1 is better).

use poolalloc_bench_harness::stats::median;
use std::hint::black_box;
use std::time::Instant;

const N: usize = 10_000;

type Item = [u64; 4];

fn item(i: usize) -> Item {
    [i as u64; 4]
}

/// One container under test: the same four operations on each.
trait Bench {
    const NAME: &'static str;
    type Key: Copy;
    fn new() -> Self;
    fn insert(&mut self, v: Item) -> Self::Key;
    fn remove(&mut self, k: Self::Key) -> Option<Item>;
    fn get(&self, k: Self::Key) -> Option<&Item>;
    fn sum(&self) -> u64;
}

impl Bench for poolalloc::Pool<Item> {
    const NAME: &'static str = "Pool";
    type Key = poolalloc::Handle<Item>;
    fn new() -> Self {
        poolalloc::Pool::new()
    }
    fn insert(&mut self, v: Item) -> Self::Key {
        poolalloc::Pool::insert(self, v)
    }
    fn remove(&mut self, k: Self::Key) -> Option<Item> {
        poolalloc::Pool::remove(self, k)
    }
    fn get(&self, k: Self::Key) -> Option<&Item> {
        poolalloc::Pool::get(self, k)
    }
    fn sum(&self) -> u64 {
        self.iter().map(|(_, v)| v[0]).sum()
    }
}

impl Bench for slotmap::SlotMap<slotmap::DefaultKey, Item> {
    const NAME: &'static str = "slotmap";
    type Key = slotmap::DefaultKey;
    fn new() -> Self {
        slotmap::SlotMap::new()
    }
    fn insert(&mut self, v: Item) -> Self::Key {
        slotmap::SlotMap::insert(self, v)
    }
    fn remove(&mut self, k: Self::Key) -> Option<Item> {
        slotmap::SlotMap::remove(self, k)
    }
    fn get(&self, k: Self::Key) -> Option<&Item> {
        slotmap::SlotMap::get(self, k)
    }
    fn sum(&self) -> u64 {
        self.iter().map(|(_, v)| v[0]).sum()
    }
}

impl Bench for thunderdome::Arena<Item> {
    const NAME: &'static str = "thunderdome";
    type Key = thunderdome::Index;
    fn new() -> Self {
        thunderdome::Arena::new()
    }
    fn insert(&mut self, v: Item) -> Self::Key {
        thunderdome::Arena::insert(self, v)
    }
    fn remove(&mut self, k: Self::Key) -> Option<Item> {
        thunderdome::Arena::remove(self, k)
    }
    fn get(&self, k: Self::Key) -> Option<&Item> {
        thunderdome::Arena::get(self, k)
    }
    fn sum(&self) -> u64 {
        self.iter().map(|(_, v)| v[0]).sum()
    }
}

const OPS: [&str; 5] = [
    "insert 10k into a new container",
    "remove 10k and reinsert",
    "get 10k",
    "iterate, dense",
    "iterate, 10% full",
];

/// Nanoseconds per repetition of `f`, repeated `reps` times.
fn time(reps: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(reps)
}

/// One round of every operation on container `B`: nanoseconds per operation, in OPS order.
fn round<B: Bench>() -> [f64; 5] {
    let insert = time(10, || {
        let mut c = B::new();
        for i in 0..N {
            black_box(c.insert(item(i)));
        }
        black_box(&c);
    });
    let mut c = B::new();
    let mut keys: Vec<B::Key> = (0..N).map(|i| c.insert(item(i))).collect();
    let remove = time(10, || {
        for k in keys.iter_mut() {
            black_box(c.remove(*k));
            *k = c.insert(item(1));
        }
    });
    let get = time(20, || {
        black_box(keys.iter().map(|k| c.get(*k).unwrap()[0]).sum::<u64>());
    });
    let dense = time(20, || {
        black_box(c.sum());
    });
    // Keep one in ten.
    for (i, k) in keys.iter().enumerate() {
        if i % 10 != 0 {
            c.remove(*k);
        }
    }
    let sparse = time(20, || {
        black_box(c.sum());
    });
    [insert, remove, get, dense, sparse]
}

/// A container's round: nanoseconds per operation, in OPS order.
type Round = fn() -> [f64; 5];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 5 } else { 41 };
    let runners: [(&str, Round); 3] = [
        (
            <poolalloc::Pool<Item> as Bench>::NAME,
            round::<poolalloc::Pool<Item>>,
        ),
        (
            <slotmap::SlotMap<slotmap::DefaultKey, Item> as Bench>::NAME,
            round::<slotmap::SlotMap<slotmap::DefaultKey, Item>>,
        ),
        (
            <thunderdome::Arena<Item> as Bench>::NAME,
            round::<thunderdome::Arena<Item>>,
        ),
    ];
    // samples[runner][op]
    let mut samples = vec![vec![Vec::new(); OPS.len()]; runners.len()];
    for r in 0..rounds {
        for k in 0..runners.len() {
            let ri = (k + r) % runners.len(); // rotate the order
            for (oi, t) in runners[ri].1().into_iter().enumerate() {
                samples[ri][oi].push(t);
            }
        }
    }
    println!(
        "Medians of {rounds} interleaved rounds, 10 000 items of 32 bytes; ratio = Pool / slotmap (below 1 is better).\n"
    );
    println!("| operation | Pool | slotmap | thunderdome | Pool / slotmap |");
    println!("|---|---:|---:|---:|---:|");
    for (oi, op) in OPS.iter().enumerate() {
        let m: Vec<f64> = (0..runners.len())
            .map(|ri| median(samples[ri][oi].clone()))
            .collect();
        println!(
            "| {op} | {:.1} µs | {:.1} µs | {:.1} µs | **{:.2}** |",
            m[0] / 1e3,
            m[1] / 1e3,
            m[2] / 1e3,
            m[0] / m[1]
        );
    }
}
