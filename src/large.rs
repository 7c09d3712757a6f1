//! Large blocks: requests above the largest size class, or aligned beyond what a class can give, go
//! to the system allocator (`std::alloc::System`: malloc, posix_memalign, realloc, calloc). Counts
//! are kept per thread like the small classes' (no atomic read-modify-write), in the thread's heap.
//! A free (or a realloc, which may free) tells the purger, which trims the system allocator once
//! the program stopped freeing large blocks for the purge delay (see `purger.rs`): the memory
//! promise holds for large blocks too.

use crate::{hardened, heap, purger, source};
use core::alloc::{GlobalAlloc, Layout};
use std::alloc::System;

#[inline]
fn count(add: bool, size: usize) {
    heap::count_large(add, size);
}

/// A large block went back to the system allocator: the purger will trim it once it is quiet.
#[inline]
fn given_back() {
    purger::note_system_free();
    source::ensure_purger();
}

#[inline]
fn counted(p: *mut u8, size: usize) -> *mut u8 {
    if !p.is_null() {
        hardened::on_large_alloc(p);
        count(true, size);
    }
    p
}

/// # Safety
/// As `GlobalAlloc::alloc`.
pub unsafe fn alloc(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    counted(unsafe { System.alloc(layout) }, layout.size())
}

/// # Safety
/// As `GlobalAlloc::alloc_zeroed`.
pub unsafe fn alloc_zeroed(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract (calloc knows which pages are fresh and need no zeroing).
    counted(unsafe { System.alloc_zeroed(layout) }, layout.size())
}

/// # Safety
/// As `GlobalAlloc::dealloc`, for a block from this module.
pub unsafe fn dealloc(p: *mut u8, layout: Layout) {
    hardened::on_large_free(p, false);
    count(false, layout.size());
    // SAFETY: forwarded contract.
    unsafe { System.dealloc(p, layout) };
    given_back();
}

/// # Safety
/// As `GlobalAlloc::realloc`, for a block from this module that stays large.
pub unsafe fn realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // Off the hardened table of live blocks before the system may free `p`: its address can be
    // handed to another thread at once, whose block must then not be taken off the table by us.
    hardened::on_large_free(p, false);
    // SAFETY: forwarded contract.
    let q = unsafe { System.realloc(p, layout, new_size) };
    if q.is_null() {
        // `p` lives on unchanged.
        hardened::on_large_alloc(p);
    } else {
        hardened::on_large_alloc(q);
        count(false, layout.size());
        count(true, new_size);
        given_back();
    }
    q
}

/// (live large blocks, their requested bytes, large blocks allocated since start, their bytes).
pub fn counts() -> [usize; 4] {
    // A snapshot racing with frees on other threads can see a transiently "negative" sum.
    let clamp = |x: usize| if x > isize::MAX as usize { 0 } else { x };
    heap::large_totals().map(clamp)
}
