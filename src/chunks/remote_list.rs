//! The remote-free list of a chunk: one word that threads other than the chunk's owner push freed
//! slots onto with a compare-and-swap, and that the owner takes whole with a swap; its low bit is
//! [`FULL`] (the owner set it when it moved the chunk to its full list, only while the list was
//! empty; the push that clears it tells the owner). The list's nodes are the slots themselves, each
//! linked to the next by whatever the caller writes (`link_tail`): this file knows only the word.
//!
//! On 64-bit targets the word's top 16 bits ([`COUNTED`]) count the slots on the list: each push
//! adds its own, so the owner takes a list with its length and never walks it to count (issue 45,
//! step 2: the walk was a chain of dependent loads of lines the freeing core held). A pointer
//! there is below 2^48 (`os::ADDRESS_BITS`), and a chunk holds at most 2^15 slots. 32-bit targets
//! have no bit to spare: their take says 0 and the owner walks.
//!
//! This is the lock-free part of the cross-thread protocol, and the part model-checked:
//! `tests/loom_remote.rs` includes this file with `crate::sync::atomic` bound to loom's atomics and
//! checks every interleaving of pushers, a batch push, the owner's take and its FULL mark on small
//! configurations (`.ci/run`). In the library `crate::sync::atomic` is `core`'s: the functions
//! inline to the same instructions as before.

use crate::sync::atomic::{AtomicUsize, Ordering};

/// The low bit of the list word: the chunk sits on its owner's full list.
pub const FULL: usize = 1;

/// Whether the list word counts its slots (64-bit targets: in its top 16 bits).
pub const COUNTED: bool = usize::BITS == 64;
/// Where the count starts in the word, and the bits below it (the first slot and [`FULL`]).
const COUNT_SHIFT: u32 = if COUNTED { 48 } else { 0 };
const LOW: usize = if COUNTED {
    (1 << COUNT_SHIFT) - 1
} else {
    usize::MAX
};

/// The slots a list word counts (0 where the word does not count them).
#[inline(always)]
fn count(word: usize) -> usize {
    if COUNTED { word >> COUNT_SHIFT } else { 0 }
}

/// Pushes the `n` slots `head` … tail onto `list` with one CAS: `link_tail(old)` writes the tail's
/// link to the old first slot (called again if the CAS is retried). Returns true when this push
/// cleared [`FULL`]: the caller must tell the owner.
///
/// # Safety
/// `head` … tail are `n` slots nobody else uses, linked by the caller up to the tail; `link_tail`
/// writes only the tail's link. A slot's address is below 2^48 and a list never holds 2^16 slots.
#[inline(always)]
pub unsafe fn push(
    list: &AtomicUsize,
    head: usize,
    n: usize,
    mut link_tail: impl FnMut(usize),
) -> bool {
    debug_assert!(count(head) == 0 && head & FULL == 0);
    let mut old = list.load(Ordering::Relaxed);
    loop {
        link_tail(old & LOW & !FULL);
        let new = if COUNTED {
            head | (count(old) + n) << COUNT_SHIFT
        } else {
            head
        };
        // Release: the links written before are visible to the owner's acquire swap.
        match list.compare_exchange_weak(old, new, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return old & FULL != 0,
            Err(now) => old = now,
        }
    }
}

/// Takes the whole list (clearing [`FULL`]): its first slot (0 when it was empty) and how many slots
/// it holds ([`COUNTED`]; else 0: the caller counts them). For the owner.
#[inline]
pub fn take(list: &AtomicUsize) -> (usize, usize) {
    if list.load(Ordering::Relaxed) == 0 {
        return (0, 0);
    }
    // Acquire: the links the pushers wrote before their release CAS are visible.
    let w = list.swap(0, Ordering::Acquire);
    (w & LOW & !FULL, count(w))
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
    list.load(Ordering::Acquire) & LOW & !FULL
}
