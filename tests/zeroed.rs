//! `alloc_zeroed` returns zeroed memory even from slots that were dirtied and freed.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn zeroed_after_dirty_frees_of_the_same_class() {
    let mut sizes: Vec<usize> = poolalloc::class_sizes().to_vec();
    sizes.extend([1, 3, 7, 100, 1000, 40_000, 200_000, 3 << 20]);
    for &size in &sizes {
        for align in [1, 8, 64, 4096] {
            let l = Layout::from_size_align(size, align).unwrap();
            // Dirty a few blocks of the class and free them, so the next ones are recycled.
            let dirty: Vec<_> = (0..8)
                .map(|_| {
                    // SAFETY: size > 0; p holds size bytes.
                    unsafe {
                        let p = GLOBAL.alloc(l);
                        p.write_bytes(0xab, size);
                        p
                    }
                })
                .collect();
            for p in dirty {
                // SAFETY: allocated above with l.
                unsafe { GLOBAL.dealloc(p, l) };
            }
            for _ in 0..8 {
                // SAFETY: size > 0.
                let p = unsafe { GLOBAL.alloc_zeroed(l) };
                assert_eq!(p as usize % align, 0);
                // SAFETY: p holds size bytes.
                let s = unsafe { std::slice::from_raw_parts(p, size) };
                assert!(
                    s.iter().all(|&b| b == 0),
                    "size {size} align {align} not zeroed"
                );
                // SAFETY: allocated above with l.
                unsafe { GLOBAL.dealloc(p, l) };
            }
        }
    }
}

#[test]
fn zeroed_vectors_through_std() {
    for n in [1usize, 10, 100, 1000, 10_000, 100_000, 1 << 20] {
        let mut v = vec![0xffu8; n];
        v.iter_mut().for_each(|b| *b = 0xee);
        drop(v);
        let z = vec![0u8; n];
        assert!(z.iter().all(|&b| b == 0));
    }
}
