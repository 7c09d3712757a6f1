//! This thread's counters: the bytes it allocated and deallocated since it started
//! (`poolalloc::thread_counters`). The fast paths add to their heap's themselves (`alloc.rs`,
//! `free.rs`: one `add` each, the heap and the size already in registers); every other path that
//! hands out or takes back a block of the sized interface counts through [`count_here`].

use super::{ByteCounter, ThreadHeap, empty, exited, init_heap, owner_add_bytes, this_heap};
use core::sync::atomic::Ordering::Relaxed;

/// Adds `allocated` and `deallocated` bytes to the calling thread's counters: those of the heap its
/// TLS word names (a `Heap` scope's, inside one), made first if the thread has none. Nothing once
/// its exit hook ran (the static *exited* heap is never written).
#[inline]
pub(super) fn count_here(allocated: usize, deallocated: usize) {
    let mut h = this_heap();
    if h == empty() {
        h = init_heap();
    }
    if h == exited() {
        return;
    }
    // SAFETY: h is this thread's heap, or the heap of a `Heap` scope this thread is in (it holds
    // the `Heap`'s lock): only this thread writes its counters.
    unsafe {
        owner_add_bytes(&(*h).allocated, allocated);
        owner_add_bytes(&(*h).deallocated, deallocated);
    }
}

/// The calling thread's counters, read now: exact inside a `Heap` scope too (the scope's heap
/// carries them meanwhile). Zero before the thread's first allocation and after its exit hook.
#[inline]
pub(crate) fn thread_counts() -> [u64; 2] {
    let h = this_heap();
    // SAFETY: h is this thread's heap or a static one (heaps are never unmapped); atomics only.
    unsafe { [read(&(*h).allocated), read(&(*h).deallocated)] }
}

/// A counter's value (as 64 bits where it is narrower: see [`ByteCounter`]).
#[inline(always)]
pub(crate) fn read(c: &ByteCounter) -> u64 {
    #[cfg(target_has_atomic = "64")]
    return c.load(Relaxed);
    #[cfg(not(target_has_atomic = "64"))]
    return c.load(Relaxed) as u64;
}

/// Sets the calling thread's counters (made first if it has none), for the unit tests that
/// start them near a wrap.
#[cfg(test)]
pub(crate) fn set_thread_counts(allocated: u64, deallocated: u64) {
    let [a, d] = thread_counters();
    a.store(allocated as _, Relaxed);
    d.store(deallocated as _, Relaxed);
}

/// Where the calling thread's counters live for as long as it runs: in its own heap (made now if
/// it has none), outside any `Heap` scope it is in; the static *exited* heap's zeros once its exit
/// hook ran. Heaps are never unmapped, so the references stay valid after the thread exits, but
/// its heap then goes to the next thread that starts, which counts from zero in it.
pub(crate) fn thread_counters() -> [&'static ByteCounter; 2] {
    let mut h = this_heap();
    if h == empty() {
        h = init_heap();
    }
    // SAFETY: h is this thread's heap, a scope's heap this thread is in, or a static one: every
    // `outer` link of a scope's heap names the heap the thread used before it (`owned_enter`),
    // down to a thread's own heap (or the static exited one), which is not `owned`. Heaps live in
    // memory mapped once and never unmapped (or in statics), so the references are `'static`.
    unsafe {
        while (*h).owned {
            h = (*h).outer;
        }
        let h: &'static ThreadHeap = &*h;
        [&h.allocated, &h.deallocated]
    }
}

/// Starts a `Heap` scope's heap `scoped` on the calling thread, whose TLS word names `outer`: the
/// scope's heap carries on the thread's counters.
///
/// # Safety
/// The caller owns `scoped` (holds its `Heap`'s lock) and `outer` is the heap this thread's TLS
/// word names, not the static *empty* one.
pub(super) unsafe fn carry_in(scoped: *mut ThreadHeap, outer: *mut ThreadHeap) {
    // SAFETY: the caller owns scoped; outer is this thread's (or a static, read only).
    unsafe {
        (*scoped).outer = outer;
        (*scoped)
            .allocated
            .store((*outer).allocated.load(Relaxed), Relaxed);
        (*scoped)
            .deallocated
            .store((*outer).deallocated.load(Relaxed), Relaxed);
    }
}

/// Ends [`carry_in`]: the counts go back to `outer` (unless it is the static *exited* heap).
///
/// # Safety
/// As [`carry_in`], with the same `scoped` and `outer`.
pub(super) unsafe fn carry_out(scoped: *mut ThreadHeap, outer: *mut ThreadHeap) {
    if outer == exited() {
        return;
    }
    // SAFETY: the caller owns scoped, and outer is this thread's heap or an outer scope's, which
    // this thread owns too.
    unsafe {
        (*outer)
            .allocated
            .store((*scoped).allocated.load(Relaxed), Relaxed);
        (*outer)
            .deallocated
            .store((*scoped).deallocated.load(Relaxed), Relaxed);
        (*scoped).outer = core::ptr::null_mut();
    }
}
