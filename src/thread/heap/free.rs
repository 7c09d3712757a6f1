//! Frees: the fast path (the owner's free: a push, no lock, no atomic), the owner's slow free (a
//! chunk leaves the full list, or empties on the avail list), an empty chunk retired to the
//! source, and remote frees, batched per class and pushed onto their chunk with one CAS.

use super::registry::ORPHAN;
use super::{ThreadHeap, bin, count_supply, current, empty, exited, init_heap, make_current};
use super::{owner_add, owner_add_bytes, owner_add32, push_avail, this_heap};
use crate::base::contention;
use crate::base::size_class::NUM_CLASSES;
use crate::chunks::chunk::{self, Chunk, FreeSlot, unlink};
use crate::chunks::{message, remote_list};
use crate::{memory::chunk_lists, memory::purge};
use core::ptr;
use core::sync::atomic::Ordering::Relaxed;

// ---------------------------------------------------------------------------------------------------
// The fast path.

/// Frees slot `p`, allocated for `size` bytes.
///
/// # Safety
/// `p` must be a slot handed out by this allocator and not used afterwards.
#[inline(always)]
pub(crate) unsafe fn dealloc(p: *mut u8, size: usize) {
    // SAFETY: forwarded contract.
    unsafe { dealloc_with::<true>(p, size) }
}

/// Frees slot `p` from [`alloc_unsized`](super::alloc_unsized).
///
/// # Safety
/// As [`dealloc`].
#[inline(always)]
pub(crate) unsafe fn dealloc_unsized(p: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { dealloc_with::<false>(p, 0) }
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
        // The slow paths read `owner` and this thread's heap again: the fast path keeps neither
        // in a register, and the compare takes `owner` straight from memory.
        if (*ch).owner.load(Relaxed) != h.cast() {
            return free_remote(p, if REQUESTED { size } else { 0 });
        }
        let s = p.cast::<FreeSlot>();
        FreeSlot::set_next(s, (*ch).local_free);
        (*ch).local_free = s;
        if REQUESTED {
            owner_add32(&(*ch).requested, (size as u32).wrapping_neg());
            // The owner test passed, so h is this thread's heap, not a static one: its counter
            // (one `add`). A remote free counts in `free_remote`.
            owner_add_bytes(&(*h).deallocated, size);
        }
        // Last, so that the branch takes the decrement's flags.
        if chunk::free_one(ch) {
            // The slow paths take `p` and find the chunk and the heap again: fewer registers
            // here.
            free_slow(p);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The owner's slow free.

/// The owner freed a slot into a chunk whose `used` reached `notify_at`: the first free into a
/// full chunk, or the last live slot of a chunk on the avail list.
#[cold]
#[inline(never)]
pub(super) unsafe fn free_slow(p: *mut u8) {
    let ch = chunk::of(p);
    // SAFETY: the caller owns ch (dealloc checked `owner`; a `Heap`'s free holds its lock), so
    // `owner` names its heap h, which the caller owns too.
    unsafe {
        let h = (*ch).owner.load(Relaxed).cast::<ThreadHeap>();
        let c = (*ch).class as usize;
        let b = bin(h, c);
        let l = (*h).lists.lock();
        if (*ch).in_full {
            unlink(&raw mut (*b).full, ch);
            (*ch).in_full = false;
            // A remote free may have cleared FULL already (and hinted us): either way it is gone.
            remote_list::clear_full(&(*ch).remote);
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
pub(super) unsafe fn retire(ch: *mut Chunk) {
    // SAFETY: forwarded; with used == 0 no slot is handed out, so no remote free can arrive.
    unsafe {
        (*ch).owner.store(ptr::null_mut(), Relaxed);
        chunk_lists::release(ch, purge::running());
    }
}

// ---------------------------------------------------------------------------------------------------
// Remote frees and their batches.

/// Remote frees of one class into one chunk (a run), waiting to be pushed onto the chunk's
/// `remote` list with one CAS (snmalloc batches remote frees per destination the same way). In a
/// class that carries messages ([`message`]) the run is a message: its first slot holds the
/// indices of the others, which the freeing thread never writes (issue 45, step 3); in the
/// others its slots are linked like a free list. A batched slot is already counted as cached in
/// the heap's `cached` (so `stats` is exact), and still counted in its chunk's `used` (so the
/// chunk can neither be released nor change class while a batch holds its slots).
pub(super) struct Batch {
    /// The slots' chunk, or null when the batch is empty.
    chunk: *mut Chunk,
    /// The first slot: the message, or the head of the linked slots.
    head: *mut FreeSlot,
    /// The last linked slot (the message itself, in a class that carries messages).
    tail: *mut FreeSlot,
    n: u32,
    /// The slots' requested bytes, added to the chunk's `remote_requested` with the push.
    bytes: u32,
}

impl Batch {
    /// A batch with no slots.
    pub(super) const EMPTY: Batch = Batch {
        chunk: ptr::null_mut(),
        head: ptr::null_mut(),
        tail: ptr::null_mut(),
        n: 0,
        bytes: 0,
    };
}

/// Per class, the slots a batch holds before it goes: a full message (its own slot and
/// `message::INDICES`), or in a class that links its slots `MAX_BYTES / size` within
/// 1..=`MAX_SLOTS`. A batch also goes when a remote free of its class goes to another chunk, and
/// when its thread allocates on a slow path, trims or exits. So a thread that stops freeing holds
/// at most one batch per class.
static BATCH_LIMIT: [u32; NUM_CLASSES] = {
    let mut t = [0u32; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        let k = message::INDICES[c] as u32;
        let n = message::MAX_BYTES / crate::base::size_class::CLASS_SIZE[c];
        t[c] = if k != 0 {
            k + 1
        } else if n < 1 {
            1
        } else if n > message::MAX_SLOTS {
            message::MAX_SLOTS as u32
        } else {
            n as u32
        };
        c += 1;
    }
    t
};

/// A free by a thread that does not own the slot's chunk (or has no heap yet, or has exited).
/// The slot joins this heap's batch for its class ([`Batch`]), unless this thread has exited (its
/// heap is the static *exited* one): then it goes to the chunk at once. A thread with no heap yet
/// takes one first. A chunk with no owner (its thread exited; the source reaps it once it
/// empties) is batched like any other: the batch goes out at the latest when this thread next
/// allocates on a slow path, trims or exits, and the push is the same. Until 2026-12-04 such a
/// slot went at once, two atomics a block: the blocks short threads leave to a long-lived one
/// took 0.91 of the time batched (issue 46, `benches/results/local-churn-2026-12-04.md`).
#[cold]
#[inline(never)]
// Arguments in the order the fast path holds them, as `alloc_slow`'s (alloc.rs).
unsafe fn free_remote(p: *mut u8, size: usize) {
    let ch = chunk::of(p);
    let h = this_heap();
    // SAFETY: p is a handed-out slot (caller), so its chunk header is live and its class fixed.
    // `batch(h, c)` lies in h's batches whatever h is: the static heaps (empty, exited) never
    // batch, so a batch that names ch is one of this thread's own heap, whose batches and
    // counters are ours to write, and p is ours to write until the batch is pushed.
    unsafe {
        let c = (*ch).class as usize;
        let b = batch(h, c);
        // The common case, with as few registers as it needs (the rest, which saves six, is a
        // tail call): the slot joins the batch open for its chunk, which has room left.
        // (`class` is below NUM_CLASSES: the table needs no bounds check.)
        if (*b).chunk == ch && (*b).n + 1 < *BATCH_LIMIT.get_unchecked(c) {
            owner_add_bytes(&(*h).deallocated, size);
            join(h, c, p, size);
            return;
        }
        free_remote_slow(p, size)
    }
}

/// [`free_remote`] where the slot does not simply join an open batch: the batch goes (full, or
/// of another chunk), or this thread has no heap yet or has exited.
#[cold]
#[inline(never)]
unsafe fn free_remote_slow(p: *mut u8, size: usize) {
    let ch = chunk::of(p);
    let h = this_heap();
    let h = if h == empty() { init_heap() } else { h };
    // SAFETY: p is a handed-out slot of ch that nobody uses any more (caller): until it is pushed
    // the chunk cannot change hands, so its class is this chunk's.
    let c = unsafe { (*ch).class as usize };
    if h == exited() {
        // SAFETY: the header is live (p is handed out); `owner` is an atomic, read before the
        // push (after it the chunk may be collected and released). It may have changed since the
        // fast path read it (an owner that exited abandoned the chunk, another thread adopted
        // it); a stale owner only gets a spurious hint.
        let owner = unsafe { (*ch).owner.load(Relaxed) };
        // The block's link (and count) are written.
        contention::remote_free(1);
        // SAFETY: as above; `remote_requested` is this chunk's until the push.
        let was_full = unsafe {
            if size != 0 {
                contention::header_rmw();
                (*ch).remote_requested.fetch_add(size as u32, Relaxed);
            }
            chunk::push_one(ch, p.cast())
        };
        hint_if_full(was_full, owner, c);
        ORPHAN[c].cached.fetch_add(1, Relaxed);
        return;
    }
    // SAFETY: h is this thread's heap: its counters are ours to write. (The size-less
    // interface's `size` is 0.)
    unsafe { owner_add_bytes(&(*h).deallocated, size) };
    // SAFETY: h is this thread's heap (batches and counters are ours); p is ours to write until
    // its batch is pushed, and so is the batch's message.
    unsafe {
        let b = batch(h, c);
        if (*b).chunk == ch {
            join(h, c, p, size);
        } else {
            if !(*b).chunk.is_null() {
                flush(h, c);
            }
            let bn = bin(h, c);
            owner_add(&(*bn).cached, 1);
            owner_add(&(*bn).batched_requested, size);
            let s = p.cast::<FreeSlot>();
            // The run's first slot: the message (written by `message::set` and the push), or
            // the linked list's tail (its link written by the push).
            contention::remote_free(1);
            *b = Batch {
                chunk: ch,
                head: s,
                tail: s,
                n: 1,
                bytes: size as u32,
            };
            (*h).batched |= 1 << c;
        }
        if (*b).n >= BATCH_LIMIT[c] {
            flush(h, c);
        }
    }
}

/// Slot `p` (`size` requested bytes) joins heap `h`'s open batch of class `c`, which holds slots
/// of `p`'s chunk and has room for it: its index goes into the batch's message, or (a class that
/// links its slots) it is linked at the batch's head. It counts as cached, and its bytes wait in
/// `batched_requested`: no atomic on the chunk's header (they go to `remote_requested` with the
/// push, `flush`; issue 45, step 1).
///
/// # Safety
/// `h` is this thread's heap; `p` is a handed-out slot of the batch's chunk that nobody uses any
/// more.
#[inline(always)]
unsafe fn join(h: *mut ThreadHeap, c: usize, p: *mut u8, size: usize) {
    // SAFETY: the caller owns h, its bins and batches; the batch's message and p are ours to
    // write until the batch is pushed.
    unsafe {
        let bn = bin(h, c);
        owner_add(&(*bn).cached, 1);
        owner_add(&(*bn).batched_requested, size);
        let b = batch(h, c);
        if message::carries(c) {
            // Into the message, not the block: the block's lines stay where they are.
            contention::remote_free(0);
            message::set(
                (*b).head.cast(),
                (*b).n as usize - 1,
                message::index_of(chunk::base(chunk::of(p)), p),
            );
        } else {
            contention::remote_free(1);
            FreeSlot::set_next(p.cast(), (*b).head);
            (*b).head = p.cast();
        }
        (*b).n += 1;
        (*b).bytes += size as u32;
    }
}

/// Heap `h`'s batch of class `c`.
#[inline(always)]
fn batch(h: *mut ThreadHeap, c: usize) -> *mut Batch {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: as in `bin`.
    unsafe { (&raw mut (*h).batches).cast::<Batch>().add(c) }
}

/// Pushes heap `h`'s batch of class `c` (not empty) onto its chunk's remote list.
///
/// # Safety
/// The caller owns `h`.
unsafe fn flush(h: *mut ThreadHeap, c: usize) {
    // SAFETY: the caller owns h; the batch's slots are live in the chunk's count until the push,
    // so the chunk is live and keeps its class; after the push they are the owner's.
    unsafe {
        let b = batch(h, c);
        let ch = (*b).chunk;
        debug_assert!(!ch.is_null());
        // Read before the push: after it the chunk may be collected and released.
        let owner = (*ch).owner.load(Relaxed);
        let bytes = (*b).bytes;
        if bytes != 0 {
            (*ch).remote_requested.fetch_add(bytes, Relaxed);
        }
        if message::carries(c) {
            message::seal((*b).head.cast(), (*b).n as usize - 1);
        }
        let was_full = chunk::push_remote(ch, (*b).head, (*b).tail, (*b).n);
        hint_if_full(was_full, owner, c);
        owner_add(
            &(*bin(h, c)).batched_requested,
            (bytes as usize).wrapping_neg(),
        );
        *b = Batch::EMPTY;
        (*h).batched &= !(1 << c);
    }
}

/// Pushes every batch heap `h` holds.
///
/// # Safety
/// The caller owns `h`.
pub(super) unsafe fn flush_all(h: *mut ThreadHeap) {
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
        // SAFETY: owner points at a heap in the heap store (or a static heap).
        unsafe { (*owner.cast::<ThreadHeap>()).hint.insert(c) };
    }
}
