//! Per-thread heaps: each thread owns its chunks (the mimalloc shape on our pools).
//!
//! A heap holds, per size class, a *current* chunk (the fast path pops its `free` list), a list of
//! other chunks with free slots (`avail`) and a list of full ones (`full`). Only the owning thread
//! touches a heap's lists and its chunks' owner fields; other threads touch a heap only through
//! atomics: its counters (read by `stats`) and its `hint` (set by a remote free that found a full
//! chunk, so the owner looks at its full list again).
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
//!         else ─▶ CAS onto the chunk's remote list; the free that clears FULL sets owner.hint
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
use crate::lock::Lock;
use crate::size_class::NUM_CLASSES;
use crate::{fork, os, source};
use core::ptr;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// One class of a heap.
#[repr(C)]
struct Bin {
    /// The chunk the fast path pops from ([`chunk::dummy`] when none); on neither list.
    current: *mut Chunk,
    /// Blocks this thread allocated minus those it freed (wrapping; owner load + store).
    live: AtomicUsize,
    /// Their requested bytes, likewise.
    requested: AtomicUsize,
    /// Remote frees this thread made minus remote frees this heap collected (wrapping).
    pending: AtomicUsize,
    /// Other chunks with free slots, and full chunks: doubly linked through `prev`/`next`.
    avail: *mut Chunk,
    full: *mut Chunk,
}

/// A thread's heap.
#[repr(C)]
pub struct Heap {
    bins: [Bin; NUM_CLASSES],
    /// Bit `c`: a remote free found a full chunk of class `c` (set by any thread).
    hint: AtomicU64,
    /// Large blocks allocated minus freed by this thread, and their bytes (wrapping).
    large_blocks: AtomicUsize,
    large_bytes: AtomicUsize,
    /// Registry (or free-list) links, under the registry lock.
    prev: *mut Heap,
    next: *mut Heap,
}

const fn new_heap() -> Heap {
    Heap {
        bins: [const {
            Bin {
                current: chunk::dummy(),
                live: AtomicUsize::new(0),
                requested: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                avail: ptr::null_mut(),
                full: ptr::null_mut(),
            }
        }; NUM_CLASSES],
        hint: AtomicU64::new(0),
        large_blocks: AtomicUsize::new(0),
        large_bytes: AtomicUsize::new(0),
        prev: ptr::null_mut(),
        next: ptr::null_mut(),
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

/// Adds `d` (wrapping) to a counter only its owner writes: a load and a store, no read-modify-write.
#[inline(always)]
fn bump(a: &AtomicUsize, d: usize) {
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
    let b = bin(h, c);
    // SAFETY: h is this thread's heap (or a static one, whose current is the dummy chunk with a
    // null free list); `current` is a live chunk this heap owns, or the dummy.
    unsafe {
        let ch = (*b).current;
        let p = (*ch).free;
        if p.is_null() {
            return alloc_slow(h, c, size);
        }
        (*ch).free = FreeSlot::next(p);
        (*ch).used += 1;
        bump(&(*b).live, 1);
        if REQUESTED {
            bump(&(*b).requested, size);
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
        let c = (*ch).class as usize;
        if owner != h.cast() {
            return free_remote(h, owner, c, ch, p, size);
        }
        let s = p.cast::<FreeSlot>();
        FreeSlot::set_next(s, (*ch).local_free);
        (*ch).local_free = s;
        let used = (*ch).used - 1;
        (*ch).used = used;
        let b = bin(h, c);
        bump(&(*b).live, usize::MAX);
        if REQUESTED {
            bump(&(*b).requested, size.wrapping_neg());
        }
        if used == (*ch).notify_at {
            free_slow(h, c, ch);
        }
    }
}

/// A block of class `c` stays in place while its requested size changes from `old` to `new`.
#[inline]
pub fn resized(c: usize, old: usize, new: usize) {
    let h = this_heap();
    if h == empty() || h == exited() {
        bump(&ORPHAN[c].requested, new.wrapping_sub(old));
        return;
    }
    // SAFETY: h is this thread's registered heap.
    unsafe { bump(&(*bin(h, c)).requested, new.wrapping_sub(old)) };
}

// ---------------------------------------------------------------------------------------------------
// The slow paths.

#[cold]
#[inline(never)]
fn alloc_slow(h: *mut Heap, c: usize, size: usize) -> *mut u8 {
    let h = if h == empty() { init_heap() } else { h };
    if h == exited() {
        return alloc_shared(c, size);
    }
    // SAFETY: h is this thread's heap.
    unsafe { alloc_from(h, c, size) }
}

/// Pops a slot of class `c` from heap `h`, refilling its current chunk as needed.
///
/// # Safety
/// The caller must own `h` (its thread, or the shared heap's lock).
unsafe fn alloc_from(h: *mut Heap, c: usize, size: usize) -> *mut u8 {
    // SAFETY: the caller owns h and so every chunk on its lists.
    unsafe {
        let b = bin(h, c);
        let ch = refill(h, c);
        if ch.is_null() {
            return ptr::null_mut();
        }
        let p = (*ch).free;
        (*ch).free = FreeSlot::next(p);
        (*ch).used += 1;
        bump(&(*b).live, 1);
        bump(&(*b).requested, size);
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
        loop {
            let ch = (*b).current;
            if !(*ch).free.is_null() {
                return ch;
            }
            if ch != chunk::dummy() {
                if chunk::take_local(ch) {
                    // Remote frees are collected on every refill too, so they never wait long.
                    collect(b, ch);
                    return ch;
                }
                if collect(b, ch) > 0 || chunk::extend(ch) > 0 {
                    return ch;
                }
                // Nothing left: to the full list, unless remote frees came in meanwhile.
                if !chunk::try_mark_full(ch) {
                    continue;
                }
                (*ch).in_full = true;
                (*ch).notify_at = (*ch).used - 1;
                push(&raw mut (*b).full, ch);
                (*b).current = chunk::dummy();
            }
            if (*h).hint.load(Relaxed) & (1 << c) != 0 {
                (*h).hint.fetch_and(!(1 << c), Relaxed);
                unfull_hinted(h, c);
            }
            let next = (*b).avail;
            if !next.is_null() {
                unlink(&raw mut (*b).avail, next);
                make_current(b, next);
                continue;
            }
            // An abandoned chunk of this class (a few at most: they may all be full).
            if adopted < 4 {
                let a = source::adopt(c);
                if !a.is_null() {
                    adopted += 1;
                    (*a).owner.store(h.cast(), Relaxed);
                    make_current(b, a);
                    continue;
                }
            }
            let n = source::acquire(c);
            if n.is_null() {
                return ptr::null_mut();
            }
            (*n).owner.store(h.cast(), Relaxed);
            make_current(b, n);
        }
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
            bump(&(*b).pending, (n as usize).wrapping_neg());
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
                unlink(&raw mut (*b).full, ch);
                (*ch).in_full = false;
                collect(b, ch);
                if (*ch).used == 0 {
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
unsafe fn free_slow(h: *mut Heap, c: usize, ch: *mut Chunk) {
    // SAFETY: the caller (dealloc) checked that h owns ch.
    unsafe {
        let b = bin(h, c);
        if (*ch).in_full {
            unlink(&raw mut (*b).full, ch);
            (*ch).in_full = false;
            // A remote free may have cleared FULL already (and hinted us): either way it is gone.
            (*ch).remote.fetch_and(!chunk::FULL, Relaxed);
            if (*b).current == chunk::dummy() {
                make_current(b, ch);
            } else {
                push_avail(b, ch);
            }
        } else if (*ch).used == 0 {
            // On the avail list, now empty: give it back, unless the class has no current chunk.
            unlink(&raw mut (*b).avail, ch);
            if (*b).current == chunk::dummy() {
                make_current(b, ch);
            } else {
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
#[cold]
#[inline(never)]
unsafe fn free_remote(
    h: *mut Heap,
    owner: *mut u8,
    c: usize,
    ch: *mut Chunk,
    p: *mut u8,
    size: usize,
) {
    let h = if h == empty() { init_heap() } else { h };
    // SAFETY: p is a handed-out slot of ch that nobody uses any more (caller).
    let was_full = unsafe { chunk::push_remote(ch, p.cast()) };
    if was_full && !owner.is_null() {
        // The owner was read before the push: after it the chunk may be collected and released.
        // Heaps are never unmapped, so a stale owner only gets a spurious hint.
        // SAFETY: owner points at a heap in the heap arena (or a static heap).
        unsafe { (*owner.cast::<Heap>()).hint.fetch_or(1 << c, Relaxed) };
    }
    let counters: *const Bin = if h == exited() { &ORPHAN[c] } else { bin(h, c) };
    // SAFETY: the counters are this thread's own, or the orphan totals (atomics).
    unsafe {
        if h == exited() {
            (*counters).live.fetch_sub(1, Relaxed);
            (*counters).requested.fetch_sub(size, Relaxed);
            (*counters).pending.fetch_add(1, Relaxed);
        } else {
            bump(&(*counters).live, usize::MAX);
            bump(&(*counters).requested, size.wrapping_neg());
            bump(&(*counters).pending, 1);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Where a chunk sits in a bin (lists are `chunk::push`/`chunk::unlink`), and each place's `notify_at`.

/// Makes `ch` (on no list) the current chunk of bin `b`.
///
/// # Safety
/// The caller owns `ch` and `b`.
unsafe fn make_current(b: *mut Bin, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        (*ch).notify_at = chunk::NEVER;
        (*b).current = ch;
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

/// Counters of threads that exited (and remote frees of threads with no heap): live, requested
/// and pending per class, updated with atomic read-modify-writes.
static ORPHAN: [Bin; NUM_CLASSES] = [const {
    Bin {
        current: ptr::null_mut(),
        live: AtomicUsize::new(0),
        requested: AtomicUsize::new(0),
        pending: AtomicUsize::new(0),
        avail: ptr::null_mut(),
        full: ptr::null_mut(),
    }
}; NUM_CLASSES];
// SAFETY: shared bins (ORPHAN) are used through their atomics only; their pointer fields are null
// and never written.
unsafe impl Sync for Bin {}
static ORPHAN_LARGE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

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
    unsafe { abandon_all(h) };
}

/// Gives back or abandons every chunk of `h`, folds its counters into the orphan totals, and puts
/// it on the free list.
///
/// # Safety
/// The caller owns `h`, and nobody uses it afterwards.
unsafe fn abandon_all(h: *mut Heap) {
    let mut abandoned = false;
    // SAFETY: the caller owns h and its chunks.
    unsafe {
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            let cur = (*b).current;
            (*b).current = chunk::dummy();
            for ch in [cur, (*b).avail, (*b).full] {
                let mut ch = ch;
                while !ch.is_null() && ch != chunk::dummy() {
                    let next = if ch == cur {
                        ptr::null_mut()
                    } else {
                        (*ch).next
                    };
                    (*ch).in_full = false;
                    collect(b, ch);
                    (*ch).owner.store(ptr::null_mut(), Relaxed);
                    if (*ch).used == 0 {
                        source::release(ch);
                    } else {
                        abandoned = true;
                        source::abandon(ch);
                    }
                    ch = next;
                }
            }
            (*b).avail = ptr::null_mut();
            (*b).full = ptr::null_mut();
        }
        (*h).hint.store(0, Relaxed);
        let mut r = REGISTRY.lock();
        for (c, o) in ORPHAN.iter().enumerate() {
            let b = bin(h, c);
            o.live.fetch_add((*b).live.swap(0, Relaxed), Relaxed);
            o.requested
                .fetch_add((*b).requested.swap(0, Relaxed), Relaxed);
            o.pending.fetch_add((*b).pending.swap(0, Relaxed), Relaxed);
        }
        ORPHAN_LARGE[0].fetch_add((*h).large_blocks.swap(0, Relaxed), Relaxed);
        ORPHAN_LARGE[1].fetch_add((*h).large_bytes.swap(0, Relaxed), Relaxed);
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
    if abandoned {
        // The purger reaps abandoned chunks whose blocks other threads free.
        source::ensure_purger();
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
        for c in 0..NUM_CLASSES {
            let b = bin(h, c);
            if (*h).hint.load(Relaxed) & (1 << c) != 0 {
                (*h).hint.fetch_and(!(1 << c), Relaxed);
                unfull_hinted(h, c);
            }
            let cur = (*b).current;
            if cur != chunk::dummy() {
                collect(b, cur);
                if (*cur).used == 0 {
                    (*b).current = chunk::dummy();
                    retire(cur);
                }
            }
            let mut ch = (*b).avail;
            while !ch.is_null() {
                let next = (*ch).next;
                collect(b, ch);
                if (*ch).used == 0 {
                    unlink(&raw mut (*b).avail, ch);
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
    if h == exited() {
        ORPHAN_LARGE[0].fetch_add(n, Relaxed);
        ORPHAN_LARGE[1].fetch_add(b, Relaxed);
        return;
    }
    // SAFETY: h is this thread's registered heap; only this thread writes its counters.
    unsafe {
        bump(&(*h).large_blocks, n);
        bump(&(*h).large_bytes, b);
    }
}

/// Large blocks and their bytes (wrapping sums over every heap and the orphans).
pub fn large_totals() -> (usize, usize) {
    let r = REGISTRY.lock();
    let mut n = ORPHAN_LARGE[0].load(Relaxed);
    let mut b = ORPHAN_LARGE[1].load(Relaxed);
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the lock; we read atomics only.
        unsafe {
            n = n.wrapping_add((*h).large_blocks.load(Relaxed));
            b = b.wrapping_add((*h).large_bytes.load(Relaxed));
            h = (*h).next;
        }
    }
    (n, b)
}

/// Per class: (live slots, requested bytes, remote frees not yet collected), as wrapping sums.
pub fn class_totals() -> [(usize, usize, usize); NUM_CLASSES] {
    let mut t = [(0usize, 0usize, 0usize); NUM_CLASSES];
    let r = REGISTRY.lock();
    for (c, o) in ORPHAN.iter().enumerate() {
        t[c] = (
            o.live.load(Relaxed),
            o.requested.load(Relaxed),
            o.pending.load(Relaxed).wrapping_sub(source::collected(c)),
        );
    }
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: as in large_totals.
        unsafe {
            for (c, x) in t.iter_mut().enumerate() {
                let b = bin(h, c);
                x.0 = x.0.wrapping_add((*b).live.load(Relaxed));
                x.1 = x.1.wrapping_add((*b).requested.load(Relaxed));
                x.2 = x.2.wrapping_add((*b).pending.load(Relaxed));
            }
            h = (*h).next;
        }
    }
    t
}

// ---------------------------------------------------------------------------------------------------
// fork (see `fork.rs`, which takes every lock in the lock order; the heap's come first).

/// Takes the heap's locks for `fork`: the shared heap's, then the registry's.
fn lock_for_fork() {
    core::mem::forget(SHARED.lock());
    core::mem::forget(REGISTRY.lock());
}

/// Releases the locks taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
unsafe fn unlock_after_fork() {
    // SAFETY: lock_for_fork took both in this thread and forgot the guards; in a child this
    // thread is the only one, and the copies of the locks are held by it.
    unsafe {
        REGISTRY.force_unlock();
        SHARED.force_unlock();
    }
}
