//! The thread cache: per thread, per size class, a stack of free slots. Allocation pops, free pushes;
//! neither takes a lock nor does an atomic read-modify-write. An empty stack refills with a batch
//! from the class's pool; a stack over its limit flushes a batch back.
//!
//! Any thread may free any slot: the slot goes on the freeing thread's stack, and the batch flush
//! returns it to its chunk (found by masking its address) whichever thread took it out. So a
//! producer/consumer pair is bounded by the consumer's cache limit, with no remote-free lists.
//!
//! Thread exit: the cache is plain const-initialised TLS with no destructor (no `Drop` type: see the
//! re-entrance trap in DESIGN.md); a pthread key whose destructor runs at thread exit flushes every
//! stack to the pools and drops the limits to zero, so frees by later TLS destructors go straight to
//! the pools and allocations take single slots from them.

use crate::chunk::{Chain, FreeSlot};
use crate::lock::Lock;
use crate::pool::{self, POOLS};
use crate::size_class::{self, NUM_CLASSES};
use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// One class's stack. `head` and `limit` are touched only by the owning thread; `count` and
/// `requested` are also read by [`crate::stats`] from other threads, so they are atomics written
/// with plain load + store (the owner is their only writer: no read-modify-write needed).
struct Bin {
    /// Top of the stack of free slots (linked through their first word).
    head: Cell<*mut FreeSlot>,
    /// Slots on the stack.
    count: AtomicU32,
    /// A push that makes `count > limit` takes the slow path: zero until the thread registers and
    /// once it is exiting, `cache_limit(c)` in between.
    limit: Cell<u32>,
    /// Sum of `Layout::size()` of blocks this thread allocated minus those it freed (wrapping: a
    /// thread that frees others' blocks goes "negative"; the sum over all threads is exact).
    requested: AtomicUsize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not yet registered (no exit hook, not in the registry).
    Fresh,
    /// The exit hook will flush this cache; it is on the registry.
    Registered,
    /// The exit hook ran: the cache must stay empty.
    Exited,
}

pub struct ThreadCache {
    bins: [Bin; NUM_CLASSES],
    /// Large blocks allocated minus freed by this thread, and their requested bytes (wrapping, as
    /// `Bin::requested`; owner-only load + store).
    large_blocks: AtomicUsize,
    large_bytes: AtomicUsize,
    state: Cell<State>,
    /// Registry links (guarded by the registry lock).
    prev: Cell<*const ThreadCache>,
    next: Cell<*const ThreadCache>,
}

/// A fresh cache has every limit at zero, so its first free takes the slow path and registers the
/// thread (as its first allocation does through `refill`): a thread that only frees blocks, like a
/// consumer, must be flushed at exit and counted too.
const fn initial_bins() -> [Bin; NUM_CLASSES] {
    [const {
        Bin {
            head: Cell::new(ptr::null_mut()),
            count: AtomicU32::new(0),
            limit: Cell::new(0),
            requested: AtomicUsize::new(0),
        }
    }; NUM_CLASSES]
}

thread_local! {
    static CACHE: ThreadCache = const {
        ThreadCache {
            bins: initial_bins(),
            large_blocks: AtomicUsize::new(0),
            large_bytes: AtomicUsize::new(0),
            state: Cell::new(State::Fresh),
            prev: Cell::new(ptr::null()),
            next: Cell::new(ptr::null()),
        }
    };
}

#[inline(always)]
fn bin(tc: &ThreadCache, c: usize) -> &Bin {
    debug_assert!(c < NUM_CLASSES);
    // SAFETY: every caller passes a class from size_class::class_of, which is < NUM_CLASSES.
    unsafe { tc.bins.get_unchecked(c) }
}

/// A slot of class `c` for a request of `size` bytes, or null when out of memory.
#[inline(always)]
pub fn alloc(c: usize, size: usize) -> *mut u8 {
    CACHE
        .try_with(|tc| {
            let bin = bin(tc, c);
            let p = bin.head.get();
            if !p.is_null() {
                // SAFETY: p is a free slot on this stack; its first word links to the next.
                bin.head.set(unsafe { FreeSlot::next(p) });
                bin.count.store(bin.count.load(Relaxed) - 1, Relaxed);
                bin.requested
                    .store(bin.requested.load(Relaxed).wrapping_add(size), Relaxed);
                return p.cast();
            }
            tc.refill(c, size)
        })
        .unwrap_or_else(|_| alloc_uncached(c, size))
}

/// Frees slot `p` of class `c`, allocated for `size` bytes.
///
/// # Safety
/// `p` must be a slot of class `c` handed out by this allocator and not used afterwards.
#[inline(always)]
pub unsafe fn dealloc(c: usize, p: *mut u8, size: usize) {
    let done = CACHE.try_with(|tc| {
        let bin = bin(tc, c);
        let s = p.cast::<FreeSlot>();
        // SAFETY: p is a slot at least a word long that nobody uses any more (caller).
        unsafe { FreeSlot::set_next(s, bin.head.get()) };
        bin.head.set(s);
        let n = bin.count.load(Relaxed) + 1;
        bin.count.store(n, Relaxed);
        bin.requested
            .store(bin.requested.load(Relaxed).wrapping_sub(size), Relaxed);
        if n > bin.limit.get() {
            tc.overflow(c);
        }
    });
    if done.is_err() {
        free_uncached(c, p, size);
    }
}

/// A block of class `c` stays in place while its requested size changes from `old` to `new`.
#[inline]
pub fn resized(c: usize, old: usize, new: usize) {
    let done = CACHE.try_with(|tc| {
        let b = bin(tc, c);
        let r = b
            .requested
            .load(Relaxed)
            .wrapping_add(new)
            .wrapping_sub(old);
        b.requested.store(r, Relaxed);
        if b.limit.get() == 0 {
            ORPHAN_REQUESTED[c].fetch_add(b.requested.swap(0, Relaxed), Relaxed);
        }
    });
    if done.is_err() {
        ORPHAN_REQUESTED[c].fetch_add(new.wrapping_sub(old), Relaxed);
    }
}

/// Counts a large block of `bytes` allocated (`add`) or freed by this thread. Returns false when the
/// thread has no registered cache (exiting): the caller counts it in the shared totals instead.
#[inline]
pub fn count_large(add: bool, bytes: usize) -> bool {
    CACHE
        .try_with(|tc| {
            match tc.state.get() {
                State::Registered => {}
                State::Fresh => tc.register(),
                State::Exited => return false,
            }
            let (n, b) = (&tc.large_blocks, &tc.large_bytes);
            if add {
                n.store(n.load(Relaxed).wrapping_add(1), Relaxed);
                b.store(b.load(Relaxed).wrapping_add(bytes), Relaxed);
            } else {
                n.store(n.load(Relaxed).wrapping_sub(1), Relaxed);
                b.store(b.load(Relaxed).wrapping_sub(bytes), Relaxed);
            }
            true
        })
        .unwrap_or(false)
}

/// Per-class requested bytes of threads that have exited or could not use their cache.
static ORPHAN_REQUESTED: [AtomicUsize; NUM_CLASSES] = [const { AtomicUsize::new(0) }; NUM_CLASSES];

#[cold]
fn alloc_uncached(c: usize, size: usize) -> *mut u8 {
    let p = POOLS[c].refill(c, 1).head;
    if !p.is_null() {
        ORPHAN_REQUESTED[c].fetch_add(size, Relaxed);
    }
    p.cast()
}

#[cold]
fn free_uncached(c: usize, p: *mut u8, size: usize) {
    ORPHAN_REQUESTED[c].fetch_sub(size, Relaxed);
    pool::free_one(c, p);
}

impl ThreadCache {
    #[cold]
    #[inline(never)]
    fn refill(&self, c: usize, size: usize) -> *mut u8 {
        match self.state.get() {
            State::Registered => {}
            State::Exited => return alloc_uncached(c, size),
            State::Fresh => self.register(),
        }
        let chain = POOLS[c].refill(c, size_class::batch(c));
        if chain.head.is_null() {
            return ptr::null_mut();
        }
        let p = chain.head;
        let bin = bin(self, c);
        debug_assert!(bin.head.get().is_null() && bin.count.load(Relaxed) == 0);
        // SAFETY: p heads a chain of `count` free slots just handed to this thread.
        bin.head.set(unsafe { FreeSlot::next(p) });
        bin.count.store(chain.count - 1, Relaxed);
        bin.requested
            .store(bin.requested.load(Relaxed).wrapping_add(size), Relaxed);
        p.cast()
    }

    /// The stack of class `c` went over its limit: hand a batch (or everything, once exiting) back.
    #[cold]
    #[inline(never)]
    fn overflow(&self, c: usize) {
        let bin = bin(self, c);
        if self.state.get() == State::Fresh {
            self.register();
            if bin.count.load(Relaxed) <= bin.limit.get() {
                return;
            }
        }
        if bin.limit.get() == 0 {
            // Exiting: this cache is off the registry, so its counter goes to the orphan total.
            ORPHAN_REQUESTED[c].fetch_add(bin.requested.swap(0, Relaxed), Relaxed);
            self.flush(c, u32::MAX, false);
        } else {
            self.flush(c, size_class::batch(c), true);
        }
    }

    /// Moves the top `n` slots of class `c` to the pool (`park`: see `Pool::flush`).
    fn flush(&self, c: usize, n: u32, park: bool) {
        let bin = bin(self, c);
        let count = bin.count.load(Relaxed);
        let n = n.min(count);
        if n == 0 {
            return;
        }
        let head = bin.head.get();
        let mut last = head;
        // SAFETY: the stack holds `count ≥ n` linked slots.
        unsafe {
            for _ in 1..n {
                last = FreeSlot::next(last);
            }
            bin.head.set(FreeSlot::next(last));
            FreeSlot::set_next(last, ptr::null_mut());
        }
        bin.count.store(count - n, Relaxed);
        POOLS[c].flush(c, Chain { head, count: n }, park);
    }

    /// Moves every cached slot back to its chunk.
    fn flush_all(&self) {
        for c in 0..NUM_CLASSES {
            self.flush(c, u32::MAX, false);
        }
    }

    /// Puts this cache on the registry, arranges for the exit hook to run, and opens the stacks.
    fn register(&self) {
        self.state.set(State::Registered);
        for (c, b) in self.bins.iter().enumerate() {
            b.limit.set(size_class::cache_limit(c));
        }
        let mut head = REGISTRY.lock();
        self.next.set(head.0);
        if !head.0.is_null() {
            // SAFETY: registry entries are live caches of running threads; we hold the lock.
            unsafe { (*head.0).prev.set(self) };
        }
        head.0 = self;
        drop(head);
        register_exit_hook();
        // With no lock held (pthread_atfork takes libc's fork lock, which fork holds while our
        // prepare handler takes ours). A thread registers before its first refill, so this runs
        // before the first chunk exists; `chunk::acquire` calls it too, for a thread that never
        // registers, and then it is already done.
        pool::install_fork_handlers();
    }

    /// Takes this cache off the registry, folding its counters into the orphan totals.
    fn unregister(&self) {
        let mut head = REGISTRY.lock();
        for (c, b) in self.bins.iter().enumerate() {
            ORPHAN_REQUESTED[c].fetch_add(b.requested.swap(0, Relaxed), Relaxed);
        }
        crate::large::fold(
            self.large_blocks.swap(0, Relaxed),
            self.large_bytes.swap(0, Relaxed),
        );
        let (p, n) = (self.prev.get(), self.next.get());
        // SAFETY: neighbours on the registry are live caches; we hold the lock.
        unsafe {
            if p.is_null() {
                head.0 = n;
            } else {
                (*p).next.set(n);
            }
            if !n.is_null() {
                (*n).prev.set(p);
            }
        }
    }
}

/// Head of the list of registered thread caches.
struct Registry(*const ThreadCache);
// SAFETY: the pointers name thread caches that stay alive while registered; access is serialised
// by the lock, and other threads only read their atomic counters.
unsafe impl Send for Registry {}
static REGISTRY: Lock<Registry> = Lock::new(Registry(ptr::null()));

/// Large blocks and their bytes as counted by registered threads (wrapping sums).
pub fn large_totals() -> (usize, usize) {
    let head = REGISTRY.lock();
    let (mut n, mut b) = (0usize, 0usize);
    let mut tc = head.0;
    while !tc.is_null() {
        // SAFETY: as in class_totals.
        unsafe {
            n = n.wrapping_add((*tc).large_blocks.load(Relaxed));
            b = b.wrapping_add((*tc).large_bytes.load(Relaxed));
            tc = (*tc).next.get();
        }
    }
    (n, b)
}

/// Per class: (slots cached by threads, requested bytes of live blocks).
pub fn class_totals() -> [(usize, usize); NUM_CLASSES] {
    let mut t = [(0usize, 0usize); NUM_CLASSES];
    for (c, o) in ORPHAN_REQUESTED.iter().enumerate() {
        t[c].1 = o.load(Relaxed);
    }
    let head = REGISTRY.lock();
    let mut tc = head.0;
    while !tc.is_null() {
        // SAFETY: registered caches stay alive until they unregister, which needs this lock; we
        // only read their atomics.
        unsafe {
            for (c, b) in (*tc).bins.iter().enumerate() {
                t[c].0 += b.count.load(Relaxed) as usize;
                t[c].1 = t[c].1.wrapping_add(b.requested.load(Relaxed));
            }
            tc = (*tc).next.get();
        }
    }
    t
}

/// Returns the calling thread's cached slots to the pools.
pub fn flush_current_thread() {
    let _ = CACHE.try_with(|tc| tc.flush_all());
}

/// Locks the registry for `fork`.
pub(crate) fn lock_for_fork() {
    core::mem::forget(REGISTRY.lock());
}

/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guard forgotten.
    unsafe { REGISTRY.force_unlock() };
}

// ---------------------------------------------------------------------------------------------------
// Thread exit.

static EXIT_KEY: spin::Once<Option<libc::pthread_key_t>> = spin::Once::new();

extern "C" fn on_thread_exit(_: *mut libc::c_void) {
    let _ = CACHE.try_with(|tc| {
        for b in tc.bins.iter() {
            b.limit.set(0);
        }
        tc.state.set(State::Exited);
        tc.flush_all();
        tc.unregister();
    });
}

/// Arranges for `on_thread_exit` to run when the calling thread exits.
fn register_exit_hook() {
    let key = EXIT_KEY.call_once(|| {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: k is a valid out-pointer; the destructor is a plain function living forever.
        let r = unsafe { libc::pthread_key_create(&mut k, Some(on_thread_exit)) };
        (r == 0).then_some(k)
    });
    if let Some(k) = *key {
        // Any non-null value makes pthread call the destructor at exit. If this fails (out of
        // memory inside libc) the thread's cache is not flushed at exit: a bounded leak.
        // SAFETY: k is a key created above.
        unsafe { libc::pthread_setspecific(k, ptr::dangling::<u8>().cast()) };
    }
}
