//! Thread exit (every chunk given back or abandoned, the heap retired to the registry's free
//! list), the heaps a `Heap` (`own_heap.rs`) owns, which no thread names, and this thread's trim.
//! A thread's heap starts in `mod.rs` (`init_heap`), which the slow paths of both `alloc.rs` and
//! `free.rs` call.

use super::alloc::{alloc_from, collect, unfull_hinted};
use super::counters::{carry_in, carry_out, count_here};
use super::free::{flush_all, free_slow, retire};
use super::registry::{new_registered_heap, unregister};
use super::{
    Bin, ThreadHeap, bin, current, empty, exited, fork, init_heap, owner_add, owner_add32,
};
use super::{set_current, this_heap, tls};
use crate::base::size_class::NUM_CLASSES;
use crate::chunks::chunk::{self, Chunk, FreeSlot, unlink};
use crate::memory::{chunk_lists, purge};
use core::ptr;
use core::sync::atomic::Ordering::Relaxed;

// ---------------------------------------------------------------------------------------------------
// Thread exit.

/// The thread-exit hook: abandons the thread's heap (the OS layer calls it as the thread exits).
pub(super) fn thread_exited() {
    let h = this_heap();
    if h == empty() || h == exited() {
        return;
    }
    tls::set(exited());
    // SAFETY: h was this thread's heap; from now on no thread uses it until it is reused.
    unsafe {
        flush_all(h);
        abandon_all(h);
    }
}

/// Gives back or abandons every chunk of `h`, folds its counters into the orphan totals, and puts
/// it on the free list.
///
/// # Safety
/// The caller owns `h`, and nobody uses it afterwards.
unsafe fn abandon_all(h: *mut ThreadHeap) {
    let mut abandoned = false;
    // SAFETY: the caller owns h and its chunks; each chunk handed to the closure is off every
    // list of h, and is given to the source (empty) or abandoned (with live slots).
    unsafe {
        take_all_chunks(h, |b, ch| {
            collect(b, ch);
            (*ch).owner.store(ptr::null_mut(), Relaxed);
            if chunk::used(ch) == 0 {
                chunk_lists::release(ch, purge::running());
            } else {
                abandoned = true;
                chunk_lists::abandon(ch);
            }
        });
        unregister(h);
    }
    if abandoned {
        // The purger reaps abandoned chunks whose blocks other threads free.
        purge::running();
    }
}

/// Takes every chunk off `h`'s lists, class by class (under the `lists` lock `stats` walks them
/// with), and hands each to `give` with its bin, `in_full` cleared; clears `h`'s hints.
///
/// # Safety
/// The caller owns `h` and its chunks; `give` takes each chunk over (`h` no longer lists it).
unsafe fn take_all_chunks(h: *mut ThreadHeap, mut give: impl FnMut(*mut Bin, *mut Chunk)) {
    // SAFETY: the caller owns h and every chunk on its lists.
    unsafe {
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            let cur = *current(h, c);
            let (avail, full) = ((*b).avail, (*b).full);
            {
                // Off the lists first (under the lock `stats` walks them with), then given away.
                let _l = (*h).lists.lock();
                set_current(h, c, chunk::dummy());
                (*b).avail = ptr::null_mut();
                (*b).full = ptr::null_mut();
            }
            for first in [cur, avail, full] {
                let mut ch = first;
                while !ch.is_null() && ch != chunk::dummy() {
                    // The next link is read before the chunk is given away.
                    let next = if ch == cur {
                        ptr::null_mut()
                    } else {
                        (*ch).next
                    };
                    (*ch).in_full = false;
                    give(b, ch);
                    ch = next;
                }
            }
        }
        (*h).hint.clear();
    }
}

// ---------------------------------------------------------------------------------------------------
// Heaps that no thread names as its own: `Heap` (own_heap.rs) uses one under its lock.

/// A fresh heap on the registry (so `stats` counts its chunks) that no thread names as its own;
/// null when the OS has no memory.
pub(crate) fn owned_new() -> *mut ThreadHeap {
    // A program may use a `Heap` with another global allocator: the fork hooks, which take every
    // lock of the pools, must be installed before the first chunk all the same.
    fork::install();
    let h = new_registered_heap();
    if !h.is_null() {
        // SAFETY: a fresh heap, ours alone until returned.
        unsafe { (*h).owned = true };
    }
    h
}

/// A slot of class `c` for `size` bytes from `h` (null when out of memory).
///
/// # Safety
/// The caller owns `h` (holds the lock it is used under) and `h` came from [`owned_new`].
pub(crate) unsafe fn owned_alloc(h: *mut ThreadHeap, c: usize, size: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    let p = unsafe { alloc_from(h, c, size) };
    if !p.is_null() {
        // Counted for the calling thread, whichever heap serves it.
        count_here(size, 0);
    }
    p
}

/// Frees slot `p` of `size` bytes into `h`, its chunk's owner, as the owner's own free does.
///
/// # Safety
/// The caller owns `h`; `p` is a live slot handed out by [`owned_alloc`] from `h`.
pub(crate) unsafe fn owned_free(h: *mut ThreadHeap, p: *mut u8, size: usize) {
    count_here(0, size);
    let ch = chunk::of(p);
    // SAFETY: p is a live slot of a chunk h owns (caller): h's owner may write its fields.
    unsafe {
        let s = p.cast::<FreeSlot>();
        FreeSlot::set_next(s, (*ch).local_free);
        (*ch).local_free = s;
        debug_assert_eq!((*ch).owner.load(Relaxed), h.cast::<u8>());
        owner_add32(&(*ch).requested, (size as u32).wrapping_neg());
        if chunk::free_one(ch) {
            free_slow(p);
        }
    }
}

/// Whether slot `p`'s chunk is owned by `h` (a `Heap` checks a free with it under `hardened`).
///
/// # Safety
/// `p` is in a chunk of ours.
pub(crate) unsafe fn owned_by(h: *mut ThreadHeap, p: *mut u8) -> bool {
    // SAFETY: p's chunk header is live (caller); `owner` is an atomic.
    unsafe { (*chunk::of(p)).owner.load(Relaxed) == h.cast() }
}

/// Gives back every chunk of `h` at once, whatever its slots hold (none is referred to any more:
/// caller), without visiting them, and retires `h`.
///
/// # Safety
/// The caller owns `h`, which came from [`owned_new`], made no remote frees (so holds no batch),
/// and no slot of it is live or waiting in another thread's batch.
pub(crate) unsafe fn owned_destroy(h: *mut ThreadHeap) {
    // SAFETY: the caller owns h and every chunk on its lists, none of whose slots anyone refers
    // to: each chunk handed to the closure is off every list and released whole.
    unsafe {
        debug_assert_eq!((*h).batched, 0);
        take_all_chunks(h, |_, ch| {
            (*ch).owner.store(ptr::null_mut(), Relaxed);
            chunk_lists::release_reset(ch, purge::running());
        });
        unregister(h);
    }
}

/// Routes the calling thread's allocations to `h` (`Heap::enter`): the thread's TLS word names `h`
/// until [`owned_leave`], so `PoolAlloc`'s fast paths allocate from `h`'s chunks and free into
/// them as its owner, and `h` carries the thread's counters meanwhile. Returns what the TLS word
/// named before (the thread's heap, made now if it had none), for [`owned_leave`].
///
/// # Safety
/// The caller owns `h` (holds its `Heap`'s lock) until the matching [`owned_leave`], on this
/// thread.
pub(crate) unsafe fn owned_enter(h: *mut ThreadHeap) -> *mut ThreadHeap {
    let mut prev = this_heap();
    if prev == empty() {
        // A heap of its own for the counters to go back to.
        prev = init_heap();
    }
    // SAFETY: the caller owns h; prev is what this thread's TLS word names, not the empty heap.
    unsafe { carry_in(h, prev) };
    tls::set(h);
    prev
}

/// Ends [`owned_enter`]: sends the remote frees batched in `h` meanwhile and gives the TLS word back
/// to `prev`.
///
/// # Safety
/// As for [`owned_enter`], whose result `prev` is.
pub(crate) unsafe fn owned_leave(h: *mut ThreadHeap, prev: *mut ThreadHeap) {
    // SAFETY: the caller still owns h; prev is the heap `owned_enter` carried the counters from.
    unsafe {
        flush_all(h);
        carry_out(h, prev);
    }
    tls::set(prev);
}

/// Whether the calling thread's allocations go to `h` now (inside its `Heap::enter`).
pub(crate) fn owned_is_current(h: *mut ThreadHeap) -> bool {
    !h.is_null() && this_heap() == h
}

/// Retires `h` as a thread's heap retires at exit: empty chunks go back, chunks with live slots are
/// abandoned (any thread frees their blocks, and heaps adopt them). For a `Heap` that was entered:
/// blocks of its scopes may live on anywhere.
///
/// # Safety
/// The caller owns `h`, which came from [`owned_new`], and nobody uses it afterwards.
pub(crate) unsafe fn owned_release(h: *mut ThreadHeap) {
    // SAFETY: forwarded.
    unsafe {
        flush_all(h);
        abandon_all(h);
    }
}

/// The live requested bytes of the slots in `h`'s chunks, however they were allocated (remote
/// frees counted as they happen); exact at quiet points.
///
/// # Safety
/// The caller owns `h`.
pub(crate) unsafe fn owned_requested(h: *mut ThreadHeap) -> usize {
    let mut sum = 0usize;
    // SAFETY: the caller owns h and its lists; the chunks on them are live.
    unsafe {
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            for first in [*current(h, c), (*b).avail, (*b).full] {
                let mut ch = first;
                while !ch.is_null() && ch != chunk::dummy() {
                    sum = sum.wrapping_add(chunk::requested(ch) as usize);
                    ch = if first == *current(h, c) {
                        ptr::null_mut()
                    } else {
                        (*ch).next
                    };
                }
            }
        }
    }
    sum
}

// ---------------------------------------------------------------------------------------------------
// This thread's trim.

/// Gives back this thread's empty chunks (current ones included), after collecting their remote
/// frees. Part of `trim`.
/// Pushes the calling thread's batched remote frees: a `Heap`'s `entered_bytes`, read by a thread
/// that freed some of its blocks outside its scope, counts them as freed (their chunks learn of
/// them with the push: one atomic add a batch, issue 45).
pub(crate) fn flush_current_batches() {
    let h = this_heap();
    // SAFETY: h is this thread's heap (not one of the static ones).
    if h != empty() && h != exited() && unsafe { (*h).batched != 0 } {
        // SAFETY: as above.
        unsafe { flush_all(h) };
    }
}

pub(crate) fn trim_current_thread() {
    let h = this_heap();
    if h == empty() || h == exited() {
        return;
    }
    // SAFETY: h is this thread's heap.
    unsafe {
        flush_all(h);
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            if (*h).hint.contains(c) {
                (*h).hint.remove(c);
                unfull_hinted(h, c);
            }
            let cur = *current(h, c);
            if cur != chunk::dummy() {
                // Collected onto the current chunk's free list: supplied to the fast path.
                owner_add(&(*b).supplied, collect(b, cur) as usize);
                if chunk::used(cur) == 0 {
                    let l = (*h).lists.lock();
                    set_current(h, c, chunk::dummy());
                    drop(l);
                    retire(cur);
                }
            }
            let mut ch = (*b).avail;
            while !ch.is_null() {
                let next = (*ch).next;
                collect(b, ch);
                if chunk::used(ch) == 0 {
                    let l = (*h).lists.lock();
                    unlink(&raw mut (*b).avail, ch);
                    drop(l);
                    retire(ch);
                }
                ch = next;
            }
        }
    }
}
