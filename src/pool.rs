//! A pool: the shared, locked home of one size class's chunks. Thread caches refill from it and
//! flush to it in batches; it takes chunks from the chunk source and gives empty ones back.
//!
//! Lists (all guarded by the pool's lock):
//! - `partial`: chunks with a slot to hand out and at least one handed out (`ListKind::Partial`);
//! - `empty`: chunks with no slot handed out, kept for reuse, at most `retain` of them
//!   (`ListKind::Empty`);
//! - full chunks are on no list; a slot freed into one puts it back on `partial`.

use crate::chunk::{self, Chain, Chunk, FreeSlot, ListKind};
use crate::lock::Lock;
use crate::size_class::{self, NUM_CLASSES};
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Empty chunks each class keeps for reuse before giving further ones back to the OS.
static RETAIN: AtomicUsize = AtomicUsize::new(1);

/// Sets how many empty chunks each size class keeps instead of returning them to the OS (default 1).
/// Zero returns every chunk the moment its last slot is freed.
pub fn set_retained_chunks(n: usize) {
    RETAIN.store(n, Ordering::Relaxed);
}

struct PoolInner {
    partial: *mut Chunk,
    empty: *mut Chunk,
    nempty: usize,
    /// Chunks this pool holds (partial, full and empty).
    chunks: usize,
    /// Slots handed out of this pool's chunks (live or in a thread cache).
    used: usize,
}

// SAFETY: the raw pointers name chunks owned by this pool; access is serialised by its lock.
unsafe impl Send for PoolInner {}

pub struct Pool {
    inner: Lock<PoolInner>,
}

#[allow(clippy::declare_interior_mutable_const)] // used only to build the POOLS array below
const NEW_POOL: Pool = Pool {
    inner: Lock::new(PoolInner {
        partial: ptr::null_mut(),
        empty: ptr::null_mut(),
        nempty: 0,
        chunks: 0,
        used: 0,
    }),
};

/// One pool per size class.
pub static POOLS: [Pool; NUM_CLASSES] = [NEW_POOL; NUM_CLASSES];

impl PoolInner {
    /// # Safety
    /// `c` must be a chunk of this pool on no list.
    unsafe fn push_partial(&mut self, c: *mut Chunk) {
        // SAFETY: c and the list head are live chunk headers of this pool (caller, invariant).
        unsafe {
            (*c).list = ListKind::Partial;
            (*c).prev = ptr::null_mut();
            (*c).next = self.partial;
            if !self.partial.is_null() {
                (*self.partial).prev = c;
            }
        }
        self.partial = c;
    }

    /// # Safety
    /// `c` must be on this pool's partial list.
    unsafe fn unlink_partial(&mut self, c: *mut Chunk) {
        // SAFETY: c and its neighbours are live chunk headers on the partial list (caller).
        unsafe {
            debug_assert_eq!((*c).list, ListKind::Partial);
            let (p, n) = ((*c).prev, (*c).next);
            if p.is_null() {
                self.partial = n;
            } else {
                (*p).next = n;
            }
            if !n.is_null() {
                (*n).prev = p;
            }
            (*c).list = ListKind::Full;
            (*c).prev = ptr::null_mut();
            (*c).next = ptr::null_mut();
        }
    }

    /// A chunk with slots to hand out, put on the partial list: a retained empty one, else a new one.
    fn grow(&mut self, class: usize) -> *mut Chunk {
        let c = if !self.empty.is_null() {
            let c = self.empty;
            // SAFETY: c heads the empty list; every chunk on it is a live header of this pool.
            unsafe {
                self.empty = (*c).next;
                self.nempty -= 1;
                // Its slots are all free: start again from a fresh bump (the memory is dirty).
                Chunk::init(chunk::base(c), class, false)
            }
        } else {
            let base = chunk::acquire();
            if base.is_null() {
                return ptr::null_mut();
            }
            self.chunks += 1;
            // SAFETY: a chunk from the source is aligned, zeroed and ours alone.
            unsafe { Chunk::init(base, class, true) }
        };
        // SAFETY: c was just initialised and is on no list.
        unsafe { self.push_partial(c) };
        c
    }
}

impl Pool {
    /// Takes up to `want` slots for a thread cache (at least one unless out of memory).
    pub fn refill(&self, class: usize, want: u32) -> Chain {
        let mut out = Chain::EMPTY;
        let mut g = self.inner.lock();
        while out.count < want {
            let mut c = g.partial;
            if c.is_null() {
                c = g.grow(class);
                if c.is_null() {
                    break;
                }
            }
            // SAFETY: c is a live chunk of this pool on its partial list; we hold the lock.
            unsafe {
                (*c).take(want - out.count, &mut out);
                if (*c).is_exhausted() {
                    g.unlink_partial(c);
                }
            }
        }
        g.used += out.count as usize;
        out
    }

    /// Returns a chain of `chain.count` slots of this class to their chunks. Chunks that become
    /// empty are retained (up to the limit) or given back to the OS.
    pub fn flush(&self, chain: Chain) {
        let mut release: *mut Chunk = ptr::null_mut();
        let retain = RETAIN.load(Ordering::Relaxed);
        {
            let mut g = self.inner.lock();
            let mut s = chain.head;
            let mut n = 0;
            while n < chain.count {
                // SAFETY: the chain holds `count` slots of this class handed out by this pool; each
                // first word links to the next. We hold the lock, so chunk headers are ours.
                unsafe {
                    let next = (*s).next;
                    let c = chunk::of(s);
                    (*c).put(s);
                    match (*c).list {
                        ListKind::Full => g.push_partial(c),
                        ListKind::Partial => {}
                        ListKind::Empty => debug_assert!(false, "slot freed into an empty chunk"),
                    }
                    if (*c).used == 0 {
                        g.unlink_partial(c);
                        (*c).list = ListKind::Empty;
                        if g.nempty < retain {
                            (*c).next = g.empty;
                            g.empty = c;
                            g.nempty += 1;
                        } else {
                            (*c).next = release;
                            release = c;
                            g.chunks -= 1;
                        }
                    }
                    s = next;
                }
                n += 1;
            }
            g.used -= chain.count as usize;
        }
        // Syscalls outside the lock.
        release_all(release);
    }

    /// Gives every retained empty chunk back to the OS.
    pub fn trim(&self) {
        let list = {
            let mut g = self.inner.lock();
            let list = g.empty;
            g.chunks -= g.nempty;
            g.empty = ptr::null_mut();
            g.nempty = 0;
            list
        };
        release_all(list);
    }

    /// (chunks held, slots handed out, retained empty chunks).
    pub fn counts(&self) -> (usize, usize, usize) {
        let g = self.inner.lock();
        (g.chunks, g.used, g.nempty)
    }

    /// Checks every chunk on the pool's lists (tests and debug builds).
    pub fn check(&self, class: usize) {
        let g = self.inner.lock();
        let mut c = g.partial;
        while !c.is_null() {
            // SAFETY: chunks on the partial list are live headers of this pool; we hold the lock.
            unsafe {
                assert_eq!((*c).list, ListKind::Partial);
                assert_eq!((*c).class as usize, class);
                assert!(!(*c).is_exhausted() && (*c).used > 0);
                (*c).check();
                c = (*c).next;
            }
        }
    }
}

/// Gives a list of empty chunks (linked through `next`) back to the chunk source.
fn release_all(mut c: *mut Chunk) {
    while !c.is_null() {
        // SAFETY: every chunk on the list left its pool with no slot handed out; nobody refers to it.
        unsafe {
            let next = (*c).next;
            chunk::release(chunk::base(c));
            c = next;
        }
    }
}

/// Returns one slot without a thread cache (thread teardown).
pub fn free_one(class: usize, p: *mut u8) {
    let s = p.cast::<FreeSlot>();
    // SAFETY: p is a handed-out slot of class `class` (caller of dealloc); a one-slot chain.
    unsafe {
        s.write(FreeSlot {
            next: ptr::null_mut(),
        })
    };
    POOLS[class].flush(Chain { head: s, count: 1 });
}

// ---------------------------------------------------------------------------------------------------
// fork: a child forked while another thread holds a pool lock would deadlock on its first allocation
// (jemalloc #315). Around fork, the forking thread takes every lock (pools in class order, then the
// chunk source: the order every other path takes them in) and releases them in parent and child.

extern "C" fn fork_prepare() {
    for p in POOLS.iter() {
        core::mem::forget(p.inner.lock());
    }
    chunk::lock_for_fork();
}

extern "C" fn fork_release() {
    // SAFETY: fork_prepare took every one of these locks in this thread and forgot the guards; in
    // the child this thread is the only one, and the copies of the locks are held by it.
    unsafe {
        chunk::unlock_after_fork();
        for p in POOLS.iter() {
            p.inner.force_unlock();
        }
    }
}

static FORK_HANDLERS: spin::Once<()> = spin::Once::new();

/// Registers the fork handlers once, before the first chunk is taken.
pub fn install_fork_handlers() {
    FORK_HANDLERS.call_once(|| {
        // SAFETY: the handlers are plain functions that live for the whole program.
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_release));
        }
    });
}

/// Slot size and slots per chunk of class `c`.
pub fn geometry(c: usize) -> (usize, usize) {
    (size_class::CLASS_SIZE[c], chunk::capacity_of(c))
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// Every slot a refill hands out is distinct, aligned and in a chunk of the right class; flushing
    /// them all back empties the chunks and returns them beyond the retained one.
    #[test]
    fn refill_and_flush_balance_and_release_chunks() {
        let class = 30; // only this test uses this class's pool
        let pool = &POOLS[class];
        let (size, cap) = geometry(class);
        let mut chains = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let total = 3 * cap + 5;
        let mut got = 0;
        while got < total {
            let ch = pool.refill(class, 9);
            assert!(ch.count > 0);
            let mut s = ch.head;
            for _ in 0..ch.count {
                assert!(seen.insert(s as usize), "slot handed out twice");
                assert_eq!(s as usize % (1 << size.trailing_zeros()), 0);
                // SAFETY: s is a slot handed out by the pool; its chunk header is live.
                unsafe {
                    assert_eq!((*chunk::of(s)).class as usize, class);
                    s = (*s).next;
                }
            }
            got += ch.count as usize;
            chains.push(ch);
        }
        let (chunks, used, _) = pool.counts();
        assert_eq!(used, got);
        assert_eq!(chunks, got.div_ceil(cap));
        pool.check(class);
        for ch in chains {
            pool.flush(ch);
            pool.check(class);
        }
        let (chunks, used, retained) = pool.counts();
        assert_eq!(used, 0);
        assert_eq!(retained, chunks);
        assert!(chunks <= RETAIN.load(Ordering::Relaxed));
        pool.trim();
        assert_eq!(pool.counts(), (0, 0, 0));
    }

    /// A retained empty chunk is reused before a new one is taken.
    #[test]
    fn retained_chunk_is_reused() {
        let class = 31;
        let pool = &POOLS[class];
        let ch = pool.refill(class, 3);
        let first = chunk::of(ch.head);
        pool.flush(ch);
        assert_eq!(pool.counts(), (1, 0, 1));
        let ch = pool.refill(class, 3);
        assert_eq!(chunk::of(ch.head), first);
        assert!(chunk::chunks_in_use() >= 1);
        pool.flush(ch);
        pool.trim();
        assert_eq!(pool.counts(), (0, 0, 0));
    }
}
