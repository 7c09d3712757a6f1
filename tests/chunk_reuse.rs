//! An empty chunk waiting in the chunk source is reused for another size class before any chunk is
//! mapped or a purged one faulted in again (a program whose sizes drift). Its own process: the
//! source's lists are process-wide.

use std::alloc::{GlobalAlloc, Layout};

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fn class_index(size: usize) -> usize {
    poolalloc::stats()
        .classes()
        .iter()
        .position(|c| c.slot_size >= size)
        .unwrap()
}

#[test]
fn an_empty_chunk_serves_another_class() {
    let small = Layout::from_size_align(48, 8).unwrap();
    let (cs, cb) = (class_index(48), class_index(2000));
    assert_eq!(poolalloc::stats().classes()[cs].slot_size, 48);
    // Four chunks' worth of 48-byte blocks, written (resident), then all freed: the chunks that
    // empty go to the source and wait there (one retained, the others for the purger).
    let n = 4 * (poolalloc::CHUNK_SIZE / 48);
    let blocks: Vec<*mut u8> = (0..n)
        .map(|_| {
            // SAFETY: the layout is non-zero in size.
            let p = unsafe { P.alloc(small) };
            assert!(!p.is_null());
            // SAFETY: p holds 48 bytes.
            unsafe { p.write_bytes(1, 48) };
            p
        })
        .collect();
    let mut bases: Vec<usize> = blocks
        .iter()
        .map(|&p| p as usize & !(poolalloc::CHUNK_SIZE - 1))
        .collect();
    bases.dedup();
    for &p in &blocks {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { P.dealloc(p, small) };
    }
    let before = poolalloc::stats();
    assert!(before.classes()[cs].retained_chunks >= 1, "{before}");
    assert_eq!(before.classes()[cb].chunks, 0, "{before}");

    // The first 2000-byte block needs a chunk of its class: it is one of the emptied ones.
    let big = Layout::from_size_align(2000, 8).unwrap();
    // SAFETY: the layout is non-zero in size.
    let p = unsafe { P.alloc(big) };
    assert!(!p.is_null());
    // SAFETY: p holds 2000 bytes.
    unsafe { p.write_bytes(2, 2000) };
    assert!(
        bases.contains(&(p as usize & !(poolalloc::CHUNK_SIZE - 1))),
        "a new chunk served the 2000-byte class"
    );
    // The statistics follow the chunk to its new class, exactly.
    let after = poolalloc::stats();
    assert_eq!(after.chunks, before.chunks, "{after}");
    assert_eq!(after.reserved_bytes, before.reserved_bytes, "{after}");
    assert_eq!(after.classes()[cs].chunks, before.classes()[cs].chunks - 1);
    assert_eq!(
        after.classes()[cs].retained_chunks,
        before.classes()[cs].retained_chunks - 1
    );
    assert_eq!(after.classes()[cb].chunks, 1, "{after}");
    assert_eq!(after.classes()[cb].live_slots, 1, "{after}");
    // SAFETY: allocated above with this layout, freed once.
    unsafe { P.dealloc(p, big) };
}
