//! The remote-free list of a chunk: one word that threads other than the chunk's owner push freed
//! slots onto with a compare-and-swap, and that the owner takes whole with a swap; its low bit is
//! [`FULL`] (the owner set it when it moved the chunk to its full list, only while the list was
//! empty; the push that clears it tells the owner). The list's nodes are the slots themselves, each
//! linked to the next by whatever the caller writes (`link_tail`): this file knows only the word.
//!
//! This is the lock-free part of the cross-thread protocol, and the part model-checked:
//! `tests/loom_remote.rs` includes this file with `crate::sync::atomic` bound to loom's atomics and
//! checks every interleaving of pushers, a batch push, the owner's take and its FULL mark on small
//! configurations (`.ci/run`). In the library `crate::sync::atomic` is `core`'s: the functions
//! inline to the same instructions as before.

use crate::sync::atomic::{AtomicUsize, Ordering};

/// The low bit of the list word: the chunk sits on its owner's full list.
pub const FULL: usize = 1;

/// Pushes the slots `head` … tail onto `list` with one CAS: `link_tail(old)` writes the tail's link
/// to the old first slot (called again if the CAS is retried). Returns true when this push cleared
/// [`FULL`]: the caller must tell the owner.
///
/// # Safety
/// `head` … tail are slots nobody else uses, linked by the caller up to the tail; `link_tail` writes
/// only the tail's link.
#[inline(always)]
pub unsafe fn push(list: &AtomicUsize, head: usize, mut link_tail: impl FnMut(usize)) -> bool {
    let mut old = list.load(Ordering::Relaxed);
    loop {
        link_tail(old & !FULL);
        // Release: the links written before are visible to the owner's acquire swap.
        match list.compare_exchange_weak(old, head, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return old & FULL != 0,
            Err(now) => old = now,
        }
    }
}

/// Takes the whole list (clearing [`FULL`]): its first slot, or 0 when it was empty. For the owner.
#[inline]
pub fn take(list: &AtomicUsize) -> usize {
    if list.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    // Acquire: the links the pushers wrote before their release CAS are visible.
    list.swap(0, Ordering::Acquire) & !FULL
}

/// Marks the list [`FULL`] if it is empty; false (changing nothing) when slots are waiting: the
/// owner takes them instead. For the owner.
#[inline]
pub fn try_mark_full(list: &AtomicUsize) -> bool {
    list.compare_exchange(0, FULL, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// Whether the list is still marked [`FULL`] (no push has cleared the mark). For the owner, as a
/// hint: a push may clear it the next moment.
#[inline]
pub fn is_full(list: &AtomicUsize) -> bool {
    list.load(Ordering::Relaxed) & FULL != 0
}

/// Clears the [`FULL`] mark, if a push has not already: the owner takes the chunk off its full list
/// itself (one of its own frees). Slots on the list stay.
#[inline]
pub fn clear_full(list: &AtomicUsize) {
    list.fetch_and(!FULL, Ordering::Relaxed);
}

/// The first slot waiting, without taking it (0: none); for checks.
#[cfg_attr(not(test), allow(dead_code))]
#[inline]
pub fn peek(list: &AtomicUsize) -> usize {
    list.load(Ordering::Acquire) & !FULL
}
