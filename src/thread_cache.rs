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
use crate::pool::{self, POOLS};
use crate::size_class::{self, NUM_CLASSES};
use core::cell::UnsafeCell;
use core::ptr;

#[derive(Clone, Copy)]
struct Bin {
    /// Top of the stack of free slots (linked through their first word).
    head: *mut FreeSlot,
    /// Slots on the stack.
    count: u32,
    /// A push that makes `count > limit` flushes a batch. Zero once the thread is exiting.
    limit: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// No exit hook registered yet for this thread.
    Fresh,
    /// The exit hook will flush this cache.
    Registered,
    /// The exit hook ran: the cache must stay empty.
    Exited,
}

pub struct ThreadCache {
    bins: [Bin; NUM_CLASSES],
    state: State,
}

const fn initial_bins() -> [Bin; NUM_CLASSES] {
    let mut b = [Bin {
        head: ptr::null_mut(),
        count: 0,
        limit: 0,
    }; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        b[c].limit = size_class::cache_limit(c);
        c += 1;
    }
    b
}

thread_local! {
    static CACHE: UnsafeCell<ThreadCache> = const {
        UnsafeCell::new(ThreadCache { bins: initial_bins(), state: State::Fresh })
    };
}

/// A slot of class `c`, or null when out of memory.
#[inline(always)]
pub fn alloc(c: usize) -> *mut u8 {
    CACHE
        .try_with(|tc| {
            // SAFETY: the cache belongs to this thread and no reference to it outlives this call
            // (the allocator is not re-entered from inside it).
            let tc = unsafe { &mut *tc.get() };
            let bin = &mut tc.bins[c];
            let p = bin.head;
            if !p.is_null() {
                // SAFETY: p is a free slot on this stack; its first word links to the next.
                bin.head = unsafe { (*p).next };
                bin.count -= 1;
                return p.cast();
            }
            tc.refill(c)
        })
        .unwrap_or_else(|_| alloc_uncached(c))
}

/// Frees slot `p` of class `c`.
///
/// # Safety
/// `p` must be a slot of class `c` handed out by this allocator and not used afterwards.
#[inline(always)]
pub unsafe fn dealloc(c: usize, p: *mut u8) {
    let done = CACHE.try_with(|tc| {
        // SAFETY: as in `alloc`.
        let tc = unsafe { &mut *tc.get() };
        let bin = &mut tc.bins[c];
        let s = p.cast::<FreeSlot>();
        // SAFETY: p is a slot at least a word long that nobody uses any more (caller).
        unsafe { s.write(FreeSlot { next: bin.head }) };
        bin.head = s;
        bin.count += 1;
        if bin.count > bin.limit {
            tc.overflow(c);
        }
    });
    if done.is_err() {
        pool::free_one(c, p);
    }
}

#[cold]
fn alloc_uncached(c: usize) -> *mut u8 {
    POOLS[c].refill(c, 1).head.cast()
}

impl ThreadCache {
    #[cold]
    #[inline(never)]
    fn refill(&mut self, c: usize) -> *mut u8 {
        if self.state != State::Registered {
            if self.state == State::Exited {
                return alloc_uncached(c);
            }
            register_exit_hook();
            self.state = State::Registered;
        }
        let chain = POOLS[c].refill(c, size_class::batch(c));
        if chain.head.is_null() {
            return ptr::null_mut();
        }
        let p = chain.head;
        let bin = &mut self.bins[c];
        debug_assert!(bin.head.is_null() && bin.count == 0);
        // SAFETY: p heads a chain of `count` free slots just handed to this thread.
        bin.head = unsafe { (*p).next };
        bin.count = chain.count - 1;
        p.cast()
    }

    /// The stack of class `c` went over its limit: hand a batch (or everything, once exiting) back.
    #[cold]
    #[inline(never)]
    fn overflow(&mut self, c: usize) {
        let n = if self.bins[c].limit == 0 {
            self.bins[c].count
        } else {
            size_class::batch(c)
        };
        self.flush(c, n);
    }

    /// Moves the top `n` slots of class `c` to the pool.
    fn flush(&mut self, c: usize, n: u32) {
        let bin = &mut self.bins[c];
        let n = n.min(bin.count);
        if n == 0 {
            return;
        }
        let head = bin.head;
        let mut last = head;
        // SAFETY: the stack holds `count ≥ n` linked slots.
        unsafe {
            for _ in 1..n {
                last = (*last).next;
            }
            bin.head = (*last).next;
            (*last).next = ptr::null_mut();
        }
        bin.count -= n;
        POOLS[c].flush(Chain { head, count: n });
    }

    /// Moves every cached slot to the pools.
    fn flush_all(&mut self) {
        for c in 0..NUM_CLASSES {
            let n = self.bins[c].count;
            self.flush(c, n);
        }
    }
}

/// Returns the calling thread's cached slots to the pools.
pub fn flush_current_thread() {
    let _ = CACHE.try_with(|tc| {
        // SAFETY: as in `alloc`.
        unsafe { &mut *tc.get() }.flush_all()
    });
}

// ---------------------------------------------------------------------------------------------------
// Thread exit.

static EXIT_KEY: spin::Once<Option<libc::pthread_key_t>> = spin::Once::new();

extern "C" fn on_thread_exit(_: *mut libc::c_void) {
    let _ = CACHE.try_with(|tc| {
        // SAFETY: as in `alloc`; this runs on the exiting thread itself.
        let tc = unsafe { &mut *tc.get() };
        tc.flush_all();
        tc.state = State::Exited;
        for b in tc.bins.iter_mut() {
            b.limit = 0;
        }
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
