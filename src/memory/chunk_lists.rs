//! Chunks no heap owns, per class: the *retained empty* chunks and the *abandoned* ones, and the
//! count of each class's chunks. A heap asks here for a chunk ([`acquire`]: an empty chunk of its
//! class, else another class's still-resident one, else a new one from `source`'s units) and
//! gives back here the chunks it empties ([`release`]) or leaves with live slots when its thread
//! exits ([`abandon`]).
//!
//! - **Retained empty chunks**, per class: a chunk whose slots are all free. The first `retain` of
//!   a class (default 1) are kept; the others wait the purge delay (250 ms by default) and are then
//!   given back to `source` (purged) by the background purger thread, so a program that frees a
//!   heap and builds it again soon after reuses the pages without faulting them in again, and one
//!   that frees everything and goes idle still sees its RSS fall within a second, with no call.
//!   The delay is the only bound on how many wait: a class with no empty chunk of its own takes
//!   another class's (its pages are still resident) before one from the units, so waiting chunks
//!   never raise the peak of chunk memory (large blocks and the program's own mappings can stack
//!   on them for up to the delay), and a program that frees much in a busy phase builds it again
//!   without faulting it back in.
//!   (Until 2026-11-25 at most 16 MiB waited and the rest was purged at once, in the freeing
//!   thread: frag-free-all took 1.5× the time at scale 3; benches/results/faults.md.)
//! - **Abandoned chunks**, per class: chunks with live slots whose owning thread exited. A heap
//!   that needs a chunk of the class adopts one; the purger (and `trim`) collects their remote
//!   frees and releases those that became empty.
//!
//! Locks: one per class (its empty and abandoned lists), taken before `source`'s region lock,
//! never after. A chunk on a list here has no owner: the holder of the list's lock may touch every
//! field of its header.

use crate::base::class_set::ClassSet;
use crate::base::contention;
use crate::base::lock::{Lock, Rank};
use crate::base::settings;
use crate::base::size_class::NUM_CLASSES;
use crate::chunks::chunk::{self, Chunk};
use crate::chunks::link;
use crate::memory::source;
use crate::os;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Class `c` is in: its empty list may hold a chunk (put in under the class lock when one is
/// pushed, taken out under it when the list empties; read without the lock as a hint).
static NONEMPTY: ClassSet = ClassSet::new();

struct ClassLists {
    /// Empty chunks, newest first, linked through `next`.
    empty: *mut Chunk,
    nempty: usize,
    /// Abandoned chunks, doubly linked through `prev`/`next`.
    abandoned: *mut Chunk,
    nabandoned: usize,
}

// SAFETY: the lists hold chunks no heap owns; access is serialised by the lock.
unsafe impl Send for ClassLists {}

static CLASSES: [Lock<ClassLists>; NUM_CLASSES] = [const {
    Lock::new(
        Rank::Class,
        ClassLists {
            empty: ptr::null_mut(),
            nempty: 0,
            abandoned: ptr::null_mut(),
            nabandoned: 0,
        },
    )
}; NUM_CLASSES];

/// Chunks of each class that exist: owned by heaps, abandoned, or empty here.
static CHUNKS: [AtomicUsize; NUM_CLASSES] = [const { AtomicUsize::new(0) }; NUM_CLASSES];

/// Remote frees collected here (from abandoned chunks) per class, a wrapping count that the
/// heaps' cached-slot counters are offset by (see `heap::class_totals`).
static COLLECTED: [AtomicUsize; NUM_CLASSES] = [const { AtomicUsize::new(0) }; NUM_CLASSES];

/// A chunk of class `class` with no owner and no slot handed out (a retained empty one of the
/// class, else an empty one of another class, else one from the regions' units), or null when out
/// of memory.
pub fn acquire(class: usize) -> *mut Chunk {
    link::init();
    // An empty chunk of the class; else one of another class: its pages are still resident (it
    // has not been purged), so re-initialised for this class it costs no page fault, where a purged
    // or a fresh chunk costs one per page (a program whose sizes drift frees chunks of one class
    // and wants another's).
    let others = NONEMPTY.members();
    let candidates = core::iter::once(class)
        .chain((0..NUM_CLASSES).filter(|&o| o != class && others.contains(o)));
    for from in candidates {
        let c = take_empty(from);
        if c.is_null() {
            continue;
        }
        if from != class {
            CHUNKS[from].fetch_sub(1, Ordering::Relaxed);
            CHUNKS[class].fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: c came off an empty list: no heap owns it and none of its slots is handed out,
        // so it is ours to re-initialise for `class`.
        return unsafe { chunk::init(chunk::base(c), class) };
    }
    let base = source::take_chunk();
    if base.is_null() {
        return ptr::null_mut();
    }
    CHUNKS[class].fetch_add(1, Ordering::Relaxed);
    // SAFETY: a chunk from the regions is aligned, zeroed and ours alone.
    unsafe { chunk::init(base, class) }
}

/// Takes the newest empty chunk of `class` off its list (null when there is none).
fn take_empty(class: usize) -> *mut Chunk {
    let mut l = CLASSES[class].lock();
    let c = l.empty;
    if c.is_null() {
        return c;
    }
    // SAFETY: c heads the empty list, whose lock we hold: its `next` is the list's own link.
    l.empty = unsafe { (*c).next };
    l.nempty -= 1;
    if l.nempty == 0 {
        NONEMPTY.remove(class);
    }
    drop(l);
    c
}

/// Takes back a chunk whose slots are all free: retained, waiting for the purger (`purger_runs`:
/// the caller asked `purge::running`), or purged now.
///
/// # Safety
/// `c` must be a live chunk that no heap owns, with `used == 0`, an empty remote list and no
/// other reference to it.
pub unsafe fn release(c: *mut Chunk, purger_runs: bool) {
    // SAFETY: the caller hands the chunk over.
    let class = unsafe { (*c).class as usize };
    let retain = settings::retained_chunks();
    // Where memory cannot go back to the OS (wasm32), every empty chunk waits here, for any class.
    let keep = !os::RETURNS_MEMORY || purger_runs;
    let mut l = CLASSES[class].lock();
    if l.nempty < retain || keep {
        // SAFETY: as above; we hold the class lock.
        unsafe {
            (*c).emptied_at = os::now_ms();
            (*c).next = l.empty;
        }
        l.empty = c;
        l.nempty += 1;
        NONEMPTY.insert(class);
        return;
    }
    drop(l);
    // SAFETY: as above: a list of one.
    unsafe {
        (*c).next = ptr::null_mut();
        give_list(c)
    };
}

/// [`release`] of a chunk whatever its slots hold (a dropped `Heap`'s: none is referred to any
/// more): its header starts over (nothing carved, no slot counted, no remote frees) and it is
/// released as an empty one (`purger_runs` as for [`release`]).
///
/// # Safety
/// `c` must be a live chunk that no heap owns and no other thread touches (no slot of it live,
/// none waiting in a remote-free batch).
pub unsafe fn release_reset(c: *mut Chunk, purger_runs: bool) {
    // SAFETY: the caller hands the chunk over; its base is CHUNK_SIZE-aligned, ours, read-write.
    unsafe {
        let class = (*c).class as usize;
        let c = chunk::init(chunk::base(c), class);
        release(c, purger_runs);
    }
}

/// Puts a chunk with live slots on its class's abandoned list.
///
/// # Safety
/// `c` must be a live chunk whose owner is gone (`owner` null) and that nobody else refers to.
pub unsafe fn abandon(c: *mut Chunk) {
    // SAFETY: the caller hands the chunk over.
    let class = unsafe { (*c).class as usize };
    let mut l = CLASSES[class].lock();
    // SAFETY: we hold the class lock; c is on no list and ours to link.
    unsafe { chunk::push(&raw mut l.abandoned, c) };
    l.nabandoned += 1;
}

/// Takes an abandoned chunk of class `class` for the calling heap to adopt, or null.
pub fn adopt(class: usize) -> *mut Chunk {
    let mut l = CLASSES[class].lock();
    let c = l.abandoned;
    if !c.is_null() {
        // SAFETY: c heads the abandoned list and we hold its lock.
        unsafe { unlink_abandoned(&mut l, c) };
        contention::adoption();
    }
    c
}

/// # Safety
/// `c` must be on `l`'s abandoned list.
unsafe fn unlink_abandoned(l: &mut ClassLists, c: *mut Chunk) {
    // SAFETY: c is on the list, whose lock the caller holds.
    unsafe { chunk::unlink(&raw mut l.abandoned, c) };
    l.nabandoned -= 1;
}

/// Collects the remote frees of class `class`'s abandoned chunks and takes out those that became
/// empty (linked through `next`; the caller releases or purges them).
fn reap_abandoned(class: usize) -> *mut Chunk {
    let mut l = CLASSES[class].lock();
    let mut out: *mut Chunk = ptr::null_mut();
    let mut c = l.abandoned;
    let mut collected = 0u32;
    while !c.is_null() {
        // SAFETY: c is on the abandoned list, whose lock we hold: no heap owns it, so we may
        // collect its remote frees (as an owner would) and relink it.
        unsafe {
            let next = (*c).next;
            collected += chunk::collect_remote(c);
            if chunk::used(c) == 0 {
                unlink_abandoned(&mut l, c);
                (*c).next = out;
                out = c;
            }
            c = next;
        }
    }
    drop(l);
    COLLECTED[class].fetch_add(collected as usize, Ordering::Relaxed);
    out
}

/// Remote frees collected from abandoned chunks of class `class` so far (wrapping).
pub fn collected(class: usize) -> usize {
    COLLECTED[class].load(Ordering::Relaxed)
}

/// Gives the chunks of a list linked through `next` back to `source` for good, uncounted here
/// (neighbours purged together: [`source::give_chunks`]).
///
/// # Safety
/// Every chunk on the list must satisfy [`release`]'s contract and be off every list here.
unsafe fn give_list(c: *mut Chunk) {
    let mut p = c;
    while !p.is_null() {
        // SAFETY: on the caller's list: ours, its header readable.
        unsafe {
            CHUNKS[(*p).class as usize].fetch_sub(1, Ordering::Relaxed);
            p = (*p).next;
        }
    }
    // SAFETY: forwarded.
    unsafe { source::give_chunks(c) }
}

/// Takes the empty chunks of class `class` beyond the first `keep` that have been empty for
/// `delay_ms` (every one beyond `keep` when `delay_ms` is zero) off its list, onto `out` (linked
/// through `next`): the caller gives the chunks of every class back at once, so that neighbours
/// of different classes are purged together ([`give_list`]).
fn take_expired(class: usize, keep: usize, now: u32, delay_ms: u32, out: &mut *mut Chunk) {
    {
        let mut l = CLASSES[class].lock();
        if l.nempty <= keep {
            return;
        }
        let mut link: *mut *mut Chunk = &mut l.empty;
        let (mut i, mut gone) = (0, 0);
        // SAFETY: every chunk on the empty list is ours while we hold the lock.
        unsafe {
            while !(*link).is_null() {
                let c = *link;
                if i >= keep && now.wrapping_sub((*c).emptied_at) >= delay_ms {
                    *link = (*c).next;
                    (*c).next = *out;
                    *out = c;
                    gone += 1;
                } else {
                    link = &raw mut (*c).next;
                    i += 1;
                }
            }
        }
        l.nempty -= gone;
        if l.nempty == 0 {
            NONEMPTY.remove(class);
        }
    }
}

/// Returns everything returnable: abandoned chunks that became empty, every empty chunk, and the
/// free chunks kept inside partly used huge pages ([`give_expired`] with nothing kept and no
/// delay). Where memory cannot go back to the OS (wasm32), the empty chunks stay for reuse.
pub fn trim() {
    give_expired(0, 0, 0);
    if os::RETURNS_MEMORY {
        source::purge_all_dirty();
    }
}

/// What the source holds of class `class`: the class's chunks, retained empty chunks, abandoned
/// chunks, and the abandoned chunks' `used` and live requested bytes (summed from their headers:
/// nobody else touches an abandoned chunk's counts while we hold its list's lock, but remote
/// freers, whose slots stay in `used` until collected).
pub fn counts(class: usize) -> Counts {
    let l = CLASSES[class].lock();
    let (mut used, mut requested) = (0, 0);
    let mut c = l.abandoned;
    while !c.is_null() {
        // SAFETY: c is on the abandoned list, whose lock we hold: a live header on no heap.
        unsafe {
            used += chunk::used(c) as usize;
            requested += chunk::requested(c) as usize;
            c = (*c).next;
        }
    }
    Counts {
        chunks: CHUNKS[class].load(Ordering::Relaxed),
        retained: l.nempty,
        abandoned: l.nabandoned,
        abandoned_used: used,
        abandoned_requested: requested,
    }
}

/// See [`counts`].
pub struct Counts {
    pub chunks: usize,
    pub retained: usize,
    pub abandoned: usize,
    pub abandoned_used: usize,
    pub abandoned_requested: usize,
}

// ---------------------------------------------------------------------------------------------------
// The chunks' part of a purge period (the thread and the policy: `purge.rs`).

/// Reaps abandoned chunks that became empty and gives back the empty chunks beyond the retained
/// ones that waited `delay_ms` at `now`, and free chunks kept in huge pages above their bound for
/// that long.
pub fn purge_expired(now: u32, delay_ms: u32) {
    give_expired(settings::retained_chunks(), now, delay_ms);
    source::purge_over_bound(now, delay_ms);
}

/// Reaps abandoned chunks that became empty onto their empty lists, then gives back, all classes
/// at once, the empty chunks beyond the first `keep` of each class that waited `delay_ms` at `now`
/// (every one beyond `keep` when `delay_ms` is zero). Where memory cannot go back to the OS
/// (wasm32), none is given back.
fn give_expired(keep: usize, now: u32, delay_ms: u32) {
    let mut expired = ptr::null_mut();
    for class in 0..NUM_CLASSES {
        let mut c = reap_abandoned(class);
        while !c.is_null() {
            // SAFETY: reaped chunks are empty, unowned and off every list: each is released (it
            // waits: the purger is what calls this, or `trim`).
            unsafe {
                let next = (*c).next;
                release(c, true);
                c = next;
            }
        }
        if os::RETURNS_MEMORY {
            take_expired(class, keep, now, delay_ms, &mut expired);
        }
    }
    // SAFETY: the expired chunks left their lists: empty, unowned, referred to by nobody.
    unsafe { give_list(expired) };
}

// ---------------------------------------------------------------------------------------------------
// fork (see `fork.rs`, which takes these in the lock order).

/// Takes every lock of the chunks for `fork`: the class locks in order, then `source`'s.
pub(crate) fn lock_for_fork() {
    for l in CLASSES.iter() {
        core::mem::forget(l.lock());
    }
    source::lock_for_fork();
}

/// Releases the locks taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guards forgotten.
    unsafe {
        source::unlock_after_fork();
        for l in CLASSES.iter() {
            l.force_unlock();
        }
    }
}
