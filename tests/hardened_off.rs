//! Without the `hardened` feature none of its checks is compiled in: free-list links are stored raw
//! and freed slots are not poisoned. This documents (and guards) that normal use pays nothing.
#![cfg(not(feature = "hardened"))]

use std::alloc::{GlobalAlloc, Layout};

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn links_are_raw_and_freed_slots_are_not_poisoned() {
    let l = Layout::from_size_align(64, 8).unwrap();
    // Run on a fresh thread so it owns a fresh chunk: both frees are the owner's, onto the chunk's
    // local free list (LIFO).
    std::thread::spawn(move || {
        // SAFETY: blocks are allocated and freed once with their layout; reading a freed slot reads
        // memory the allocator keeps mapped (the link word it wrote and bytes it left alone).
        unsafe {
            let a = P.alloc(l);
            let b = P.alloc(l);
            a.write_bytes(0x5a, 64);
            b.write_bytes(0x5a, 64);
            P.dealloc(a, l);
            P.dealloc(b, l);
            // b is on top of the local free list and its first word is the plain address of a.
            assert_eq!(b.cast::<usize>().read(), a as usize);
            // The rest of the freed slot is untouched: no poison pattern written.
            assert!((8..64).all(|i| b.add(i).read() == 0x5a));
        }
    })
    .join()
    .unwrap();
}
