//! The shadow model: an interpreter of alloc / alloc_zeroed / realloc / dealloc operations decoded
//! from bytes, run on any `GlobalAlloc` and checked against a model of the live blocks. Shared by
//! the cargo-fuzz targets `global_alloc` and `threaded` and by `tests/shadow_model.rs` (seeded
//! inputs and the targets' saved regressions), so every CI run exercises the same checks on
//! stable; `tests/heap.rs` runs it on a `Heap` ([`AsGlobal`]).
//!
//! Checked: alignment; no overlap with any live block; contents kept by realloc up to
//! `min(old, new)`; zeroed memory really zero; every block's pattern intact when it is freed.
//! An allocator over bounded memory (`region::RegionAlloc`, driven by `tests/region_shadow.rs`
//! and the fuzz target `region`) runs with [`Shadow::fallible`]: a null result is out of memory,
//! the operation is dropped and the model stays as it was.

use allocator_api2::alloc::Allocator;
use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;

/// Live bytes the interpreter allows at once, so a fuzz input cannot ask for more than the machine.
const LIVE_LIMIT: usize = 64 << 20;

struct Block {
    size: usize,
    align: usize,
    seed: u8,
}

/// Reads the input as a stream of bytes; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> usize {
        usize::from(self.byte()) | usize::from(self.byte()) << 8
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
    /// A size skewed small: mostly up to 1 KiB, some up to 64 KiB, a few up to 1 MiB.
    fn size(&mut self) -> usize {
        match self.byte() {
            0..=199 => 1 + self.u16() % 1024,
            200..=249 => 1 + self.u16() * 2 % (64 << 10),
            _ => 1 + (self.u16() << 4) % (1 << 20),
        }
    }
    /// An alignment from 1 to 4096.
    fn align(&mut self) -> usize {
        match self.byte() {
            0..=191 => 8,
            b => 1 << (b % 13),
        }
    }
}

fn pattern(seed: u8, i: usize) -> u8 {
    seed ^ (i.wrapping_mul(31) >> 3) as u8 ^ i as u8
}

/// Offsets written and checked in a block: all of a small one, the ends and a stride of a big one.
fn offsets(size: usize) -> impl Iterator<Item = usize> {
    let (head, mid, tail) = if size <= 4096 {
        (0..size, 0..0, 0..0)
    } else {
        (0..256, 256..size - 256, size - 256..size)
    };
    head.chain(mid.step_by(509)).chain(tail)
}

fn fill(p: *mut u8, b: &Block, from: usize) {
    for i in offsets(b.size).filter(|&i| i >= from) {
        // SAFETY: i < b.size, inside the block.
        unsafe { *p.add(i) = pattern(b.seed, i) };
    }
}

fn verify(p: *mut u8, seed: u8, upto: usize, of_size: usize, what: &str) {
    for i in offsets(of_size).take_while(|&i| i < upto) {
        // SAFETY: i < upto ≤ the block's size.
        let got = unsafe { *p.add(i) };
        assert_eq!(
            got,
            pattern(seed, i),
            "{what}: block {p:p} byte {i} changed"
        );
    }
}

/// The model of the live blocks, keyed by address.
pub struct Shadow<'a, A: GlobalAlloc> {
    alloc: &'a A,
    live: BTreeMap<usize, Block>,
    live_bytes: usize,
    /// Null is out of memory (the operation is dropped), not a failure.
    fallible: bool,
}

impl<'a, A: GlobalAlloc> Shadow<'a, A> {
    pub fn new(alloc: &'a A) -> Self {
        Shadow {
            alloc,
            live: BTreeMap::new(),
            live_bytes: 0,
            fallible: false,
        }
    }

    /// A model of an allocator over bounded memory: a null block is out of memory, and the
    /// operation is dropped (a failed realloc keeps the old block, as `GlobalAlloc` says).
    pub fn fallible(alloc: &'a A) -> Self {
        Shadow {
            fallible: true,
            ..Shadow::new(alloc)
        }
    }

    /// The sizes of the live blocks, summed.
    pub fn live_bytes(&self) -> usize {
        self.live_bytes
    }

    /// The number of live blocks.
    pub fn live_blocks(&self) -> usize {
        self.live.len()
    }

    /// Checks a new block against the live ones and records it.
    fn admit(&mut self, p: *mut u8, b: Block) {
        let a = p as usize;
        assert!(!p.is_null(), "allocation of {} B failed", b.size);
        assert_eq!(
            a % b.align,
            0,
            "{} B block {p:p} not aligned to {}",
            b.size,
            b.align
        );
        if let Some((&q, qb)) = self.live.range(..=a).next_back() {
            assert!(
                q + qb.size <= a,
                "{p:p} overlaps the live block at {q:#x} ({} B)",
                qb.size
            );
        }
        if let Some((&q, _)) = self.live.range(a..).next() {
            assert!(
                a + b.size <= q,
                "{p:p} (+{} B) overlaps the live block at {q:#x}",
                b.size
            );
        }
        fill(p, &b, 0);
        self.live_bytes += b.size;
        self.live.insert(a, b);
    }

    /// The address of the `k`-th live block (modulo their number).
    fn pick(&self, k: usize) -> Option<usize> {
        if self.live.is_empty() {
            return None;
        }
        self.live.keys().nth(k % self.live.len()).copied()
    }

    fn free(&mut self, a: usize) {
        let b = self.live.remove(&a).unwrap();
        verify(a as *mut u8, b.seed, b.size, b.size, "before free");
        self.live_bytes -= b.size;
        let l = Layout::from_size_align(b.size, b.align).unwrap();
        // SAFETY: a was allocated by this allocator with l and is freed once.
        unsafe { self.alloc.dealloc(a as *mut u8, l) };
    }

    /// Runs the operations encoded in `data`, then frees everything.
    pub fn run(&mut self, data: &[u8]) {
        self.run_checked(data, |_| {});
    }

    /// [`run`](Self::run), calling `check` with the model after every operation (and after the
    /// final frees), e.g. to compare an allocator's statistics with it.
    pub fn run_checked(&mut self, data: &[u8], mut check: impl FnMut(&Self)) {
        let mut input = Input(data);
        let mut seed = 0u8;
        while !input.done() {
            seed = seed.wrapping_add(1);
            let op = Op::decode(&mut input, seed);
            self.apply(op);
            check(self);
        }
        self.free_all();
        check(self);
    }

    /// Frees every live block.
    pub fn free_all(&mut self) {
        while let Some(a) = self.pick(0) {
            self.free(a);
        }
    }

    /// Runs one operation and checks it against the model.
    pub fn apply(&mut self, op: Op) {
        match op {
            Op::Alloc { size, align, seed } => {
                if self.live_bytes + size > LIVE_LIMIT {
                    return;
                }
                let l = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size.
                let p = unsafe { self.alloc.alloc(l) };
                if p.is_null() && self.fallible {
                    return;
                }
                self.admit(p, Block { size, align, seed });
            }
            Op::Zeroed { size, align, seed } => {
                if self.live_bytes + size > LIVE_LIMIT {
                    return;
                }
                let l = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size.
                let p = unsafe { self.alloc.alloc_zeroed(l) };
                if p.is_null() && self.fallible {
                    return;
                }
                assert!(!p.is_null());
                // SAFETY: p holds size bytes.
                let zeroed = unsafe { std::slice::from_raw_parts(p, size) };
                assert!(
                    zeroed.iter().all(|&x| x == 0),
                    "alloc_zeroed({size}, {align}) not zero"
                );
                self.admit(p, Block { size, align, seed });
            }
            Op::Realloc { k, new } => {
                let Some(a) = self.pick(k) else { return };
                if self.live_bytes + new > LIVE_LIMIT + self.live[&a].size {
                    return;
                }
                let b = self.live.remove(&a).unwrap();
                self.live_bytes -= b.size;
                verify(a as *mut u8, b.seed, b.size, b.size, "before realloc");
                let l = Layout::from_size_align(b.size, b.align).unwrap();
                // SAFETY: a was allocated with l; new > 0 and fits a layout with this align.
                let p = unsafe { self.alloc.realloc(a as *mut u8, l, new) };
                if p.is_null() && self.fallible {
                    // The old block stays, untouched.
                    verify(
                        a as *mut u8,
                        b.seed,
                        b.size,
                        b.size,
                        "after a failed realloc",
                    );
                    self.live_bytes += b.size;
                    self.live.insert(a, b);
                    return;
                }
                assert!(!p.is_null(), "realloc to {new} B failed");
                verify(p, b.seed, b.size.min(new), b.size, "after realloc");
                let nb = Block {
                    size: new,
                    align: b.align,
                    seed: b.seed,
                };
                // Rewrite the whole pattern for the new size (offsets depend on the size).
                self.admit(p, nb);
            }
            Op::Free { k } => {
                if let Some(a) = self.pick(k) {
                    self.free(a);
                }
            }
        }
    }
}

/// One operation of the interpreter, decoded from the input.
pub enum Op {
    Alloc {
        size: usize,
        align: usize,
        seed: u8,
    },
    Zeroed {
        size: usize,
        align: usize,
        seed: u8,
    },
    /// Reallocate the `k`-th live block (modulo their number) to `new` bytes.
    Realloc {
        k: usize,
        new: usize,
    },
    /// Free the `k`-th live block.
    Free {
        k: usize,
    },
}

impl Op {
    fn decode(input: &mut Input, seed: u8) -> Op {
        match input.byte() % 8 {
            0..=2 => Op::Alloc {
                size: input.size(),
                align: input.align(),
                seed,
            },
            3 => Op::Zeroed {
                size: input.size(),
                align: input.align(),
                seed,
            },
            4..=5 => Op::Realloc {
                k: input.u16(),
                new: input.size(),
            },
            _ => Op::Free { k: input.u16() },
        }
    }
}

/// The same interpreter with threads: the input's first byte chooses 2 to 4 worker threads, and
/// each operation's own first byte which worker runs it (or that the worker exits and a fresh
/// thread takes its place). So blocks allocated on one thread are freed, reallocated and checked
/// on another, and threads exit while others still hold their blocks (their chunks are abandoned
/// and freed into). The driver waits for each operation, so a run is as deterministic as the
/// single-threaded one and the model stays exact.
pub fn run_threaded<A: GlobalAlloc + Sync>(alloc: &A, data: &[u8]) {
    use std::sync::Mutex;
    use std::sync::mpsc::{Receiver, Sender, channel};

    /// A worker, running operations until its channel closes, and how to reach it: its operation
    /// channel, its completion channel (closed if it panics) and its thread.
    type Worker<'scope> = (
        Sender<Op>,
        Receiver<()>,
        std::thread::ScopedJoinHandle<'scope, ()>,
    );
    fn spawn_worker<'scope, 'env, 'a: 'scope, A: GlobalAlloc + Sync>(
        s: &'scope std::thread::Scope<'scope, 'env>,
        shadow: &'scope Mutex<Shadow<'a, A>>,
    ) -> Worker<'scope> {
        let (tx, rx): (Sender<Op>, Receiver<Op>) = channel();
        let (done_tx, done_rx) = channel();
        let h = s.spawn(move || {
            for op in rx {
                shadow.lock().unwrap().apply(op);
                done_tx.send(()).unwrap();
            }
        });
        (tx, done_rx, h)
    }

    let mut input = Input(data);
    let n = 2 + usize::from(input.byte()) % 3;
    let shadow = Mutex::new(Shadow::new(alloc));
    std::thread::scope(|s| {
        let mut workers: Vec<Worker> = (0..n).map(|_| spawn_worker(s, &shadow)).collect();
        let mut seed = 0u8;
        while !input.done() {
            let who = usize::from(input.byte());
            let w = who % n;
            if who >= 240 {
                // This worker exits (its thread ends while its blocks live on) and a fresh one
                // takes its place.
                let (tx, _, h) = std::mem::replace(&mut workers[w], spawn_worker(s, &shadow));
                drop(tx);
                h.join().unwrap();
                continue;
            }
            seed = seed.wrapping_add(1);
            let op = Op::decode(&mut input, seed);
            workers[w].0.send(op).unwrap();
            if workers[w].1.recv().is_err() {
                // The worker panicked: its thread's join reports the panic.
                let (_, _, h) = workers.swap_remove(w);
                let e = h.join().unwrap_err();
                std::panic::resume_unwind(e);
            }
        }
        for (tx, _, h) in workers {
            drop(tx);
            h.join().unwrap();
        }
    });
    // Whatever is left is freed by this thread, which allocated none of it.
    shadow.into_inner().unwrap().free_all();
}

/// An `Allocator` (allocator-api2's: a `poolalloc::Heap`, a `RegionAlloc`) seen as a
/// `GlobalAlloc`, for the model.
pub struct AsGlobal<A>(pub A);

// SAFETY: forwards to the Allocator methods, whose contract is GlobalAlloc's here.
unsafe impl<A: Allocator> GlobalAlloc for AsGlobal<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.0
            .allocate(layout)
            .map_or(std::ptr::null_mut(), |p| p.as_ptr().cast())
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: p came from alloc with layout (the caller's contract).
        unsafe { self.0.deallocate(NonNull::new_unchecked(p), layout) }
    }
}
