//! Per-thread heaps: each thread owns its chunks (the mimalloc shape on our pools).
//!
//! A heap holds, per size class, a *current* chunk (the fast path pops its `free` list), a list of
//! other chunks with free slots (`avail`) and a list of full ones (`full`). Only the owning thread
//! touches a heap's lists and its chunks' owner fields; other threads touch a heap only through
//! atomics: its counters (read by `stats`) and its `hint` (set by a remote free that found a full
//! chunk, so the owner looks at its full list again), and `stats` walks its lists under its
//! `lists` lock, which the owner takes only where a chunk changes place (never on a fast path).
//!
//! ```text
//! alloc:  current.free ─ pop ─▶ slot                       (no lock, no atomic)
//!           │ empty
//!           ▼
//!         local_free → free; remote → free (one swap); carve a page of never-used slots
//!           │ still empty: the chunk is full (FULL on `remote`, onto the full list)
//!           ▼
//!         hinted full chunks back to avail; next avail chunk; adopt an abandoned chunk;
//!         a chunk from the source (retained empty, spare, fresh)
//! free:   owner == this heap ─▶ push local_free, used -= 1  (no lock, no atomic)
//!         else ─▶ onto this heap's batch for the class (`Batch`), which goes onto the chunk's
//!                 remote list with one CAS when full, when a free goes to another chunk, or on
//!                 this thread's next slow path; the push that clears FULL sets owner.hint
//! ```
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

use crate::chunk::{self, Chunk, FreeSlot, push, unlink};
use crate::class_set::ClassSet;
use crate::lock::Lock;
use crate::size_class::NUM_CLASSES;
use crate::{fork, os, source};
use core::ptr;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// One class of a heap. The fast paths count nothing here: a chunk's own `used` and `requested`
/// are the live counts, summed over the heap's chunks by [`class_totals`].
#[repr(C)]
struct Bin {
    /// Remote frees this thread made minus remote frees this heap collected (wrapping).
    pending: AtomicUsize,
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
pub struct Heap {
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
    prev: *mut Heap,
    next: *mut Heap,
    /// Per class, remote frees waiting to go to their chunk together (owner only).
    batches: [Batch; NUM_CLASSES],
    /// Bit `c`: `batches[c]` holds slots (owner only).
    batched: u64,
    /// A `Heap`'s (own_heap.rs), not a thread's: it never adopts an abandoned chunk (whose live
    /// slots are other heaps' blocks, which dropping the `Heap` would give back with its chunks).
    owned: bool,
}

/// Remote frees of one class into one chunk, linked through the slots like a free list, waiting
/// to be pushed onto the chunk's `remote` list with one CAS (snmalloc batches remote frees per
/// destination the same way). A batched slot is already counted as freed in the heap's `pending`
/// (so `stats` is exact), and still counted in its chunk's `used` (so the chunk can neither be
/// released nor change class while a batch holds its slots).
struct Batch {
    /// The slots' chunk, or null when the batch is empty.
    chunk: *mut Chunk,
    head: *mut FreeSlot,
    tail: *mut FreeSlot,
    n: u32,
}

/// A batch goes to its chunk once it holds this many bytes (or [`BATCH_SLOTS`] slots), when a
/// remote free of its class goes to another chunk, and when its thread allocates on a slow path,
/// trims or exits. So a thread that stops freeing holds at most one batch per class.
const BATCH_BYTES: usize = 16 << 10;
/// The most slots a batch holds.
const BATCH_SLOTS: u32 = 64;
/// Per class, the slots a batch holds before it goes: `BATCH_BYTES / size`, within 1..=BATCH_SLOTS.
static BATCH_LIMIT: [u32; NUM_CLASSES] = {
    let mut t = [0u32; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        let n = BATCH_BYTES / crate::size_class::CLASS_SIZE[c];
        t[c] = if n < 1 {
            1
        } else if n > BATCH_SLOTS as usize {
            BATCH_SLOTS
        } else {
            n as u32
        };
        c += 1;
    }
    t
};

const fn new_heap() -> Heap {
    Heap {
        current: [chunk::dummy(); NUM_CLASSES],
        bins: [const {
            Bin {
                pending: AtomicUsize::new(0),
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
        lists: Lock::new(()),
        prev: ptr::null_mut(),
        next: ptr::null_mut(),
        batches: [const {
            Batch {
                chunk: ptr::null_mut(),
                head: ptr::null_mut(),
                tail: ptr::null_mut(),
                n: 0,
            }
        }; NUM_CLASSES],
        batched: 0,
        owned: false,
    }
}

#[repr(transparent)]
struct StaticHeap(Heap);
// SAFETY: the static heaps are never written: every path checks for them before writing a heap.
unsafe impl Sync for StaticHeap {}

/// The heap of a thread that has not allocated yet.
static EMPTY: StaticHeap = StaticHeap(new_heap());
/// The heap of a thread whose exit hook ran.
static EXITED: StaticHeap = StaticHeap(new_heap());

const fn empty() -> *mut Heap {
    (&raw const EMPTY.0).cast_mut()
}
const fn exited() -> *mut Heap {
    (&raw const EXITED.0).cast_mut()
}

// This thread's heap: [`empty`] until its first allocation or free, [`exited`] after its exit hook.
// Const-initialised, no destructor (see the re-entrance trap in DESIGN.md). The OS layer declares
// it (on x86-64 Linux an initial-exec TLS word: one `mov` from `%fs`).
os::thread_slot!(mod slot: Heap = EMPTY);

#[inline(always)]
fn this_heap() -> *mut Heap {
    slot::get()
}

#[inline(always)]
fn bin(h: *mut Heap, c: usize) -> *mut Bin {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: c < NUM_CLASSES (classes come from size_class::class_of), so the pointer stays in
    // the heap's bins array; no reference to the heap is made.
    unsafe { (&raw mut (*h).bins).cast::<Bin>().add(c) }
}

/// Where heap `h` keeps the current chunk of class `c`.
#[inline(always)]
fn current(h: *mut Heap, c: usize) -> *mut *mut Chunk {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: as in `bin`.
    unsafe { (&raw mut (*h).current).cast::<*mut Chunk>().add(c) }
}

/// Adds `d` (wrapping) to a counter only its owner writes: a load and a store, no read-modify-write.
#[inline(always)]
fn owner_add(a: &AtomicUsize, d: usize) {
    a.store(a.load(Relaxed).wrapping_add(d), Relaxed);
}

/// [`owner_add`] for a chunk's 32-bit counters.
#[inline(always)]
fn owner_add32(a: &AtomicU32, d: u32) {
    a.store(a.load(Relaxed).wrapping_add(d), Relaxed);
}

// ---------------------------------------------------------------------------------------------------
// The fast paths.

/// A slot of class `c` for a request of `size` bytes, or null when out of memory.
#[inline(always)]
pub fn alloc(c: usize, size: usize) -> *mut u8 {
    alloc_with::<true>(c, size)
}

/// A slot of class `c`, counted in the live blocks but not in the requested bytes (the size-less
/// interface: no size comes back with its free, and the count would cost its fast paths).
#[inline(always)]
pub fn alloc_unsized(c: usize) -> *mut u8 {
    alloc_with::<false>(c, 0)
}

/// Frees slot `p` from [`alloc_unsized`].
///
/// # Safety
/// As [`dealloc`].
#[inline(always)]
pub unsafe fn dealloc_unsized(p: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { dealloc_with::<false>(p, 0) }
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
        chunk::set_used(ch, chunk::used(ch) + 1);
        if REQUESTED {
            owner_add32(&(*ch).requested, size as u32);
        }
        p.cast()
    }
}

/// Frees slot `p`, allocated for `size` bytes.
///
/// # Safety
/// `p` must be a slot handed out by this allocator and not used afterwards.
#[inline(always)]
pub unsafe fn dealloc(p: *mut u8, size: usize) {
    // SAFETY: forwarded contract.
    unsafe { dealloc_with::<true>(p, size) }
}

/// # Safety
/// As [`dealloc`].
#[inline(always)]
unsafe fn dealloc_with<const REQUESTED: bool>(p: *mut u8, size: usize) {
    let h = this_heap();
    let ch = chunk::of(p);
    // SAFETY: p is a live slot, so its chunk header is live; `owner` is an atomic any thread may
    // read, `class` does not change while a slot is live. When `owner` names this heap, this
    // thread owns the chunk and may write its fields.
    unsafe {
        let owner = (*ch).owner.load(Relaxed);
        if owner != h.cast() {
            return free_remote(p, if REQUESTED { size } else { 0 }, h, owner);
        }
        let s = p.cast::<FreeSlot>();
        FreeSlot::set_next(s, (*ch).local_free);
        (*ch).local_free = s;
        let used = chunk::used(ch) - 1;
        chunk::set_used(ch, used);
        if REQUESTED {
            owner_add32(&(*ch).requested, (size as u32).wrapping_neg());
        }
        if used == (*ch).notify_at {
            // The slow paths take `p` and find the chunk again: one register fewer here.
            free_slow(p, h);
        }
    }
}

/// Small block `p` stays in place while its requested size changes from `old` to `new`.
///
/// # Safety
/// `p` must be a live small block of this allocator.
#[inline]
pub unsafe fn resized(p: *mut u8, old: usize, new: usize) {
    let ch = chunk::of(p);
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
// The slow paths.

#[cold]
#[inline(never)]
// Arguments in the order the fast path holds them (the request's size stays in its register).
fn alloc_slow(size: usize, c: usize, h: *mut Heap) -> *mut u8 {
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
        alloc_from(h, c, size)
    }
}

/// Pops a slot of class `c` from heap `h`, refilling its current chunk as needed.
///
/// # Safety
/// The caller must own `h` (its thread, or the shared heap's lock).
unsafe fn alloc_from(h: *mut Heap, c: usize, size: usize) -> *mut u8 {
    // SAFETY: the caller owns h and so every chunk on its lists.
    unsafe {
        let ch = refill(h, c);
        if ch.is_null() {
            return ptr::null_mut();
        }
        let p = (*ch).free;
        (*ch).free = FreeSlot::next(p);
        chunk::set_used(ch, chunk::used(ch) + 1);
        owner_add32(&(*ch).requested, size as u32);
        p.cast()
    }
}

/// Makes class `c`'s current chunk one with a slot on `free` and returns it (null when out of
/// memory). The order of DESIGN.md: the current chunk's local and remote frees, never-used slots,
/// hinted full chunks, the next chunk with free slots, an abandoned chunk, the source.
///
/// # Safety
/// The caller must own `h`.
unsafe fn refill(h: *mut Heap, c: usize) -> *mut Chunk {
    // SAFETY: the caller owns h and every chunk on its lists.
    unsafe {
        let b = bin(h, c);
        let mut adopted = 0;
        // The current chunk was made current by this call: its free list is new supply.
        let mut fresh = false;
        loop {
            let ch = *current(h, c);
            if !(*ch).free.is_null() {
                if fresh {
                    count_supply(b, ch);
                }
                return ch;
            }
            if ch != chunk::dummy() {
                if chunk::take_local(ch) {
                    // Remote frees are collected on every refill too, so they never wait long.
                    collect(b, ch);
                    count_supply(b, ch);
                    return ch;
                }
                if collect(b, ch) > 0 || chunk::extend(ch) > 0 {
                    count_supply(b, ch);
                    return ch;
                }
                // Nothing left: to the full list, unless remote frees came in meanwhile.
                if !chunk::try_mark_full(ch) {
                    continue;
                }
                (*ch).in_full = true;
                (*ch).notify_at = chunk::used(ch) - 1;
                let _l = (*h).lists.lock();
                push(&raw mut (*b).full, ch);
                *current(h, c) = chunk::dummy();
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
                let a = source::adopt(c);
                if !a.is_null() {
                    adopted += 1;
                    (*a).owner.store(h.cast(), Relaxed);
                    let _l = (*h).lists.lock();
                    make_current(h, c, a);
                    continue;
                }
            }
            let n = source::acquire(c);
            if n.is_null() {
                return ptr::null_mut();
            }
            (*n).owner.store(h.cast(), Relaxed);
            let _l = (*h).lists.lock();
            make_current(h, c, n);
        }
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
            let size = crate::size_class::size_of((*ch).class as usize);
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

/// Collects chunk `ch`'s remote frees into its free list, counting them against `b`'s pending.
///
/// # Safety
/// The caller owns `ch`, which belongs to bin `b`.
unsafe fn collect(b: *mut Bin, ch: *mut Chunk) -> u32 {
    // SAFETY: forwarded.
    unsafe {
        let n = chunk::collect_remote(ch);
        if n > 0 {
            owner_add(&(*b).pending, (n as usize).wrapping_neg());
        }
        n
    }
}

/// Moves the full chunks of class `c` that got remote frees since they were marked back to the
/// heap's chunks with free slots (or gives them back, if every slot is now free).
///
/// # Safety
/// The caller must own `h`.
unsafe fn unfull_hinted(h: *mut Heap, c: usize) {
    // SAFETY: the caller owns h and its lists.
    unsafe {
        let b = bin(h, c);
        let mut ch = (*b).full;
        while !ch.is_null() {
            let next = (*ch).next;
            if (*ch).remote.load(Relaxed) & chunk::FULL == 0 {
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

/// The owner freed a slot into a chunk whose `used` reached `notify_at`: the first free into a
/// full chunk, or the last live slot of a chunk on the avail list.
#[cold]
#[inline(never)]
unsafe fn free_slow(p: *mut u8, h: *mut Heap) {
    let ch = chunk::of(p);
    // SAFETY: the caller (dealloc) checked that h owns ch.
    unsafe {
        let c = (*ch).class as usize;
        let b = bin(h, c);
        let l = (*h).lists.lock();
        if (*ch).in_full {
            unlink(&raw mut (*b).full, ch);
            (*ch).in_full = false;
            // A remote free may have cleared FULL already (and hinted us): either way it is gone.
            (*ch).remote.fetch_and(!chunk::FULL, Relaxed);
            if *current(h, c) == chunk::dummy() {
                make_current(h, c, ch);
            } else {
                push_avail(b, ch);
            }
        } else if chunk::used(ch) == 0 {
            // On the avail list, now empty: give it back, unless the class has no current chunk.
            unlink(&raw mut (*b).avail, ch);
            if *current(h, c) == chunk::dummy() {
                make_current(h, c, ch);
                // Remote frees collected while it waited on the avail list are on `free`: the
                // fast path will hand them out with no refill, so they are supplied now.
                if !(*ch).free.is_null() {
                    count_supply(b, ch);
                }
            } else {
                drop(l);
                retire(ch);
            }
        }
    }
}

/// Gives an empty chunk the heap no longer lists back to the source.
///
/// # Safety
/// The caller owns `ch`, which is on no list and has `used == 0`.
unsafe fn retire(ch: *mut Chunk) {
    // SAFETY: forwarded; with used == 0 no slot is handed out, so no remote free can arrive.
    unsafe {
        (*ch).owner.store(ptr::null_mut(), Relaxed);
        source::release(ch);
    }
}

/// A free by a thread that does not own the slot's chunk (or has no heap yet, or has exited).
/// The slot joins this heap's batch for its class ([`Batch`]), unless the chunk has no owner (its
/// thread exited: nobody allocates from it, and the source reaps it once it empties) or this
/// thread has no heap: then it goes to the chunk at once.
#[cold]
#[inline(never)]
// Arguments in the order the fast path holds them, as `alloc_slow`'s.
unsafe fn free_remote(p: *mut u8, size: usize, h: *mut Heap, owner: *mut u8) {
    let ch = chunk::of(p);
    let h = if h == empty() { init_heap() } else { h };
    // SAFETY: p is a handed-out slot of ch that nobody uses any more (caller): until it is pushed
    // the chunk cannot change hands, so its class and `remote_requested` are this chunk's.
    let c = unsafe {
        if size != 0 {
            (*ch).remote_requested.fetch_add(size as u32, Relaxed);
        }
        (*ch).class as usize
    };
    if h == exited() || owner.is_null() {
        // SAFETY: as above.
        let was_full = unsafe { chunk::push_remote(ch, p.cast(), p.cast()) };
        hint_if_full(was_full, owner, c);
        if h == exited() {
            ORPHAN[c].pending.fetch_add(1, Relaxed);
        } else {
            // SAFETY: h is this thread's heap: its counters are ours to write.
            unsafe { owner_add(&(*bin(h, c)).pending, 1) };
        }
        return;
    }
    // SAFETY: h is this thread's heap (batches and counters are ours); p is ours to link until
    // its batch is pushed.
    unsafe {
        owner_add(&(*bin(h, c)).pending, 1);
        let b = batch(h, c);
        let s = p.cast::<FreeSlot>();
        if (*b).chunk == ch {
            FreeSlot::set_next(s, (*b).head);
            (*b).head = s;
            (*b).n += 1;
        } else {
            if !(*b).chunk.is_null() {
                flush(h, c);
            }
            FreeSlot::set_next(s, ptr::null_mut());
            *b = Batch {
                chunk: ch,
                head: s,
                tail: s,
                n: 1,
            };
            (*h).batched |= 1 << c;
        }
        if (*b).n >= BATCH_LIMIT[c] {
            flush(h, c);
        }
    }
}

/// Heap `h`'s batch of class `c`.
#[inline(always)]
fn batch(h: *mut Heap, c: usize) -> *mut Batch {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: as in `bin`.
    unsafe { (&raw mut (*h).batches).cast::<Batch>().add(c) }
}

/// Pushes heap `h`'s batch of class `c` (not empty) onto its chunk's remote list.
///
/// # Safety
/// The caller owns `h`.
unsafe fn flush(h: *mut Heap, c: usize) {
    // SAFETY: the caller owns h; the batch's slots are live in the chunk's count until the push,
    // so the chunk is live and keeps its class; after the push they are the owner's.
    unsafe {
        let b = batch(h, c);
        let ch = (*b).chunk;
        debug_assert!(!ch.is_null());
        // Read before the push: after it the chunk may be collected and released.
        let owner = (*ch).owner.load(Relaxed);
        let was_full = chunk::push_remote(ch, (*b).head, (*b).tail);
        hint_if_full(was_full, owner, c);
        *b = Batch {
            chunk: ptr::null_mut(),
            head: ptr::null_mut(),
            tail: ptr::null_mut(),
            n: 0,
        };
        (*h).batched &= !(1 << c);
    }
}

/// Pushes every batch heap `h` holds.
///
/// # Safety
/// The caller owns `h`.
unsafe fn flush_all(h: *mut Heap) {
    // SAFETY: forwarded.
    unsafe {
        let mut bits = (*h).batched;
        while bits != 0 {
            flush(h, bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
}

/// A remote free that cleared a chunk's FULL flag tells its owner (read before the push), so
/// the owner looks at its full list again. Heaps are never unmapped, so a stale owner only gets a
/// spurious hint.
#[inline]
fn hint_if_full(was_full: bool, owner: *mut u8, c: usize) {
    if was_full && !owner.is_null() {
        // SAFETY: owner points at a heap in the heap arena (or a static heap).
        unsafe { (*owner.cast::<Heap>()).hint.insert(c) };
    }
}

// ---------------------------------------------------------------------------------------------------
// Where a chunk sits in a bin (lists are `chunk::push`/`chunk::unlink`), and each place's `notify_at`.

/// Makes `ch` (on no list) the current chunk of bin `b`.
///
/// # Safety
/// The caller owns `ch` and `b`.
unsafe fn make_current(h: *mut Heap, c: usize, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        (*ch).notify_at = chunk::NEVER;
        *current(h, c) = ch;
    }
}

/// Puts `ch` (on no list, with live slots) on bin `b`'s list of chunks with free slots.
///
/// # Safety
/// The caller owns `ch` and `b`.
unsafe fn push_avail(b: *mut Bin, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        (*ch).notify_at = 0;
        push(&raw mut (*b).avail, ch);
    }
}

// ---------------------------------------------------------------------------------------------------
// The shared heap: allocations by threads whose exit hook already ran.

struct Shared(*mut Heap);
// SAFETY: the heap is used only under the lock.
unsafe impl Send for Shared {}
static SHARED: Lock<Shared> = Lock::new(Shared(ptr::null_mut()));

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

// ---------------------------------------------------------------------------------------------------
// Heaps: the arena, the registry, thread start and exit.

/// Live heaps (for stats) and free heaps (for reuse), under one lock.
struct Registry {
    live: *mut Heap,
    free: *mut Heap,
    /// Unused space of the last arena block.
    arena: *mut u8,
    arena_left: usize,
}
// SAFETY: the pointers name heaps in the arena; access is serialised by the lock.
unsafe impl Send for Registry {}
static REGISTRY: Lock<Registry> = Lock::new(Registry {
    live: ptr::null_mut(),
    free: ptr::null_mut(),
    arena: ptr::null_mut(),
    arena_left: 0,
});

/// Bytes the heap arena maps at a time.
const ARENA_BLOCK: usize = 256 * 1024;

/// Counters of threads that exited (and remote frees of threads with no heap): pending and
/// supplied per class, updated with atomic read-modify-writes.
static ORPHAN: [Bin; NUM_CLASSES] = [const {
    Bin {
        pending: AtomicUsize::new(0),
        supplied: AtomicUsize::new(0),
        avail: ptr::null_mut(),
        full: ptr::null_mut(),
    }
}; NUM_CLASSES];
// SAFETY: shared bins (ORPHAN) are used through their atomics only; their pointer fields are null
// and never written.
unsafe impl Sync for Bin {}
/// The large-block counters of threads that exited (and of frees by threads with no heap):
/// `large_blocks`, `large_bytes`, `large_allocated`, `large_allocated_bytes`, in that order.
static ORPHAN_LARGE: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// A fresh heap on the registry, or null when the OS has no memory.
fn new_registered_heap() -> *mut Heap {
    let mut r = REGISTRY.lock();
    let h = if !r.free.is_null() {
        let h = r.free;
        // SAFETY: heaps on the free list are ours under the lock, and were reset at exit.
        r.free = unsafe { (*h).next };
        h
    } else {
        let size = core::mem::size_of::<Heap>().next_multiple_of(64);
        if r.arena_left < size {
            let m = os::map(ARENA_BLOCK);
            if m.is_null() {
                return ptr::null_mut();
            }
            r.arena = m;
            r.arena_left = ARENA_BLOCK;
        }
        let h = r.arena.cast::<Heap>();
        // SAFETY: the arena block has room for the heap; it is 64-aligned (page + multiples of 64).
        unsafe {
            h.write(new_heap());
            r.arena = r.arena.add(size);
        }
        r.arena_left -= size;
        h
    };
    // SAFETY: h is ours under the lock; a heap from the free list may have been a `Heap`'s.
    unsafe { (*h).owned = false };
    // SAFETY: h is ours; registry links are guarded by the lock we hold.
    unsafe {
        (*h).prev = ptr::null_mut();
        (*h).next = r.live;
        if !r.live.is_null() {
            (*r.live).prev = h;
        }
    }
    r.live = h;
    h
}

/// Gives this thread a heap and arranges for its exit hook. Returns [`exited`] when there is no
/// memory for a heap (the thread then uses the shared heap).
#[cold]
fn init_heap() -> *mut Heap {
    fork::install(lock_for_fork, unlock_after_fork);
    let h = new_registered_heap();
    if h.is_null() {
        slot::set(exited());
        return exited();
    }
    slot::set(h);
    register_exit_hook();
    h
}

/// Arranges for [`thread_exited`] to run when the calling thread exits.
fn register_exit_hook() {
    os::watch_thread_exit(thread_exited);
}

/// The thread-exit hook: abandons the thread's heap (the OS layer calls it as the thread exits).
fn thread_exited() {
    let h = this_heap();
    if h == empty() || h == exited() {
        return;
    }
    slot::set(exited());
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
unsafe fn abandon_all(h: *mut Heap) {
    let mut abandoned = false;
    // SAFETY: the caller owns h and its chunks; each chunk handed to the closure is off every
    // list of h, and is given to the source (empty) or abandoned (with live slots).
    unsafe {
        take_all_chunks(h, |b, ch| {
            collect(b, ch);
            (*ch).owner.store(ptr::null_mut(), Relaxed);
            if chunk::used(ch) == 0 {
                source::release(ch);
            } else {
                abandoned = true;
                source::abandon(ch);
            }
        });
        unregister(h);
    }
    if abandoned {
        // The purger reaps abandoned chunks whose blocks other threads free.
        source::ensure_purger();
    }
}

/// Takes every chunk off `h`'s lists, class by class (under the `lists` lock `stats` walks them
/// with), and hands each to `give` with its bin, `in_full` cleared; clears `h`'s hints.
///
/// # Safety
/// The caller owns `h` and its chunks; `give` takes each chunk over (`h` no longer lists it).
unsafe fn take_all_chunks(h: *mut Heap, mut give: impl FnMut(*mut Bin, *mut Chunk)) {
    // SAFETY: the caller owns h and every chunk on its lists.
    unsafe {
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            let cur = *current(h, c);
            let (avail, full) = ((*b).avail, (*b).full);
            {
                // Off the lists first (under the lock `stats` walks them with), then given away.
                let _l = (*h).lists.lock();
                *current(h, c) = chunk::dummy();
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

/// Folds `h`'s counters into the orphan totals, takes it off the registry and puts it on the free
/// list for reuse.
///
/// # Safety
/// The caller owns `h`, whose lists are empty, and nobody uses it afterwards.
unsafe fn unregister(h: *mut Heap) {
    // SAFETY: forwarded; the registry links are guarded by its lock.
    unsafe {
        let mut r = REGISTRY.lock();
        for (c, o) in ORPHAN.iter().enumerate() {
            let b = bin(h, c);
            o.pending.fetch_add((*b).pending.swap(0, Relaxed), Relaxed);
            o.supplied.fetch_add((*b).supplied.swap(0, Relaxed), Relaxed);
        }
        for (o, x) in ORPHAN_LARGE.iter().zip([
            &(*h).large_blocks,
            &(*h).large_bytes,
            &(*h).large_allocated,
            &(*h).large_allocated_bytes,
        ]) {
            o.fetch_add(x.swap(0, Relaxed), Relaxed);
        }
        let (p, n) = ((*h).prev, (*h).next);
        if p.is_null() {
            r.live = n;
        } else {
            (*p).next = n;
        }
        if !n.is_null() {
            (*n).prev = p;
        }
        (*h).prev = ptr::null_mut();
        (*h).next = r.free;
        r.free = h;
    }
}

// ---------------------------------------------------------------------------------------------------
// Heaps that no thread names as its own: `Heap` (own_heap.rs) uses one under its lock.

/// A fresh heap on the registry (so `stats` counts its chunks) that no thread names as its own;
/// null when the OS has no memory.
pub(crate) fn owned_new() -> *mut Heap {
    // A program may use a `Heap` with another global allocator: the fork hooks, which take every
    // lock of the pools, must be installed before the first chunk all the same.
    fork::install(lock_for_fork, unlock_after_fork);
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
pub(crate) unsafe fn owned_alloc(h: *mut Heap, c: usize, size: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe { alloc_from(h, c, size) }
}

/// Frees slot `p` of `size` bytes into `h`, its chunk's owner, as the owner's own free does.
///
/// # Safety
/// The caller owns `h`; `p` is a live slot handed out by [`owned_alloc`] from `h`.
pub(crate) unsafe fn owned_free(h: *mut Heap, p: *mut u8, size: usize) {
    let ch = chunk::of(p);
    // SAFETY: p is a live slot of a chunk h owns (caller): h's owner may write its fields.
    unsafe {
        let s = p.cast::<FreeSlot>();
        FreeSlot::set_next(s, (*ch).local_free);
        (*ch).local_free = s;
        let used = chunk::used(ch) - 1;
        chunk::set_used(ch, used);
        owner_add32(&(*ch).requested, (size as u32).wrapping_neg());
        if used == (*ch).notify_at {
            free_slow(p, h);
        }
    }
}

/// Whether slot `p`'s chunk is owned by `h` (a `Heap` checks a free with it under `hardened`).
///
/// # Safety
/// `p` is in a chunk of ours.
#[cfg(feature = "hardened")]
pub(crate) unsafe fn owned_by(h: *mut Heap, p: *mut u8) -> bool {
    // SAFETY: p's chunk header is live (caller); `owner` is an atomic.
    unsafe { (*chunk::of(p)).owner.load(Relaxed) == h.cast() }
}

/// Gives back every chunk of `h` at once, whatever its slots hold (none is referred to any more:
/// caller), without visiting them, and retires `h`.
///
/// # Safety
/// The caller owns `h`, which came from [`owned_new`], made no remote frees (so holds no batch),
/// and no slot of it is live or waiting in another thread's batch.
pub(crate) unsafe fn owned_destroy(h: *mut Heap) {
    // SAFETY: the caller owns h and every chunk on its lists, none of whose slots anyone refers
    // to: each chunk handed to the closure is off every list and discarded whole.
    unsafe {
        debug_assert_eq!((*h).batched, 0);
        take_all_chunks(h, |_, ch| {
            (*ch).owner.store(ptr::null_mut(), Relaxed);
            source::discard(ch);
        });
        unregister(h);
    }
}

/// Gives back this thread's empty chunks (current ones included), after collecting their remote
/// frees. Part of `trim`.
pub fn trim_current_thread() {
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
                    *current(h, c) = chunk::dummy();
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

// ---------------------------------------------------------------------------------------------------
// Counters for stats and large blocks.

/// Counts a large block of `bytes` allocated (`add`) or freed by this thread.
#[inline]
pub fn count_large(add: bool, bytes: usize) {
    let mut h = this_heap();
    if h == empty() {
        h = init_heap();
    }
    let (n, b) = if add {
        (1usize, bytes)
    } else {
        (usize::MAX, bytes.wrapping_neg())
    };
    let (an, ab) = if add { (1, bytes) } else { (0, 0) };
    if h == exited() {
        for (o, d) in ORPHAN_LARGE.iter().zip([n, b, an, ab]) {
            o.fetch_add(d, Relaxed);
        }
        return;
    }
    // SAFETY: h is this thread's registered heap; only this thread writes its counters.
    unsafe {
        owner_add(&(*h).large_blocks, n);
        owner_add(&(*h).large_bytes, b);
        if add {
            owner_add(&(*h).large_allocated, an);
            owner_add(&(*h).large_allocated_bytes, ab);
        }
    }
}

/// Large blocks live and their bytes, large blocks allocated and their bytes since start
/// (wrapping sums over every heap and the orphans).
pub fn large_totals() -> [usize; 4] {
    let r = REGISTRY.lock();
    let mut t = ORPHAN_LARGE.each_ref().map(|o| o.load(Relaxed));
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the lock; we read atomics only.
        unsafe {
            let x = [
                &(*h).large_blocks,
                &(*h).large_bytes,
                &(*h).large_allocated,
                &(*h).large_allocated_bytes,
            ];
            for (t, x) in t.iter_mut().zip(x) {
                *t = t.wrapping_add(x.load(Relaxed));
            }
            h = (*h).next;
        }
    }
    t
}

/// The counts of one class that `stats` starts from, as wrapping sums over the heaps.
#[derive(Clone, Copy, Default)]
pub struct ClassTotals {
    /// `used` summed over the chunks the heaps own: live slots plus remote frees not yet collected.
    pub used: usize,
    /// Live requested bytes of those chunks.
    pub requested: usize,
    /// Remote frees not yet collected (from any chunk, the source's abandoned ones included).
    pub pending: usize,
    /// Slots supplied to the fast paths since start.
    pub supplied: usize,
}

/// Per class: the counts of the chunks every heap owns (read from their headers, walking each
/// heap's lists under its `lists` lock), remote frees not yet collected, slots supplied.
pub fn class_totals() -> [ClassTotals; NUM_CLASSES] {
    let mut t = [ClassTotals::default(); NUM_CLASSES];
    let r = REGISTRY.lock();
    for (c, o) in ORPHAN.iter().enumerate() {
        t[c].pending = o.pending.load(Relaxed).wrapping_sub(source::collected(c));
        t[c].supplied = o.supplied.load(Relaxed);
    }
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the registry lock. Under the
        // heap's `lists` lock its bins' lists hold only chunks it owns, which stay mapped and
        // live; their counts are atomics (the owner's fast path writes them meanwhile).
        unsafe {
            let l = (*h).lists.lock();
            for (c, x) in t.iter_mut().enumerate() {
                let b = bin(h, c);
                x.pending = x.pending.wrapping_add((*b).pending.load(Relaxed));
                x.supplied = x.supplied.wrapping_add((*b).supplied.load(Relaxed));
                for first in [*current(h, c), (*b).avail, (*b).full] {
                    let mut ch = first;
                    while !ch.is_null() && ch != chunk::dummy() {
                        x.used += chunk::used(ch) as usize;
                        // Racing a remote free, a chunk's figure can dip below zero: skip it.
                        let r = chunk::requested(ch) as usize;
                        x.requested += if r > chunk::CHUNK_SIZE { 0 } else { r };
                        ch = if first == *current(h, c) {
                            ptr::null_mut()
                        } else {
                            (*ch).next
                        };
                    }
                }
            }
            drop(l);
            h = (*h).next;
        }
    }
    t
}

// ---------------------------------------------------------------------------------------------------
// fork (see `fork.rs`, which takes every lock in the lock order; the heap's come first).

/// Takes the heap's locks for `fork`: the shared heap's, the registry's, then every registered
/// heap's `lists` lock (so that `stats` in the child cannot wait on a thread that is not there).
fn lock_for_fork() {
    core::mem::forget(SHARED.lock());
    let r = REGISTRY.lock();
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the registry lock.
        unsafe {
            core::mem::forget((*h).lists.lock());
            h = (*h).next;
        }
    }
    core::mem::forget(r);
}

/// Releases the locks taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
unsafe fn unlock_after_fork() {
    // SAFETY: lock_for_fork took both in this thread and forgot the guards; in a child this
    // thread is the only one, and the copies of the locks are held by it.
    unsafe {
        // The registry lock is still held, so its list of heaps is the one locked above.
        let mut h = (*REGISTRY.as_mut_ptr()).live;
        while !h.is_null() {
            (*h).lists.force_unlock();
            h = (*h).next;
        }
        REGISTRY.force_unlock();
        SHARED.force_unlock();
    }
}
