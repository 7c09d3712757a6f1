//! Per-thread heaps: each thread owns its chunks (the mimalloc shape on our pools).
//!
//! A heap holds, per size class, a *current* chunk (the fast path pops its `free` list), a list of
//! other chunks with free slots (`avail`) and a list of full ones (`full`). Only the owning thread
//! touches a heap's lists and its chunks' owner fields; other threads touch a heap only through
//! atomics: its counters (read by `stats`) and its `hint` (set by a remote free that found a full
//! chunk, so the owner looks at its full list again), and `stats` walks its lists under its
//! `lists` lock, which the owner takes only where a chunk changes place (never on a fast path).
//!
//! The path of an allocation and a free through these files, step by step: the diagram in
//! `docs/how-it-works.md` (the only one).
//!
//! Heaps live in memory mapped once and never unmapped (a free list of heaps is reused by new
//! threads), so a remote freer may follow a stale `owner` pointer: the worst it does is set a hint
//! bit in a heap that no longer owns the chunk, and the hint is only a prompt to look.
//!
//! Thread exit (the OS layer's thread-exit hook: a pthread key destructor, a Windows FLS
//! callback): every chunk's remote frees are collected, empty chunks go back to the source,
//! chunks with live slots are abandoned to the source; the thread's counters fold into the orphan
//! totals and the heap goes on the free list. The thread's TLS then names the
//! static *exited* heap: its frees take the remote path and its allocations go to the shared heap,
//! under a lock. Before its first allocation a thread names the static *empty* heap, whose classes
//! all point at a dummy chunk with nothing to hand out, so the fast path needs no check.
//!
//! The files, along mimalloc's seams; each uses only this one and those listed above it:
//!
//! - `mod.rs`: the `ThreadHeap` and `Bin` types, the static *empty* and *exited* heaps, this thread's
//!   TLS word and its heap's start ([`init_heap`]), where a chunk sits in a bin.
//! - `registry.rs`: the heap store, the registry of live and free heaps, the orphan counters.
//! - `counters.rs`: this thread's counters of bytes allocated and deallocated (the fast paths
//!   add to their heap's; the other paths through `count_here`).
//! - `free.rs`: the free fast path, the owner's slow free, an empty chunk retired, remote frees
//!   and their batches.
//! - `alloc.rs`: the allocation fast path, the slow path (refill, remote frees collected, hinted
//!   full chunks), the shared heap.
//! - `fork.rs`: the heap's locks around `fork`.
//! - `thread.rs`: thread exit (abandonment), the heaps a `Heap` owns, this thread's trim.
//! - `stats.rs`: the counts `stats` reads, large blocks' included.
//! - `large.rs`: the large-block entry points (`memory::large`), counted in the thread's heap.

mod alloc;
mod counters;
mod fork;
mod free;
mod large;
mod registry;
mod stats;
mod thread;

pub(crate) use alloc::{alloc, alloc_common, alloc_unsized, resized};
#[cfg(test)]
pub(crate) use counters::set_thread_counts;
pub(crate) use counters::{read as read_counter, thread_counters, thread_counts};
pub(crate) use free::{dealloc, dealloc_unsized};
pub(crate) use large::{
    large_alloc, large_alloc_as, large_alloc_grown, large_dealloc, large_dealloc_as, large_realloc,
};
pub(crate) use stats::{class_totals, count_large, large_totals};
pub(crate) use thread::owned_by;
pub(crate) use thread::{
    flush_current_batches, owned_alloc, owned_destroy, owned_free, owned_new, trim_current_thread,
};
pub(crate) use thread::{
    owned_enter, owned_is_current, owned_leave, owned_release, owned_requested,
};

use crate::base::class_set::ClassSet;
use crate::base::lock::{Lock, Rank};
use crate::base::size_class::{self, COMMON_MAX, NUM_CLASSES};
use crate::chunks::chunk::{self, Chunk, FreeSlot, push};
use crate::os;
use core::ptr;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use free::Batch;
use registry::new_registered_heap;
use thread::thread_exited;

/// One class of a heap. The fast paths count nothing here: a chunk's own `used` and `requested`
/// are the live counts, summed over the heap's chunks by [`class_totals`].
#[repr(C)]
struct Bin {
    /// Cached slots: remote frees this thread made minus remote frees this heap collected
    /// (wrapping).
    cached: AtomicUsize,
    /// Requested bytes of the slots in this heap's batch of this class (owner load + store):
    /// their chunk counts them in `remote_requested` only when the batch is pushed (one atomic
    /// add a batch, not one a block: issue 45), so `stats` takes them off until then.
    batched_requested: AtomicUsize,
    /// Slots the slow path put on this heap's current chunks' free lists for the fast path to
    /// hand out (owner load + store): the small part of `Stats::allocations`.
    supplied: AtomicUsize,
    /// Other chunks with free slots, and full chunks: doubly linked through `prev`/`next`.
    /// `current`, `avail` and `full` (and the links of the chunks on them) change only under the
    /// heap's `lists` lock, so that `stats` can walk them.
    avail: *mut Chunk,
    full: *mut Chunk,
}

/// A thread's heap.
#[repr(C)]
pub(crate) struct ThreadHeap {
    /// Bytes the thread allocated and deallocated since it started, as the requests' sizes
    /// (64 bits, see [`ByteCounter`]; owner load + store): `poolalloc::thread_counters`. The fast paths add to the
    /// heap their TLS word names, so in the heap of a `Heap` scope these are the counts of the
    /// thread in the scope, carried over from `outer` by `owned_enter` and back by `owned_leave`.
    /// First in the heap, where the fast paths reach them with no displacement. Zero in the
    /// static heaps, which nothing writes.
    allocated: ByteCounter,
    deallocated: ByteCounter,
    /// Per request size up to [`COMMON_MAX`] (the index is the size in bytes), the current chunk
    /// of the size's class: `direct[s] == current[class_of(s)]`, kept so by [`set_current`], the
    /// only writer of either. The common allocation (`size_class::class_of_common`) finds its
    /// chunk with one load indexed by the size: no class lookup, and no table static, which a
    /// position-independent executable reaches through the GOT (two loads and two instructions
    /// of index arithmetic fewer). 8 KiB per heap, written once when the heap is made.
    direct: [*mut Chunk; COMMON_MAX + 1],
    /// Per class, the chunk the fast path pops from ([`chunk::dummy`] when none), on neither of
    /// the bin's lists. An array of its own, so the fast path finds it with one scaled load.
    current: [*mut Chunk; NUM_CLASSES],
    bins: [Bin; NUM_CLASSES],
    /// Class `c` is in: a remote free found a full chunk of class `c` (put in by any thread).
    hint: ClassSet,
    /// Large blocks allocated minus freed by this thread, and their bytes (wrapping).
    large_blocks: AtomicUsize,
    large_bytes: AtomicUsize,
    /// Large blocks this thread allocated, and their bytes, since it started (owner load + store).
    large_allocated: AtomicUsize,
    large_allocated_bytes: AtomicUsize,
    /// Held by the owner while it changes which chunks its bins list (slow paths only), and by
    /// `stats` while it walks them. A leaf: nothing else is taken, and nothing allocates, under it.
    lists: Lock<()>,
    /// Registry (or free-list) links, under the registry lock.
    prev: *mut ThreadHeap,
    next: *mut ThreadHeap,
    /// Per class, remote frees waiting to go to their chunk together (owner only).
    batches: [Batch; NUM_CLASSES],
    /// Bit `c`: `batches[c]` holds slots (owner only).
    batched: u64,
    /// A `Heap`'s (own_heap.rs), not a thread's: it never adopts an abandoned chunk (whose live
    /// slots are other heaps' blocks, which dropping the `Heap` would give back with its chunks).
    owned: bool,
    /// In a `Heap` scope's heap (`owned`) while a thread is in the scope: the heap its TLS word
    /// named before (`owned_enter`), the thread's own or an outer scope's.
    outer: *mut ThreadHeap,
}

const fn new_heap() -> ThreadHeap {
    ThreadHeap {
        allocated: ByteCounter::new(0),
        deallocated: ByteCounter::new(0),
        direct: [chunk::dummy(); COMMON_MAX + 1],
        current: [chunk::dummy(); NUM_CLASSES],
        bins: [const {
            Bin {
                cached: AtomicUsize::new(0),
                batched_requested: AtomicUsize::new(0),
                supplied: AtomicUsize::new(0),
                avail: ptr::null_mut(),
                full: ptr::null_mut(),
            }
        }; NUM_CLASSES],
        hint: ClassSet::new(),
        large_blocks: AtomicUsize::new(0),
        large_bytes: AtomicUsize::new(0),
        large_allocated: AtomicUsize::new(0),
        large_allocated_bytes: AtomicUsize::new(0),
        lists: Lock::new(Rank::Lists, ()),
        prev: ptr::null_mut(),
        next: ptr::null_mut(),
        batches: [Batch::EMPTY; NUM_CLASSES],
        batched: 0,
        owned: false,
        outer: ptr::null_mut(),
    }
}

#[repr(transparent)]
struct StaticHeap(ThreadHeap);
// SAFETY: the static heaps are never written: every path checks for them before writing a heap.
unsafe impl Sync for StaticHeap {}

/// The heap of a thread that has not allocated yet.
static EMPTY: StaticHeap = StaticHeap(new_heap());

/// The heap of a thread whose exit hook ran.
static EXITED: StaticHeap = StaticHeap(new_heap());

const fn empty() -> *mut ThreadHeap {
    (&raw const EMPTY.0).cast_mut()
}
const fn exited() -> *mut ThreadHeap {
    (&raw const EXITED.0).cast_mut()
}

// This thread's heap: [`empty`] until its first allocation or free, [`exited`] after its exit hook.
// Const-initialised, no destructor (see the re-entrance trap in DESIGN.md). The OS layer declares
// it (on x86-64 Linux an initial-exec TLS word: one `mov` from `%fs`).
os::tls_word!(mod tls: ThreadHeap = EMPTY);

#[inline(always)]
fn this_heap() -> *mut ThreadHeap {
    tls::get()
}

#[inline(always)]
fn bin(h: *mut ThreadHeap, c: usize) -> *mut Bin {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: c < NUM_CLASSES (classes come from size_class::class_of), so the pointer stays in
    // the heap's bins array; no reference to the heap is made.
    unsafe { (&raw mut (*h).bins).cast::<Bin>().add(c) }
}

/// Where heap `h` keeps the current chunk of class `c`.
#[inline(always)]
fn current(h: *mut ThreadHeap, c: usize) -> *mut *mut Chunk {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: as in `bin`.
    unsafe { (&raw mut (*h).current).cast::<*mut Chunk>().add(c) }
}

/// Where heap `h` keeps the current chunk of requests of `size` bytes (at most [`COMMON_MAX`],
/// aligned to at most 8).
#[inline(always)]
fn direct(h: *mut ThreadHeap, size: usize) -> *mut *mut Chunk {
    debug_assert!(size <= COMMON_MAX);
    // SAFETY: size <= COMMON_MAX (the caller's test), so the pointer stays in the heap's direct
    // array; no reference to the heap is made.
    unsafe { (&raw mut (*h).direct).cast::<*mut Chunk>().add(size) }
}

/// Makes `ch` the current chunk of class `c` in heap `h`, in `current` and in `direct`.
///
/// # Safety
/// The caller owns `h`, which is not a static heap.
unsafe fn set_current(h: *mut ThreadHeap, c: usize, ch: *mut Chunk) {
    // The sizes of class c the direct array covers: those the class table maps to it (above the
    // class below, up to the class's size, at most COMMON_MAX; on musl, where the table rounds
    // sizes from 16 B up to a multiple of 16, none for 24, 40 and 56 B and 16 more for the next).
    let sizes = size_class::common_sizes(c);
    let (lo, hi) = (*sizes.start(), *sizes.end());
    // SAFETY: the caller owns h; c < NUM_CLASSES and every s in lo..=hi is at most COMMON_MAX,
    // so the slice lies in the heap's direct array, which nothing else borrows meanwhile.
    unsafe {
        *current(h, c) = ch;
        if lo <= hi {
            // One `fill` (vector stores): up to 128 entries for the 1 KiB class. A loop over
            // `lo..=hi` compiled to a store per entry with the range's own compares, and this runs
            // on every change of a current chunk: 5% of larson's instructions (issue 40).
            core::slice::from_raw_parts_mut(direct(h, lo), hi - lo + 1).fill(ch);
        }
    }
}

/// Adds `d` (wrapping) to a counter only its owner writes: a load and a store, no read-modify-write.
#[inline(always)]
fn owner_add(a: &AtomicUsize, d: usize) {
    a.store(a.load(Relaxed).wrapping_add(d), Relaxed);
}

/// A thread's counter of bytes allocated or deallocated (`poolalloc::ThreadCounters`): 64 bits
/// wherever the target has 64-bit atomics (every target built in CI), so it does not wrap on
/// 32-bit targets either; there its add is a 64-bit load and store, on 64-bit targets the one
/// `add` of [`owner_add`]. Elsewhere (32-bit MIPS, PowerPC, RISC-V) a `usize`, which wraps at
/// 4 GiB.
#[cfg(target_has_atomic = "64")]
pub(crate) type ByteCounter = core::sync::atomic::AtomicU64;
#[cfg(not(target_has_atomic = "64"))]
pub(crate) type ByteCounter = AtomicUsize;

/// [`owner_add`] for a thread's [`ByteCounter`].
#[inline(always)]
fn owner_add_bytes(a: &ByteCounter, d: usize) {
    #[cfg(target_has_atomic = "64")]
    a.store(a.load(Relaxed).wrapping_add(d as u64), Relaxed);
    #[cfg(not(target_has_atomic = "64"))]
    owner_add(a, d);
}

/// [`owner_add`] for a chunk's 32-bit counters.
#[inline(always)]
fn owner_add32(a: &AtomicU32, d: u32) {
    a.store(a.load(Relaxed).wrapping_add(d), Relaxed);
}

// ---------------------------------------------------------------------------------------------------
// Thread start (thread exit is in `thread.rs`).

/// Gives this thread a heap and arranges for its exit hook. Returns [`exited`] when there is no
/// memory for a heap (the thread then uses the shared heap).
#[cold]
fn init_heap() -> *mut ThreadHeap {
    fork::install();
    let h = new_registered_heap();
    if h.is_null() {
        tls::set(exited());
        return exited();
    }
    tls::set(h);
    register_exit_hook();
    h
}

/// Arranges for [`thread_exited`] to run when the calling thread exits.
fn register_exit_hook() {
    os::watch_thread_exit(thread_exited);
}

// ---------------------------------------------------------------------------------------------------
// Where a chunk sits in a bin (lists are `chunk::push`/`chunk::unlink`), and each place's `notify_at`.

/// Makes `ch` (on no list) the current chunk of bin `b`.
///
/// # Safety
/// The caller owns `ch` and `b`.
unsafe fn make_current(h: *mut ThreadHeap, c: usize, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        chunk::set_notify_at(ch, chunk::NEVER);
        set_current(h, c, ch);
    }
}

/// Puts `ch` (on no list, with live slots) on bin `b`'s list of chunks with free slots.
///
/// # Safety
/// The caller owns `ch` and `b`.
unsafe fn push_avail(b: *mut Bin, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        chunk::set_notify_at(ch, 0);
        push(&raw mut (*b).avail, ch);
    }
}

/// Counts the slots on current chunk `ch`'s free list as supplied to the fast path (they were
/// not counted before: the refill found the list empty, or made the chunk current).
///
/// # Safety
/// The caller owns `ch`, the current chunk of bin `b`, with a non-empty free list.
unsafe fn count_supply(b: *mut Bin, ch: *mut Chunk) {
    // SAFETY: the caller owns ch, so its lists and counts are ours to read.
    unsafe {
        let n = if (*ch).local_free.is_null() {
            // Every carved slot not in use is on `free`: one division, no walk.
            let size = crate::base::size_class::size_of((*ch).class as usize);
            ((*ch).bump as usize - chunk::base(ch) as usize) / size - chunk::used(ch) as usize
        } else {
            // Made current with frees on both lists (rare): count `free` itself.
            let mut n = 0;
            let mut s = (*ch).free;
            while !s.is_null() {
                n += 1;
                s = FreeSlot::next(s);
            }
            n
        };
        owner_add(&(*b).supplied, n);
    }
}
