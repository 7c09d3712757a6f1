//! The OS refuses: each service that can fail is made to fail (`os::fault`), and every caller must
//! hand a null pointer to its own caller (or fall back, for a remap) while every other block stays
//! as it was. Unit tests only: the injected faults exist under `cfg(test)`.

use crate::{PoolAlloc, api::raw, os};
use core::alloc::{GlobalAlloc, Layout};

/// Marks a block's first and last words with `tag`.
fn mark(p: *mut u8, len: usize, tag: usize) {
    // SAFETY: p is a live block of at least len (≥ 16) bytes, 8-aligned.
    unsafe {
        p.cast::<usize>().write(tag);
        p.add(len - 8).cast::<usize>().write_unaligned(!tag);
    }
}

fn marked(p: *mut u8, len: usize, tag: usize) -> bool {
    // SAFETY: as in `mark`.
    unsafe {
        p.cast::<usize>().read() == tag && p.add(len - 8).cast::<usize>().read_unaligned() == !tag
    }
}

#[test]
fn refused_chunks_give_null_and_keep_every_block() {
    // The largest class: 7 slots a chunk, so the chunks at hand (retained ones, the free chunks
    // of the regions' units) run out after a few thousand blocks at most.
    let l = Layout::from_size_align(crate::MAX_SMALL, 8).unwrap();
    os::fault::fail_maps(usize::MAX);
    let mut blocks = Vec::new();
    let mut refused = false;
    for i in 0..20_000 {
        // SAFETY: a non-zero layout.
        let p = unsafe { PoolAlloc::new().alloc(l) };
        if p.is_null() {
            refused = true;
            break;
        }
        mark(p, l.size(), i);
        blocks.push(p);
    }
    os::fault::fail_maps(0);
    assert!(refused, "{} blocks and no refusal", blocks.len());
    for (i, &p) in blocks.iter().enumerate() {
        assert!(marked(p, l.size(), i), "block {i} changed");
    }
    // SAFETY: a non-zero layout.
    let q = unsafe { PoolAlloc::new().alloc(l) };
    assert!(!q.is_null(), "the OS gives again: so must we");
    blocks.push(q);
    for p in blocks {
        // SAFETY: each was allocated above with l and is freed once.
        unsafe { PoolAlloc::new().dealloc(p, l) };
    }
}

#[test]
fn refused_span_gives_null_and_keeps_other_spans() {
    let _turn = crate::memory::span::tests::turn();
    let keep = raw::malloc(3 << 20);
    assert!(!keep.is_null());
    mark(keep, 3 << 20, 0x5eed);
    os::fault::fail_maps(usize::MAX);
    os::fault::fail_remaps(usize::MAX);
    // Larger than any span the cache keeps: a fresh mapping, or a waiting span grown by a remap.
    let p = raw::malloc(300 << 20);
    os::fault::fail_remaps(0);
    os::fault::fail_maps(0);
    assert!(p.is_null());
    assert!(marked(keep, 3 << 20, 0x5eed));
    // SAFETY: keep is live, freed once.
    unsafe { raw::free(keep) };
}

#[test]
fn refused_remap_copies_instead() {
    let _turn = crate::memory::span::tests::turn();
    let len = 1 << 20;
    let p = raw::malloc(len);
    assert!(!p.is_null());
    // SAFETY: p holds len bytes.
    unsafe { core::ptr::write_bytes(p, 0xa5, len) };
    os::fault::fail_remaps(usize::MAX);
    // SAFETY: p is live; it is replaced by q.
    let q = unsafe { raw::realloc(p, 5 << 20, 16) };
    os::fault::fail_remaps(0);
    assert!(!q.is_null());
    // SAFETY: q holds at least 5 MiB, the first len copied from p.
    unsafe {
        assert!((0..len).step_by(4093).all(|i| *q.add(i) == 0xa5));
        assert_eq!(*q.add(len - 1), 0xa5);
        raw::free(q);
    }
}

#[test]
fn refused_remap_and_mapping_give_null_and_keep_the_block() {
    let _turn = crate::memory::span::tests::turn();
    // No waiting span that would hold the new size (an earlier test's; the copy into it needs no
    // call to the OS).
    crate::memory::span::expire(os::now_ms(), 0);
    // A span of its own mapping (above an arena's spans, which may grow in place into the
    // arena's free run after them with no call to the OS at all).
    let len = 5 << 20;
    let p = raw::malloc(len);
    assert!(!p.is_null());
    mark(p, len, 0xb10c);
    os::fault::fail_remaps(usize::MAX);
    os::fault::fail_maps(usize::MAX);
    // SAFETY: p is live; on failure it stays live.
    let q = unsafe { raw::realloc(p, 12 << 20, 16) };
    os::fault::fail_maps(0);
    os::fault::fail_remaps(0);
    assert!(q.is_null());
    assert!(marked(p, len, 0xb10c));
    // SAFETY: p is still live, freed once.
    unsafe { raw::free(p) };
}
