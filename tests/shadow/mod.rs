//! The shadow model: an interpreter of alloc / alloc_zeroed / realloc / dealloc operations decoded
//! from bytes, run on any `GlobalAlloc` and checked against a model of the live blocks. Shared by
//! the cargo-fuzz target `global_alloc` and by `tests/shadow_model.rs` (seeded inputs), so every CI
//! run exercises the same checks on stable.
//!
//! Checked: alignment; no overlap with any live block; contents kept by realloc up to
//! `min(old, new)`; zeroed memory really zero; every block's pattern intact when it is freed.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;

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
}

impl<'a, A: GlobalAlloc> Shadow<'a, A> {
    pub fn new(alloc: &'a A) -> Self {
        Shadow {
            alloc,
            live: BTreeMap::new(),
            live_bytes: 0,
        }
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
        let mut input = Input(data);
        let mut seed = 0u8;
        while !input.done() {
            seed = seed.wrapping_add(1);
            match input.byte() % 8 {
                0..=2 => {
                    let (size, align) = (input.size(), input.align());
                    if self.live_bytes + size > LIVE_LIMIT {
                        continue;
                    }
                    let l = Layout::from_size_align(size, align).unwrap();
                    // SAFETY: non-zero size.
                    let p = unsafe { self.alloc.alloc(l) };
                    self.admit(p, Block { size, align, seed });
                }
                3 => {
                    let (size, align) = (input.size(), input.align());
                    if self.live_bytes + size > LIVE_LIMIT {
                        continue;
                    }
                    let l = Layout::from_size_align(size, align).unwrap();
                    // SAFETY: non-zero size.
                    let p = unsafe { self.alloc.alloc_zeroed(l) };
                    assert!(!p.is_null());
                    // SAFETY: p holds size bytes.
                    let zeroed = unsafe { std::slice::from_raw_parts(p, size) };
                    assert!(
                        zeroed.iter().all(|&x| x == 0),
                        "alloc_zeroed({size}, {align}) not zero"
                    );
                    self.admit(p, Block { size, align, seed });
                }
                4..=5 => {
                    let k = input.u16();
                    let new = input.size();
                    let Some(a) = self.pick(k) else { continue };
                    if self.live_bytes + new > LIVE_LIMIT + self.live[&a].size {
                        continue;
                    }
                    let b = self.live.remove(&a).unwrap();
                    self.live_bytes -= b.size;
                    verify(a as *mut u8, b.seed, b.size, b.size, "before realloc");
                    let l = Layout::from_size_align(b.size, b.align).unwrap();
                    // SAFETY: a was allocated with l; new > 0 and fits a layout with this align.
                    let p = unsafe { self.alloc.realloc(a as *mut u8, l, new) };
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
                _ => {
                    let k = input.u16();
                    if let Some(a) = self.pick(k) {
                        self.free(a);
                    }
                }
            }
        }
        while let Some(a) = self.pick(0) {
            self.free(a);
        }
    }
}
