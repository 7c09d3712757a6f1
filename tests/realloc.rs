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
