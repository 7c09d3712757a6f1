//! The size-less interface: blocks freed, measured and resized by their address alone, as C's
//! `malloc` family needs (the `poolalloc-c` package is a thin layer over this module).
//!
//! A pointer leads to its block through the address map: in one of our chunks, its class is in the
//! chunk's header; in one of our large spans, its size is in the span's header; anywhere else it
//! is *foreign* (handed out before poolalloc was loaded, or by the dynamic loader's own early
//! allocator) and is never written: [`free`] leaves it alone and [`realloc`] copies what it can
//! read of it.
//!
//! Unlike [`PoolAlloc`](crate::PoolAlloc), which hands large blocks to the system allocator, this
//! interface serves them from spans of its own (`span` module), since in a process where it
//! replaces `malloc` it *is* the system allocator. In the statistics a small block counts as a
//! live slot with no requested bytes (no size comes back with a free, and keeping the count would
//! cost the fast paths); a large block counts at its usable size.

use crate::base::size_class::{self, class_of};
use crate::chunks::addr_map::{self, Kind};
use crate::{
    api::stats, base::settings, checks, chunks::chunk, memory::large, memory::span, os,
    thread::heap,
};
use core::ptr;

/// A block of at least `size` bytes (at least one) aligned to `align` (a power of two); null when
/// out of memory or when `size` is too large to ever be served.
#[inline(always)]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    debug_assert!(align.is_power_of_two());
    // A block any access to faults for size 0 (`hardened`).
    let p = checks::zero_size_block(size, align);
    if !p.is_null() {
        return p;
    }
    let size = size.max(1);
    let p = match class_of(checks::padded(size), align) {
        Some(c) => small(c, size),
        None => new_large(size, align, Large::Plain),
    };
    checks::on_alloc(p, size);
    p
}

/// A slot of class `c` for a request of `n` bytes (`hardened-full`: its canary after them).
#[inline(always)]
fn small(c: usize, n: usize) -> *mut u8 {
    crate::api::stats::note_unsized();
    let p = heap::alloc_unsized(c);
    if !p.is_null() {
        checks::on_hand_out(p, c);
        checks::on_request(p, c, n, span::is_block);
    }
    p
}

/// What a new large block is for.
#[derive(Clone, Copy)]
enum Large {
    Plain,
    /// Its first bytes zeroed.
    Zeroed,
    /// A block that grew out of the classes ([`large::span_alloc_grown`]).
    Grown,
}

#[cold]
fn new_large(size: usize, align: usize, how: Large) -> *mut u8 {
    let p = match how {
        Large::Plain => large::span_alloc(size, align, false),
        Large::Zeroed => large::span_alloc(size, align, true),
        Large::Grown => large::span_alloc_grown(size, align),
    };
    if !p.is_null() {
        // SAFETY: p is a live span block just allocated.
        heap::count_large(true, unsafe { span::usable(p) });
        checks::on_raw_large(p, ptr::null_mut(), span::is_block);
    }
    p
}

/// A block of at least `size` bytes (at least one) aligned as C's `malloc` promises: 16 bytes for
/// blocks of 16 bytes or more, 8 below. The `malloc` fast path: one table lookup for the class.
#[inline(always)]
pub fn malloc(size: usize) -> *mut u8 {
    // A block any access to faults for size 0 (`hardened`), where the OS gives such memory.
    let p = checks::zero_size_block(size, 16);
    if !p.is_null() {
        return p;
    }
    let p = match size_class::class_of_malloc(checks::padded(size)) {
        Some(c) => small(c, size),
        None => new_large(size, 16, Large::Plain),
    };
    checks::on_alloc(p, size);
    p
}

/// As [`alloc`], with the first `size` bytes zeroed.
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    // A block any access to faults for size 0 (`hardened`).
    let p = checks::zero_size_block(size, align);
    if !p.is_null() {
        return p;
    }
    let size = size.max(1);
    let p = match class_of(checks::padded(size), align) {
        Some(c) => {
            let p = small(c, size);
            if !p.is_null() {
                // A recycled slot is dirty; zero what was asked for (the canary lies after it).
                // SAFETY: p is a fresh slot of at least size bytes.
                unsafe { ptr::write_bytes(p, 0, size) };
            }
            p
        }
        // A reused span is zeroed there; fresh memory is zero already.
        None => new_large(size, align, Large::Zeroed),
    };
    checks::on_alloc(p, size);
    p
}

/// Whose a pointer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// A slot of class `c` (or a pointer into one of our chunks).
    Small(usize),
    /// The start of a live span block.
    Large,
    /// Not a block of ours.
    Foreign,
}

#[inline(always)]
fn owner(p: *mut u8) -> Owner {
    match addr_map::kind_of(p) {
        // SAFETY: the map says p's granule is one of our mapped chunks, so its header is readable.
        Kind::Chunk => Owner::Small(unsafe { (*chunk::of(p)).class } as usize),
        Kind::Span if span::is_block(p) => Owner::Large,
        Kind::Span => {
            checks::on_invalid_pointer(p, "free or realloc");
            Owner::Foreign
        }
        Kind::Foreign => Owner::Foreign,
    }
}

/// True when `p` is a block this allocator handed out (or points into one of its chunks).
pub fn owns(p: *mut u8) -> bool {
    !p.is_null() && owner(p) != Owner::Foreign
}

/// Frees `p`. Null and foreign pointers are left alone.
///
/// # Safety
/// `p` is null, foreign, or a live block from this module that nobody uses afterwards.
#[inline(always)]
pub unsafe fn free(p: *mut u8) {
    if p.is_null() {
        return;
    }
    checks::on_free(p);
    match owner(p) {
        // SAFETY: p is a live slot of class c (caller), allocated unsized.
        Owner::Small(c) => unsafe { free_slot(p, c) },
        // SAFETY: p is a live span block (caller; checked by owner).
        Owner::Large => unsafe { free_large(p) },
        Owner::Foreign => checks::on_foreign(p, "free"),
    }
}

/// Frees `p`, a block that [`malloc`] (`align` 0) or [`alloc`] (`align`, a power of two) handed
/// out for `size` bytes and that was never resized (C++'s sized `operator delete`). The size says
/// whether the block is a slot, so the address map is not consulted for it: the slot's class is
/// read from its chunk header as in [`free`], so a size that names the wrong class is harmless,
/// but one that names a slot for a large or foreign block is not (with `hardened`, that aborts).
///
/// # Safety
/// `p` is null, or a live block from [`malloc`]/[`alloc`] with exactly these arguments (a block
/// [`realloc`] kept in place does not qualify: its size no longer names its kind), not used after.
#[inline(always)]
pub unsafe fn free_sized(p: *mut u8, size: usize, align: usize) {
    let small = if align == 0 {
        size_class::class_of_malloc(checks::padded(size))
    } else {
        class_of(checks::padded(size.max(1)), align)
    };
    match small {
        // Checks that p is a live slot of our chunks of class c (the size names it).
        // SAFETY: p is a live slot (caller: the size names a class, so it came from a chunk).
        Some(c) if !p.is_null() => unsafe { free_slot(p, c) },
        // SAFETY: forwarded contract (null, or a large block found through the address map).
        _ => unsafe { free(p) },
    }
}

/// Frees `p`, a slot of class `c` (or, for the checks, a pointer into a chunk of that class): the
/// checks see it first (`hardened`); with `hardened-full` it waits in quarantine and the block
/// it pushes out is freed instead.
///
/// # Safety
/// `p` is a live slot of class `c` from this module, not used afterwards.
#[inline(always)]
unsafe fn free_slot(p: *mut u8, c: usize) {
    let q = checks::on_raw_slot_free(p, c);
    if !q.is_null() {
        // SAFETY: q is p, or a slot of this module that left the quarantine: freed by its
        // program, never handed out since.
        unsafe { heap::dealloc_unsized(q) }
    }
}

#[cold]
unsafe fn free_large(p: *mut u8) {
    // SAFETY: p is a live span block (caller; `owner` found its header, checking its canaries).
    let q = checks::on_raw_large_free(p, || unsafe { span::usable(p) });
    if q.is_null() {
        return;
    }
    // SAFETY: q is p, or a span block that left the quarantine (freed by its program, its
    // header intact: read-only meanwhile).
    if let Some(usable) = unsafe { large::span_free(q) } {
        heap::count_large(false, usable);
    }
}

/// The usable size of block `p` (at least what was asked for; all of it may be used), or None
/// when `p` is null or not a block of ours.
///
/// # Safety
/// `p` is null, foreign, or a live block from this module.
pub unsafe fn usable_size(p: *mut u8) -> Option<usize> {
    if p.is_null() {
        return None;
    }
    match owner(p) {
        // With `hardened-full`, the request (its canary checked): what lies past it is the canary.
        Owner::Small(c) => Some(checks::request_of(p, c)),
        // SAFETY: a live span block (owner checked its header).
        Owner::Large => Some(unsafe { span::usable(p) }),
        Owner::Foreign => None,
    }
}

/// Resizes `p` to `new_size` bytes (at least one) aligned to `align`, keeping its contents up to
/// the smaller size: in place when the block still fits well, else by moving it. Null when out of
/// memory (then `p` is untouched). A null `p` allocates. A foreign `p` is copied (as much of
/// `new_size` bytes as can be read from it) into a new block and left alone.
///
/// # Safety
/// `p` is null, foreign, or a live block from this module; when the result is not null and not
/// `p`, `p` is freed (unless foreign).
pub unsafe fn realloc(p: *mut u8, new_size: usize, align: usize) -> *mut u8 {
    if p.is_null() {
        return alloc(new_size, align);
    }
    let new_size = new_size.max(1);
    let owner = owner(p);
    let old = match owner {
        Owner::Small(c) => {
            checks::check_live(p, size_class::size_of(c), 1);
            checks::check_not_quarantined(p, Some(c));
            // The slot's size; with `hardened-full`, the request (its canary checked).
            let usable = checks::request_of(p, c);
            // The in-place rule PoolAlloc's realloc uses: the slot holds the new size with its
            // alignment, and the size is of the slot's class or uses at least half of it.
            if size_class::stays(c, checks::padded(new_size), align, p as usize) {
                checks::on_request(p, c, new_size, span::is_block);
                return resized_in_place(p, new_size);
            }
            usable
        }
        Owner::Large => {
            checks::check_not_quarantined(p, None);
            // SAFETY: a live span block.
            if unsafe { span::stays(p, new_size) } {
                return resized_in_place(p, new_size);
            }
            // SAFETY: as above.
            let usable = unsafe { span::usable(p) };
            if class_of(new_size, align).is_none() {
                // Stays large: resize the span (in place, by moving pages, or by a copy into another).
                checks::on_free(p);
                // SAFETY: a live span block; the span keeps the alignment its block had.
                if let Some((q, now)) = unsafe { large::span_resize(p, new_size) } {
                    heap::count_large(false, usable);
                    heap::count_large(true, now);
                    checks::on_raw_large(q, p, span::is_block);
                    checks::on_alloc(q, new_size);
                    return q;
                }
                // Fall back to a copy into a new block below.
            }
            usable
        }
        Owner::Foreign => {
            if checks::is_zero_size_block(p) {
                return alloc(new_size, align); // nothing to keep
            }
            checks::on_foreign(p, "realloc");
            let q = alloc(new_size, align);
            if !q.is_null() {
                copy_foreign(p, q, new_size);
            }
            return q;
        }
    };
    let q = if matches!(owner, Owner::Small(_)) && class_of(new_size, align).is_none() {
        // Out of the classes: a large block likely to grow again (`span::alloc_grown`).
        let q = new_large(new_size, align, Large::Grown);
        checks::on_alloc(q, new_size);
        q
    } else {
        alloc(new_size, align)
    };
    if !q.is_null() {
        // SAFETY: p holds `old` usable bytes and q at least new_size; distinct blocks. p is then
        // freed (caller's contract).
        unsafe {
            ptr::copy_nonoverlapping(p, q, old.min(new_size));
            free(p);
        }
    }
    q
}

/// `p` keeps its place at `new_size` bytes: the profiler sees it freed and allocated again.
#[inline]
fn resized_in_place(p: *mut u8, new_size: usize) -> *mut u8 {
    checks::on_resize_in_place(p, new_size);
    p
}

/// Copies as much of `[src, src + len)` as is readable into `dst`, without faulting: the size of a
/// foreign block is unknown, and the bytes after it may not be mapped.
fn copy_foreign(src: *mut u8, dst: *mut u8, len: usize) {
    // SAFETY: dst holds len writable bytes (a fresh block of at least len); the OS layer reads src
    // without faulting where it can (the C library, which copies foreign blocks, is Linux-only,
    // where it can).
    unsafe { os::copy_readable(src, dst, len) };
}

/// Reads the settings from the environment and, with `POOLALLOC_SHOW_STATS`, arranges for the
/// statistics to be printed at exit. A shared library calls this from its own constructor: a
/// constructor inside this crate may not be linked into it. Idempotent; allocates nothing.
///
/// The caller is this process's `malloc` (the C library, preloaded or linked into the executable):
/// from now on `PoolAlloc`'s large blocks are spans taken directly (`std::alloc::System`, which
/// calls `malloc`, would come back here and count each block twice), whatever
/// [`set_large_blocks`](crate::set_large_blocks) says, and [`trim`](crate::trim) no
/// longer calls `malloc_trim` (ours: the same work again).
pub fn start() {
    settings::set_malloc_is_ours();
    stats::at_start();
}

/// Returns free memory to the OS as [`trim`](crate::trim) does (large spans waiting for reuse
/// included), but leaves the system allocator alone (in a C program, that is us).
/// True when the resident set shrank.
pub fn trim() -> bool {
    stats::rss_shrank(stats::trim_pools)
}
