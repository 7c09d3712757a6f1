//! realloc chains across classes and into large blocks and back, contents and alignment kept; and
//! realloc within a class keeps the pointer.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fn fill(p: *mut u8, from: usize, to: usize, seed: usize) {
    for i in from..to {
        // SAFETY: callers pass ranges inside the block.
        unsafe { *p.add(i) = (i ^ seed) as u8 };
    }
}

fn check(p: *mut u8, n: usize, seed: usize) {
    for i in 0..n {
        // SAFETY: callers pass n ≤ the block's size.
        assert_eq!(unsafe { *p.add(i) }, (i ^ seed) as u8, "byte {i} lost");
    }
}

#[test]
fn chains_grow_through_every_class_and_back() {
    for align in [1usize, 8, 16, 64, 4096] {
        let mut sizes = vec![1usize];
        while *sizes.last().unwrap() < 3 << 20 {
            let s = *sizes.last().unwrap();
            sizes.push(s + s / 3 + 1);
        }
        let down: Vec<usize> = sizes.iter().rev().skip(1).copied().collect();
        sizes.extend(down);
        let seed = align * 7;
        let mut size = sizes[0];
        // SAFETY: size > 0.
        let mut p = unsafe { GLOBAL.alloc(Layout::from_size_align(size, align).unwrap()) };
        fill(p, 0, size, seed);
        for &new in &sizes[1..] {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: p was allocated with l; new > 0 and rounds to a valid layout.
            p = unsafe { GLOBAL.realloc(p, l, new) };
            assert!(!p.is_null());
            assert_eq!(
                p as usize % align,
                0,
                "realloc {size} -> {new} lost alignment {align}"
            );
            check(p, size.min(new), seed);
            if new > size {
                fill(p, size, new, seed);
            }
            size = new;
        }
        // SAFETY: allocated (last) with this layout.
        unsafe { GLOBAL.dealloc(p, Layout::from_size_align(size, align).unwrap()) };
    }
}

#[test]
fn realloc_within_a_class_keeps_the_pointer() {
    // 100 and 110 B are both in the 112 B class; 1000 and 1020 B in the 1024 B class.
    for (a, b) in [(100usize, 110usize), (1000, 1020), (17, 24), (5000, 5100)] {
        let l = Layout::from_size_align(a, 8).unwrap();
        // SAFETY: a > 0; realloc of a live block with its layout.
        unsafe {
            let p = GLOBAL.alloc(l);
            fill(p, 0, a, 3);
            let q = GLOBAL.realloc(p, l, b);
            assert_eq!(p, q, "{a} -> {b} moved");
            check(q, a, 3);
            let r = GLOBAL.realloc(q, Layout::from_size_align(b, 8).unwrap(), a);
            assert_eq!(q, r);
            GLOBAL.dealloc(r, l);
        }
    }
}

#[test]
fn vec_and_string_growth() {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..1_000_000u64 {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<u64>>());
    let mut s = String::new();
    for i in 0..100_000 {
        s.push_str(&i.to_string());
    }
    assert!(s.starts_with("0123456789101112"));
}

#[test]
fn shrink_in_place_then_grow_back_within_the_slot() {
    // (first size, shrunk size, grown-back size, a size past the slot): 1000 B is in the 1024 B
    // slot, 600 B in the 640 B class but at least half the slot; and so on.
    for (a, b, c, past) in [
        (1000usize, 600usize, 1024usize, 1025usize),
        (120, 64, 128, 129),
        (30_000, 17_000, 32_768, 40_000),
        (48, 24, 40, 49),
    ] {
        let l = |s| Layout::from_size_align(s, 8).unwrap();
        // SAFETY: sizes > 0; each realloc is given the layout of the block's last size.
        unsafe {
            let p = GLOBAL.alloc(l(a));
            fill(p, 0, a, 5);
            let q = GLOBAL.realloc(p, l(a), b);
            assert_eq!(p, q, "{a} -> {b} moved");
            check(q, b, 5);
            let r = GLOBAL.realloc(q, l(b), c);
            assert_eq!(q, r, "{b} -> {c} moved: the slot holds {c}");
            check(r, b, 5);
            fill(r, b, c, 5);
            let s = GLOBAL.realloc(r, l(c), past);
            assert_ne!(r, s, "{c} -> {past} cannot fit the slot");
            check(s, c, 5);
            GLOBAL.dealloc(s, l(past));
        }
    }
}

#[test]
fn shrink_below_half_the_slot_moves_to_a_smaller_class() {
    // shrink_to_fit must give memory back: 1000 B (1024 B slot) down to 400 B moves to the 448 B
    // class; 8 B slots keep any size of their own class (a move would land in the same class).
    let l = |s| Layout::from_size_align(s, 8).unwrap();
    // SAFETY: sizes > 0; each realloc is given the layout of the block's last size.
    unsafe {
        let p = GLOBAL.alloc(l(1000));
        fill(p, 0, 1000, 9);
        let q = GLOBAL.realloc(p, l(1000), 400);
        assert_ne!(p, q, "1000 -> 400 kept a 1024 B slot for 400 B");
        check(q, 400, 9);
        GLOBAL.dealloc(q, l(400));
        let p = GLOBAL.alloc(l(8));
        let q = GLOBAL.realloc(p, l(8), 1);
        assert_eq!(p, q, "8 -> 1 moved within the 8 B class");
        GLOBAL.dealloc(q, l(1));
    }
}

/// The C library's realloc keeps a block only where its address has the alignment the new size
/// needs (16 bytes for 16 bytes and more, as malloc promises): a 24 B slot is 16-aligned only
/// every other slot. (Needs the `raw` feature, which the C library turns on: `cargo test
/// --workspace` has it.)
#[cfg(feature = "raw")]
#[test]
fn raw_realloc_in_place_keeps_malloc_alignment() {
    let blocks: Vec<*mut u8> = (0..64).map(|_| poolalloc::raw::alloc(20, 8)).collect();
    let (mut kept, mut moved) = (0, 0);
    for p in blocks {
        assert!(!p.is_null());
        fill(p, 0, 20, 11);
        // SAFETY: p is a live block of the raw interface; freed once below.
        let q = unsafe { poolalloc::raw::realloc(p, 16, 16) };
        assert_eq!(
            q as usize % 16,
            0,
            "realloc to 16 B lost malloc's alignment"
        );
        if q == p {
            kept += 1;
        } else {
            moved += 1;
        }
        check(q, 16, 11);
        // SAFETY: q is live and not used afterwards.
        unsafe { poolalloc::raw::free(q) };
    }
    assert!(kept > 0 && moved > 0, "kept {kept}, moved {moved}");
}

/// `String`/`Vec` growth and shrinking through the classes copies no more often under poolalloc
/// than under mimalloc: the same collection code runs on both (allocator-api2's `Vec`, which
/// grows as std's does), through an allocator that counts the reallocations that moved the block.
/// The sequence of requests is the same for both (the counter reports exactly the requested
/// length, never the slot's), so only the in-place decisions differ.
#[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
mod copies_against_mimalloc {
    use allocator_api2::alloc::{AllocError, Allocator};
    use allocator_api2::vec::Vec as AVec;
    use std::alloc::{GlobalAlloc, Layout};
    use std::cell::Cell;
    use std::ptr::NonNull;

    /// A `GlobalAlloc` as an allocator-api2 `Allocator`, counting reallocations and moves.
    struct Moves<A: 'static> {
        inner: &'static A,
        reallocs: Cell<usize>,
        moved: Cell<usize>,
    }

    impl<A: GlobalAlloc> Moves<A> {
        fn new(inner: &'static A) -> Self {
            Moves {
                inner,
                reallocs: Cell::new(0),
                moved: Cell::new(0),
            }
        }

        /// # Safety
        /// allocator-api2's `grow`/`shrink` contract.
        unsafe fn resize(
            &self,
            p: NonNull<u8>,
            old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            assert_eq!(old.align(), new.align(), "Vec keeps its alignment");
            if old.size() == 0 || new.size() == 0 {
                // SAFETY: p is live with layout old (caller); a zero-sized one is not a block.
                unsafe { self.deallocate(p, old) };
                return self.allocate(new);
            }
            // SAFETY: p is live with layout old; new.size() is non-zero with old's alignment.
            let q = unsafe { self.inner.realloc(p.as_ptr(), old, new.size()) };
            let q = NonNull::new(q).ok_or(AllocError)?;
            self.reallocs.set(self.reallocs.get() + 1);
            if q != p {
                self.moved.set(self.moved.get() + 1);
            }
            Ok(NonNull::slice_from_raw_parts(q, new.size()))
        }
    }

    // SAFETY: blocks come from `inner` and go back to it with the layout they were given; the
    // length reported is the one requested.
    unsafe impl<A: GlobalAlloc> Allocator for &Moves<A> {
        fn allocate(&self, l: Layout) -> Result<NonNull<[u8]>, AllocError> {
            if l.size() == 0 {
                let p = std::ptr::without_provenance_mut::<u8>(l.align());
                // SAFETY: an alignment is never zero.
                return Ok(NonNull::slice_from_raw_parts(
                    unsafe { NonNull::new_unchecked(p) },
                    0,
                ));
            }
            // SAFETY: l has a non-zero size.
            let p = unsafe { self.inner.alloc(l) };
            NonNull::new(p)
                .map(|p| NonNull::slice_from_raw_parts(p, l.size()))
                .ok_or(AllocError)
        }

        unsafe fn deallocate(&self, p: NonNull<u8>, l: Layout) {
            if l.size() != 0 {
                // SAFETY: p is live with layout l (caller).
                unsafe { self.inner.dealloc(p.as_ptr(), l) }
            }
        }

        unsafe fn grow(
            &self,
            p: NonNull<u8>,
            old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: forwarded contract.
            unsafe { self.resize(p, old, new) }
        }

        unsafe fn shrink(
            &self,
            p: NonNull<u8>,
            old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: forwarded contract.
            unsafe { self.resize(p, old, new) }
        }
    }

    /// Runs the collection code on allocator `a` with every capacity at most `top` bytes: per
    /// driver, the reallocations and how many moved the block.
    fn count<A: GlobalAlloc>(a: &'static A, top: usize) -> Vec<(&'static str, usize, usize)> {
        let mut out = Vec::new();
        let mut run = |name, f: &dyn Fn(&Moves<A>)| {
            let m = Moves::new(a);
            f(&m);
            out.push((name, m.reallocs.get(), m.moved.get()));
        };
        run("Vec<u8>::push", &|m| {
            let mut v = AVec::new_in(m);
            for i in 0..top {
                v.push(i as u8);
            }
            assert_eq!(v[top - 1], (top - 1) as u8);
        });
        run("Vec<u64>::push", &|m| {
            let mut v = AVec::new_in(m);
            for i in 0..top / 8 {
                v.push(i as u64);
            }
        });
        run("String-like push_str", &|m| {
            // What String::push_str does to its bytes: extend, amortised doubling.
            let mut v = AVec::new_in(m);
            let mut k = 0;
            while v.len() + 16 < top {
                v.extend_from_slice(&b"the quick brown fox"[..1 + k % 13]);
                k += 1;
            }
        });
        run("reserve_exact steps", &|m| {
            // A builder that grows by what it needs each time (every step a realloc).
            let mut v: AVec<u8, _> = AVec::new_in(m);
            let mut k = 0;
            while v.len() + 64 < top {
                let n = 1 + (k * 7) % 40;
                v.reserve_exact(n);
                v.extend(std::iter::repeat_n(k as u8, n));
                k += 1;
            }
        });
        run("truncate, shrink_to_fit, regrow", &|m| {
            // Up to 2/3 of top, so that regrowing to 1.5·n stays within top; about 220 lengths
            // (every 97 B for the classes).
            for n in (8..top * 2 / 3).step_by(top / 337) {
                let mut v = AVec::new_in(m);
                v.extend(std::iter::repeat_n(1u8, n));
                for keep in [n * 3 / 4, n / 2 + 1, n / 3 + 1] {
                    v.truncate(keep);
                    v.shrink_to_fit();
                    v.extend(std::iter::repeat_n(2u8, n - keep));
                    v.shrink_to_fit();
                }
                assert_eq!(v.len(), n);
            }
        });
        out
    }

    static POOL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
    static MI: mimalloc::MiMalloc = mimalloc::MiMalloc;

    fn table(top: usize) -> Vec<(&'static str, usize, usize, usize)> {
        let ours = count(&POOL, top);
        let theirs = count(&MI, top);
        let mut rows = Vec::new();
        eprintln!("sizes up to {top} B: driver, reallocs, moved under poolalloc, under mimalloc");
        for ((name, n, moved), (_, n_mi, moved_mi)) in ours.into_iter().zip(theirs) {
            eprintln!("  {name:<34} {n:>6} {moved:>6} {moved_mi:>6}");
            assert_eq!(n, n_mi, "{name}: the same requests under both");
            rows.push((name, n, moved, moved_mi));
        }
        rows
    }

    #[test]
    fn growth_through_the_classes_copies_no_more_often_than_mimalloc() {
        for (name, _, moved, moved_mi) in table(poolalloc::MAX_SMALL) {
            assert!(
                moved <= moved_mi,
                "{name}: {moved} moves under poolalloc, {moved_mi} under mimalloc"
            );
        }
        // Above the classes the block is the system allocator's (PoolAlloc's large blocks):
        // shown, not asserted, since glibc's in-place growth depends on what lies after it. A
        // large block shrunk into the classes always moves under PoolAlloc (its free will come
        // with a small layout, which the free path sends to the pools), where mimalloc keeps it
        // if it uses half the block: the one place where PoolAlloc copies more (README, realloc).
        table(256 << 10);
    }
}
