//! Allocation: the fast path (a pop from the current chunk's free list, no lock, no atomic), the
//! slow path and its refill (in the order of the diagram in docs/how-it-works.md), the shared heap of threads whose exit hook
//! already ran.

use super::counters::count_here;
use super::free::{flush_all, retire};
use super::registry::new_registered_heap;
use super::{Bin, ThreadHeap, bin, count_supply, current, direct, empty, exited, init_heap};
use super::{
    make_current, owner_add, owner_add_bytes, owner_add32, push_avail, set_current, this_heap,
};
use crate::base::lock::{Lock, Rank};
use crate::base::size_class::{self, COMMON_MAX};
use crate::chunks::chunk::{self, Chunk, FreeSlot, push, unlink};
use crate::{chunks::remote_list, memory::chunk_lists};
use core::ptr;
use core::sync::atomic::Ordering::Relaxed;

// ---------------------------------------------------------------------------------------------------
// The fast path.

/// A slot of class `c` for a request of `size` bytes, or null when out of memory.
#[inline(always)]
pub(crate) fn alloc(c: usize, size: usize) -> *mut u8 {
    alloc_with::<true>(c, size)
}

/// A slot for a request of `size` bytes (at most [`COMMON_MAX`]) aligned to at most 8: the
/// common case (`size_class::class_of_common`), whose chunk is found by the size itself
/// (`ThreadHeap::direct`). Null when out of memory.
#[inline(always)]
pub(crate) fn alloc_common(size: usize) -> *mut u8 {
    let h = this_heap();
    // SAFETY: size <= COMMON_MAX (caller); otherwise as in `alloc_with`: `direct[size]` is the
    // current chunk of the size's class, or the dummy.
    unsafe {
        let ch = *direct(h, size);
        debug_assert!(
            size_class::class_of_common(size, 1).is_some_and(|c| *current(h, c) == ch),
            "direct[{size}] is not the current chunk of its class"
        );
        let p = (*ch).free;
        if p.is_null() {
            return alloc_slow_common(size, h);
        }
        (*ch).free = FreeSlot::next(p);
        chunk::hand_out_one(ch);
        owner_add32(&(*ch).requested, size as u32);
        // A slot was there, so h is not a static heap: this thread's counter (one `add`).
        owner_add_bytes(&(*h).allocated, size);
        p.cast()
    }
}

/// [`alloc_common`]'s slow path: the class found now.
#[cold]
#[inline(never)]
fn alloc_slow_common(size: usize, h: *mut ThreadHeap) -> *mut u8 {
    debug_assert!(size <= COMMON_MAX);
    match size_class::class_of_common(size, 1) {
        Some(c) => alloc_slow(size, c, h),
        None => ptr::null_mut(),
    }
}

/// A slot of class `c`, counted in the live blocks but not in the requested bytes (the size-less
/// interface: no size comes back with its free, and the count would cost its fast paths).
#[inline(always)]
pub(crate) fn alloc_unsized(c: usize) -> *mut u8 {
    alloc_with::<false>(c, 0)
}

#[inline(always)]
fn alloc_with<const REQUESTED: bool>(c: usize, size: usize) -> *mut u8 {
    let h = this_heap();
    // SAFETY: h is this thread's heap (or a static one, whose current is the dummy chunk with a
    // null free list); `current` is a live chunk this heap owns, or the dummy.
    unsafe {
        let ch = *current(h, c);
        let p = (*ch).free;
        if p.is_null() {
            return alloc_slow(size, c, h);
        }
        (*ch).free = FreeSlot::next(p);
        chunk::hand_out_one(ch);
        if REQUESTED {
            owner_add32(&(*ch).requested, size as u32);
            // As in `alloc_common`: h is this thread's heap. The size-less interface counts no
            // bytes here (none come back with its free).
            owner_add_bytes(&(*h).allocated, size);
        }
        p.cast()
    }
}

/// Small block `p` stays in place while its requested size changes from `old` to `new`.
///
/// # Safety
/// `p` must be a live small block of this allocator.
#[inline]
pub(crate) unsafe fn resized(p: *mut u8, old: usize, new: usize) {
    let ch = chunk::of(p);
    // This thread's counters see the block freed at its old size and allocated at its new one,
    // as a moving realloc counts it.
    count_here(new, old);
    // SAFETY: p is live, so its chunk header is; its owner may write `requested`, any other
    // thread adds to `remote_requested` (the block stays live meanwhile, so the chunk cannot
    // change hands under us).
    unsafe {
        if (*ch).owner.load(Relaxed) == this_heap().cast() {
            owner_add32(&(*ch).requested, new.wrapping_sub(old) as u32);
        } else {
            (*ch)
                .remote_requested
                .fetch_add(old.wrapping_sub(new) as u32, Relaxed);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The slow path.

#[cold]
#[inline(never)]
// Arguments in the order the fast path holds them (the request's size stays in its register).
fn alloc_slow(size: usize, c: usize, h: *mut ThreadHeap) -> *mut u8 {
    let h = if h == empty() { init_heap() } else { h };
    if h == exited() {
        return alloc_shared(c, size);
    }
    // SAFETY: h is this thread's heap.
    unsafe {
        // Batched remote frees go out whenever this thread visits a slow path.
        if (*h).batched != 0 {
            flush_all(h);
        }
        // The commonest refill first, without `refill`'s loop: the current chunk's own frees
        // become its free list, and no remote free waits (else `refill` collects them).
        let ch = *current(h, c);
        let p = if !(*ch).local_free.is_null()
            && (*ch).remote.load(Relaxed) == 0
            && chunk::take_local(ch)
        {
            count_supply(bin(h, c), ch);
            pop(ch, size)
        } else {
            alloc_from(h, c, size)
        };
        // This thread's counter, as the fast paths add to it (the size-less interface's `size`
        // is 0).
        if !p.is_null() {
            owner_add_bytes(&(*h).allocated, size);
        }
        p
    }
}

/// Hands out the first slot on current chunk `ch`'s free list (not empty) for `size` bytes.
///
/// # Safety
/// The caller owns `ch`, with a slot on `free`.
#[inline(always)]
unsafe fn pop(ch: *mut Chunk, size: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe {
        let p = (*ch).free;
        (*ch).free = FreeSlot::next(p);
        chunk::hand_out_one(ch);
        owner_add32(&(*ch).requested, size as u32);
        p.cast()
    }
}

/// Pops a slot of class `c` from heap `h`, refilling its current chunk as needed.
///
/// # Safety
/// The caller must own `h` (its thread, or the shared heap's lock).
pub(super) unsafe fn alloc_from(h: *mut ThreadHeap, c: usize, size: usize) -> *mut u8 {
    // SAFETY: the caller owns h and so every chunk on its lists.
    unsafe {
        let ch = refill(h, c);
        if ch.is_null() {
            return ptr::null_mut();
        }
        pop(ch, size)
    }
}

/// Makes class `c`'s current chunk one with a slot on `free` and returns it (null when out of
/// memory). The order of the diagram in docs/how-it-works.md: the current chunk's local and remote frees, never-used slots,
/// hinted full chunks, the next chunk with free slots, an abandoned chunk, the source.
///
/// # Safety
/// The caller must own `h`.
unsafe fn refill(h: *mut ThreadHeap, c: usize) -> *mut Chunk {
    // SAFETY: the caller owns h and every chunk on its lists.
    unsafe {
        let b = bin(h, c);
        let mut adopted = 0;
        // The current chunk was made current by this call: its free list is new supply.
        let mut fresh = false;
        // `current` is the dummy but `direct` still names the chunk that went to the full list.
        let mut direct_stale = false;
        loop {
            let ch = *current(h, c);
            if !(*ch).free.is_null() {
                if fresh {
                    count_supply(b, ch);
                }
                return ch;
            }
            if ch != chunk::dummy() {
                // Remote frees first, on every refill, so they never wait long: `free` is empty,
                // so the list becomes it whole, counted by its pushes (no walk of lines other
                // cores wrote: issue 45, step 2); the thread's own frees stay on `local_free`
                // until `free` runs dry again.
                let n = collect_some(b, ch);
                if n > 0 {
                    owner_add(&(*b).supplied, n as usize);
                    return ch;
                }
                if chunk::take_local(ch) || chunk::extend(ch) > 0 {
                    count_supply(b, ch);
                    return ch;
                }
                // Nothing left: to the full list, unless remote frees came in meanwhile.
                if !chunk::try_mark_full(ch) {
                    continue;
                }
                (*ch).in_full = true;
                let l = (*h).lists.lock();
                chunk::set_notify_at(ch, chunk::used(ch) - 1);
                push(&raw mut (*b).full, ch);
                // The commonest switch, under the same lock: the next chunk with free slots
                // (unless a remote free hinted a full chunk of the class, looked at below).
                let next = (*b).avail;
                if !next.is_null() && !(*h).hint.contains(c) {
                    unlink(&raw mut (*b).avail, next);
                    make_current(h, c, next);
                    fresh = true;
                    continue;
                }
                drop(l);
                // `direct` is left naming the full chunk until the loop makes another chunk
                // current (`make_current` rewrites it) or gives up (below): nothing reads it
                // meanwhile (only this thread's fast path does), and writing it twice cost up to
                // 128 stores per refill.
                *current(h, c) = chunk::dummy();
                direct_stale = true;
            }
            if (*h).hint.contains(c) {
                (*h).hint.remove(c);
                unfull_hinted(h, c);
            }
            fresh = true;
            let next = (*b).avail;
            if !next.is_null() {
                let _l = (*h).lists.lock();
                unlink(&raw mut (*b).avail, next);
                make_current(h, c, next);
                continue;
            }
            // An abandoned chunk of this class (a few at most: they may all be full).
            if adopted < 4 && !(*h).owned {
                let a = chunk_lists::adopt(c);
                if !a.is_null() {
                    adopted += 1;
                    (*a).owner.store(h.cast(), Relaxed);
                    let _l = (*h).lists.lock();
                    make_current(h, c, a);
                    continue;
                }
            }
            let n = chunk_lists::acquire(c);
            if n.is_null() {
                if direct_stale {
                    let _l = (*h).lists.lock();
                    set_current(h, c, chunk::dummy());
                }
                return ptr::null_mut();
            }
            (*n).owner.store(h.cast(), Relaxed);
            let _l = (*h).lists.lock();
            make_current(h, c, n);
        }
    }
}

/// Collects some of chunk `ch`'s remote frees into its free list, counting them against `b`'s
/// cached slots: `chunk::collect_remote_some` (in a class that carries messages, about a full
/// batch's worth; the rest wait on the chunk).
///
/// # Safety
/// The caller owns `ch`, which belongs to bin `b`.
unsafe fn collect_some(b: *mut Bin, ch: *mut Chunk) -> u32 {
    // SAFETY: forwarded.
    unsafe {
        let n = chunk::collect_remote_some(ch);
        if n > 0 {
            owner_add(&(*b).cached, (n as usize).wrapping_neg());
        }
        n
    }
}

/// Collects chunk `ch`'s remote frees into its free list, counting them against `b`'s cached slots.
///
/// # Safety
/// The caller owns `ch`, which belongs to bin `b`.
pub(super) unsafe fn collect(b: *mut Bin, ch: *mut Chunk) -> u32 {
    // SAFETY: forwarded.
    unsafe {
        let n = chunk::collect_remote(ch);
        if n > 0 {
            owner_add(&(*b).cached, (n as usize).wrapping_neg());
        }
        n
    }
}

/// Moves the full chunks of class `c` that got remote frees since they were marked back to the
/// heap's chunks with free slots (or gives them back, if every slot is now free).
///
/// # Safety
/// The caller must own `h`.
pub(super) unsafe fn unfull_hinted(h: *mut ThreadHeap, c: usize) {
    // SAFETY: the caller owns h and its lists.
    unsafe {
        let b = bin(h, c);
        let mut ch = (*b).full;
        while !ch.is_null() {
            let next = (*ch).next;
            if !remote_list::is_full(&(*ch).remote) {
                let l = (*h).lists.lock();
                unlink(&raw mut (*b).full, ch);
                (*ch).in_full = false;
                collect(b, ch);
                if chunk::used(ch) == 0 {
                    drop(l);
                    retire(ch);
                } else {
                    push_avail(b, ch);
                }
            }
            ch = next;
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The shared heap: allocations by threads whose exit hook already ran.

pub(super) struct Shared(*mut ThreadHeap);
// SAFETY: the heap is used only under the lock.
unsafe impl Send for Shared {}
pub(super) static SHARED: Lock<Shared> = Lock::new(Rank::Shared, Shared(ptr::null_mut()));

#[cold]
fn alloc_shared(c: usize, size: usize) -> *mut u8 {
    let mut s = SHARED.lock();
    if s.0.is_null() {
        s.0 = new_registered_heap();
        if s.0.is_null() {
            return ptr::null_mut();
        }
    }
    // SAFETY: we hold the lock, so we own the shared heap. Its chunks' frees all take the remote
    // path (no thread names it as its own).
    unsafe { alloc_from(s.0, c, size) }
}
