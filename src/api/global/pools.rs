//! `PoolAlloc`'s data path where the pools run: small requests to the calling thread's heap, large
//! or over-aligned ones to `large` (the system allocator or spans, `LargeBlocks`). Each method has
//! GlobalAlloc's contract for the method of the same name; the optional checks, hooks and profiler
//! are called through `checks` (no-ops without their features).

use super::PoolAlloc;
use crate::base::size_class::{self, class_of};
use crate::{checks, chunks::chunk, thread::heap};
use core::alloc::Layout;
use core::ptr;

/// `plain_alloc` beyond the common case. Size first, where the fast path holds it.
///
/// # Safety
/// `size` and `align` form a valid layout of non-zero size.
#[inline(never)]
unsafe fn alloc_rest(size: usize, align: usize) -> *mut u8 {
    match class_of(size, align) {
        Some(c) => small_alloc(c, size),
        // SAFETY: a valid, non-zero layout (caller).
        None => unsafe { heap::large_alloc(Layout::from_size_align_unchecked(size, align), false) },
    }
}

/// `plain_alloc` above the common sizes, aligned to at most 8: [`alloc_rest`] under another
/// name, so that the fast path's two tests keep two destinations.
///
/// # Safety
/// As [`alloc_rest`].
#[inline(never)]
unsafe fn alloc_above_common(size: usize, align: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe { alloc_rest(size, align) }
}

/// `pool_dealloc` beyond `size_class::is_small_common`: a large block, or a small one of the
/// 64 KiB class.
///
/// # Safety
/// As `GlobalAlloc::dealloc`, `layout` being the block's.
#[inline(never)]
unsafe fn dealloc_rest(ptr: *mut u8, layout: Layout) {
    if size_class::is_small(layout.size(), layout.align()) {
        // SAFETY: a small block; forwarded contract.
        unsafe { slot_dealloc(ptr, layout) }
    } else {
        // SAFETY: a large block; forwarded contract.
        unsafe { heap::large_dealloc(ptr, layout) }
    }
}

/// The free of a small block (a slot).
///
/// # Safety
/// As `GlobalAlloc::dealloc`, `ptr` being a small block of `layout`.
#[inline(always)]
unsafe fn slot_dealloc(ptr: *mut u8, layout: Layout) {
    checks::on_slot_free(ptr, layout);
    // SAFETY: ptr is a live small block (caller's contract); its chunk header names its class,
    // which the layout's is (checked with `hardened`).
    unsafe { heap::dealloc(ptr, layout.size()) }
}

/// A block of class `c` for a request of `size` bytes (null when out of memory).
#[inline(always)]
fn small_alloc(c: usize, size: usize) -> *mut u8 {
    let p = heap::alloc(c, size);
    if !p.is_null() {
        checks::on_hand_out(p, c);
    }
    p
}

// The `plain_*` methods are the data path without the `testing` hooks (the `watched_*` ones add
// them); nothing to do with the `raw` module. Each has GlobalAlloc's contract for its method.
impl PoolAlloc {
    #[inline(always)]
    pub(super) unsafe fn plain_alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { self.pool_alloc(layout) };
        // With `profiling`, every block passes the sampler's countdown (one subtract, one branch).
        checks::on_alloc(p, layout.size());
        p
    }

    #[inline(always)]
    unsafe fn pool_alloc(&self, layout: Layout) -> *mut u8 {
        // The common case (`size_class::class_of_common`) straight through (no branch joins it:
        // one jump fewer), its chunk found by the size (`heap::alloc_common`), the rest out of
        // line. Two tests with two different destinations: with one, the compiler joins them
        // into a `setcc` pair and a `test` (two instructions more).
        if layout.align() > 8 {
            // SAFETY: forwarded contract.
            return unsafe { alloc_rest(layout.size(), layout.align()) };
        }
        if layout.size() > size_class::COMMON_MAX {
            // SAFETY: forwarded contract.
            return unsafe { alloc_above_common(layout.size(), layout.align()) };
        }
        let p = heap::alloc_common(layout.size());
        if !p.is_null() {
            // `hardened` wants the class: found from the size (no code without the feature).
            if let Some(c) = size_class::class_of_common(layout.size(), layout.align()) {
                checks::on_hand_out(p, c);
            }
        }
        p
    }

    #[inline(always)]
    pub(super) unsafe fn plain_dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Once the profiler has recorded a block, frees go out of line past its records (a tail
        // call: the fast path keeps no register for it).
        if checks::frees_recorded() {
            // SAFETY: forwarded contract.
            return unsafe { self.profiled_dealloc(ptr, layout) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.pool_dealloc(ptr, layout) }
    }

    /// A free while the profiler holds records: the block's record (if any) goes first.
    #[inline(never)]
    unsafe fn profiled_dealloc(&self, ptr: *mut u8, layout: Layout) {
        checks::on_free(ptr);
        // SAFETY: forwarded contract.
        unsafe { self.pool_dealloc(ptr, layout) }
    }

    #[inline(always)]
    unsafe fn pool_dealloc(&self, ptr: *mut u8, layout: Layout) {
        // One test (three instructions; `size_class::is_small`'s two compares take four, or six
        // when the compiler joins them into `setcc` pairs) for nearly every
        // small block; the rest (large blocks, and the sizes of the 64 KiB class within
        // `align - 1` of it) out of line, where the exact test sends them on.
        if !size_class::is_small_common(layout.size(), layout.align()) {
            // SAFETY: forwarded contract.
            return unsafe { dealloc_rest(ptr, layout) };
        }
        // SAFETY: a small block; forwarded contract.
        unsafe { slot_dealloc(ptr, layout) }
    }

    #[inline(always)]
    pub(super) unsafe fn plain_alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = match class_of(layout.size(), layout.align()) {
            Some(c) => {
                let p = heap::alloc(c, layout.size());
                if !p.is_null() {
                    checks::on_hand_out(p, c);
                    // A recycled slot is dirty (at least its link word), so zero what was asked for.
                    // SAFETY: p is a fresh slot of at least layout.size() bytes.
                    unsafe { ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
            // SAFETY: forwarded contract.
            None => unsafe { heap::large_alloc(layout, true) },
        };
        checks::on_alloc(p, layout.size());
        p
    }

    pub(super) unsafe fn plain_realloc(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let small = size_class::is_small(layout.size(), layout.align());
        if small {
            checks::check_live(ptr, layout.size(), layout.align());
            // The slot's own class, from its chunk header: the layout's class, unless an earlier
            // realloc shrank the block in place (`size_class::stays`).
            // SAFETY: ptr is a live small block (caller's contract; checked with `hardened`), so
            // its chunk header is mapped, and its class does not change while the block lives.
            let c = unsafe { (*chunk::of(ptr)).class } as usize;
            if size_class::stays(c, new_size, layout.align(), ptr as usize) {
                // The block stays in its slot (its chunk counts it), with its new requested size.
                // SAFETY: ptr is a live small block (caller's contract).
                unsafe { heap::resized(ptr, layout.size(), new_size) };
                // The profiler sees the block freed and allocated again at its new size.
                checks::on_resize_in_place(ptr, new_size);
                return ptr;
            }
        } else {
            checks::on_large_free(ptr, true);
        }
        let new_small = size_class::is_small(new_size, layout.align());
        match (small, new_small) {
            (false, false) => {
                // Forgotten before the system frees it (its address may then be handed out again).
                checks::on_free(ptr);
                // SAFETY: both sizes are large; forwarded contract.
                let q = unsafe { heap::large_realloc(ptr, layout, new_size) };
                checks::on_alloc(q, new_size);
                q
            }
            _ => {
                // SAFETY: the caller guarantees new_size with layout.align() forms a valid layout.
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let q = if small && !new_small {
                    // Out of the classes: a large block likely to grow again (`alloc_grown`).
                    // SAFETY: new_layout is valid, large (caller).
                    let q = unsafe { heap::large_alloc_grown(new_layout) };
                    checks::on_alloc(q, new_size);
                    q
                } else {
                    // SAFETY: new_layout is valid and non-zero in size (caller).
                    unsafe { self.plain_alloc(new_layout) }
                };
                if !q.is_null() {
                    // SAFETY: both blocks hold at least min(old, new) bytes and are distinct.
                    unsafe {
                        ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.plain_dealloc(ptr, layout);
                    }
                }
                q
            }
        }
    }
}

/// The usable size of a block allocated with `layout`: its slot size, or the request for large
/// blocks.
#[inline]
pub fn usable_size(layout: Layout) -> usize {
    match class_of(layout.size(), layout.align()) {
        Some(c) => size_class::size_of(c),
        None => layout.size(),
    }
}
