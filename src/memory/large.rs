//! Large blocks: requests above the largest size class, or aligned beyond what a class can give.
//! They come from one of two places ([`settings::LargeBlocks`]): the system allocator
//! (`std::alloc::System`: malloc, posix_memalign, realloc, calloc), which `SystemKept` tells once
//! to keep freed blocks for reuse (`os::keep_system_allocator_blocks`), or spans of our own
//! (`span.rs`, the C library's large blocks too: a run cut from an arena up to `arena::MAX_RUN`,
//! a mapping of its own above it; freed ones kept resident for reuse until the purge delay passes,
//! resized in place or by moving pages). The setting picks where a *new*
//! block comes from; a block is freed or resized where it came from, told by the address map (span
//! granules are marked there; a system block's are not), so the setting may change at any time.
//!
//! This is the one entry for large blocks: `PoolAlloc` (through the thread heap) calls
//! [`alloc`], [`alloc_zeroed`], [`dealloc`] and [`realloc`]; the size-less interface (`raw`, the C
//! library), whose large blocks are always spans, calls the span functions under them
//! ([`span_alloc`], [`span_free`], [`span_resize`]; and `span`'s own questions, `is_block`,
//! `usable`, `stays`), so a freed or resized span follows one rule for what waits and one start
//! of the purger, whoever frees it.
//!
//! Not counted here: the callers count through their thread's heap (`heap::large_alloc` & co.,
//! no atomic read-modify-write). The memory promise holds either way: freed spans wait at most
//! the purge delay (`span::expire`, from the purger's tick); a system block freed tells the purger,
//! which trims the system allocator once the program stopped freeing large blocks for the purge
//! delay (see `purge.rs`).

use crate::base::settings::{self, LargeBlocks};
use crate::chunks::addr_map::{self, Kind};
use crate::{checks::hardened, memory::purge, memory::span, os};
use core::alloc::{GlobalAlloc, Layout};
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};
use std::alloc::System;

/// A large block went back to the system allocator: the purger will trim it once it is quiet.
#[inline]
fn after_system_free() {
    purge::note_system_free();
    purge::running();
}

#[inline]
fn checked(p: *mut u8) -> *mut u8 {
    if !p.is_null() {
        hardened::on_large_alloc(p);
    }
    p
}

/// Whether new large blocks are spans (else the system allocator's, which this tells to keep
/// freed blocks the first time the setting asks for it).
#[inline]
fn spans() -> bool {
    match settings::large_blocks() {
        LargeBlocks::Spans => true,
        LargeBlocks::SystemKept => {
            keep_once();
            false
        }
        LargeBlocks::System => false,
    }
}

/// Tells the system allocator to keep freed large blocks, once per process.
#[inline]
fn keep_once() {
    static KEPT: AtomicBool = AtomicBool::new(false);
    if !KEPT.load(Ordering::Relaxed) && !KEPT.swap(true, Ordering::Relaxed) {
        os::keep_system_allocator_blocks();
    }
}

/// Whether the live large block `p` is a span (else it is the system allocator's).
#[inline]
fn is_span(p: *mut u8) -> bool {
    addr_map::kind_of(p) == Kind::Span
}

/// A span block of at least `size` bytes (non-zero) aligned to `align` (a power of two), its first
/// `size` bytes zeroed when `zeroed` (only a reused span needs it: fresh memory is zero); null
/// when out of memory or the size is absurd.
pub fn span_alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    span_alloc_in(size, align, zeroed, true)
}

/// [`span_alloc`] for a block that grew out of the size classes (`span::alloc_grown`).
pub fn span_alloc_grown(size: usize, align: usize) -> *mut u8 {
    span_alloc_in(size, align, false, false)
}

fn span_alloc_in(size: usize, align: usize, zeroed: bool, arena_ok: bool) -> *mut u8 {
    let (p, fresh) = if arena_ok {
        span::alloc(size, align)
    } else {
        span::alloc_grown(size, align)
    };
    if zeroed && !fresh && !p.is_null() {
        // SAFETY: p is a live span block of at least `size` bytes, ours alone.
        unsafe { ptr::write_bytes(p, 0, size) };
    }
    p
}

/// Frees the span block `p`: it waits for reuse as `span::release` says (only while the purger
/// can give it back later, and this starts it). Its usable size, or None when `p` is not a live
/// span block (nothing is done then).
///
/// # Safety
/// `p` is in a granule the address map marks as a span's; if it is a live block, nobody uses it
/// after this.
pub unsafe fn span_free(p: *mut u8) -> Option<usize> {
    let may_wait = purge::running();
    // SAFETY: forwarded.
    unsafe { span::free(p, may_wait) }
}

/// Resizes the live span block `p` to `new_size` bytes, keeping its contents and alignment: in
/// place when its usable size still fits well, else by growing or shrinking its span, moving its
/// pages or copying into another span (what it gives up waits as [`span_free`]'s does). The block
/// and its usable size, or None when out of memory (`p` is untouched then; the caller may copy
/// into a block of its own).
///
/// # Safety
/// `p` is a live span block; `new_size` is non-zero.
pub unsafe fn span_resize(p: *mut u8, new_size: usize) -> Option<(*mut u8, usize)> {
    // SAFETY: p is a live span block (caller).
    unsafe {
        if span::stays(p, new_size) {
            return Some((p, span::usable(p)));
        }
        let (q, usable) = span::resize(p, new_size, purge::running());
        (!q.is_null()).then_some((q, usable))
    }
}

/// A new large block of `layout` from the source the setting names, zeroed when `zeroed`; null
/// when out of memory.
///
/// # Safety
/// `layout` has a non-zero size.
unsafe fn fresh(layout: Layout, zeroed: bool) -> *mut u8 {
    if spans() {
        span_alloc(layout.size(), layout.align(), zeroed)
    } else {
        // SAFETY: forwarded contract.
        unsafe { system(layout, zeroed) }
    }
}

/// A new block of `layout` from the system allocator, zeroed when `zeroed`.
///
/// # Safety
/// `layout` has a non-zero size.
unsafe fn system(layout: Layout, zeroed: bool) -> *mut u8 {
    if zeroed {
        // SAFETY: a non-zero layout (caller); calloc knows which pages are fresh and need no
        // zeroing.
        unsafe { System.alloc_zeroed(layout) }
    } else {
        // SAFETY: a non-zero layout (caller).
        unsafe { System.alloc(layout) }
    }
}

/// # Safety
/// As `GlobalAlloc::alloc`.
pub unsafe fn alloc(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    checked(unsafe { fresh(layout, false) })
}

/// # Safety
/// As `GlobalAlloc::alloc_zeroed`.
pub unsafe fn alloc_zeroed(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    checked(unsafe { fresh(layout, true) })
}

/// [`alloc`] for a block that grew out of the size classes (a `realloc`): where large blocks are
/// spans, one that `mremap` can grow ([`span_alloc_grown`]).
///
/// # Safety
/// As `GlobalAlloc::alloc`.
pub unsafe fn alloc_grown(layout: Layout) -> *mut u8 {
    if spans() {
        checked(span_alloc_grown(layout.size(), layout.align()))
    } else {
        // SAFETY: forwarded contract.
        checked(unsafe { system(layout, false) })
    }
}

/// # Safety
/// As `GlobalAlloc::dealloc`, for a block from this module.
pub unsafe fn dealloc(p: *mut u8, layout: Layout) {
    hardened::on_large_free(p, false);
    if is_span(p) {
        // SAFETY: forwarded contract; the address map says p's granule is a span's. (A pointer
        // that is not a live block's start was caught by hardened's table above; without it,
        // nothing is done for one.)
        unsafe { span_free(p) };
    } else {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, layout) };
        after_system_free();
    }
}

/// Resizes the span block `p` (of `layout`) to `new_size` bytes, keeping its alignment: in place
/// when its usable size still fits well, else by moving the span's pages, else by a copy into a
/// new block. Null when out of memory (`p` is untouched then).
///
/// # Safety
/// `p` is a live span block of `layout`; `new_size` is large and valid for `layout.align()`.
unsafe fn span_realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: p is a live span block (caller); the span keeps the offset, so the alignment, its
    // block had.
    if let Some((q, _)) = unsafe { span_resize(p, new_size) } {
        return q;
    }
    // SAFETY: new_size (large, so non-zero) with layout's alignment is a valid layout (caller).
    let q = unsafe {
        fresh(
            Layout::from_size_align_unchecked(new_size, layout.align()),
            false,
        )
    };
    if !q.is_null() {
        // SAFETY: both blocks hold min(old, new) bytes and are distinct; p is ours to free.
        unsafe {
            ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
            span_free(p);
        }
    }
    q
}

/// # Safety
/// As `GlobalAlloc::realloc`, for a block from this module that stays large.
pub unsafe fn realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // Off the hardened table of live blocks before the block may be freed: its address can be
    // handed to another thread at once, whose block must then not be taken off the table by us.
    hardened::on_large_free(p, false);
    let q = if is_span(p) {
        // SAFETY: forwarded contract; p's granule is a span's.
        unsafe { span_realloc(p, layout, new_size) }
    } else {
        // SAFETY: forwarded contract.
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            after_system_free();
        }
        q
    };
    if q.is_null() {
        // `p` lives on unchanged.
        hardened::on_large_alloc(p);
    } else {
        hardened::on_large_alloc(q);
    }
    q
}
