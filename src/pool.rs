//! A pool: the shared, locked home of one size class's chunks. Thread caches refill from it and
//! flush to it in batches; it takes chunks from the chunk source and gives empty ones back.
//!
//! Lists (all guarded by the pool's lock):
//! - `partial`: chunks with a slot to hand out and at least one handed out (`ListKind::Partial`);
//! - `empty`: chunks with no slot handed out, newest first (`ListKind::Empty`). The first `retain` of
//!   them are kept; the others are given back to the OS once they have been empty for the purge
//!   delay (250 ms by default), by a background purger thread — so a program that frees a heap and
//!   builds it again soon after reuses the pages without faulting them in again, and one that frees
//!   everything and goes idle still sees its RSS fall within a second, with no call;
//! - full chunks are on no list; a slot freed into one puts it back on `partial`;
//! - `transfer`: up to [`TRANSFER_BATCHES`] whole batches flushed by thread caches, parked as they
//!   came (tcmalloc's transfer cache). A refill takes one whole, so slots that pass from one thread to
//!   another in batches (producer/consumer, larson) cost O(1) under the lock per batch instead of a
//!   visit to every slot's chunk. `trim` and [`Pool::drain_transfer`] return them to their chunks.

use crate::chunk::{self, Chain, Chunk, FreeSlot, ListKind};
use crate::lock::Lock;
use crate::size_class::{self, NUM_CLASSES};
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Empty chunks each class keeps for reuse before giving further ones back to the OS.
static RETAIN: AtomicUsize = AtomicUsize::new(1);

/// Sets how many empty chunks each size class keeps indefinitely instead of returning them to the
/// OS (default 1).
pub fn set_retained_chunks(n: usize) {
    RETAIN.store(n, Ordering::Relaxed);
}

/// Empty chunks on all pools' empty lists together. Beyond `retain` per class, a chunk may wait for
/// the purger only while this is under [`WAITING_MAX`]: the memory waiting is bounded (16 MiB), so a
/// program whose sizes drift (emptying chunks of classes it no longer uses) does not pile them up.
static WAITING: AtomicUsize = AtomicUsize::new(0);
const WAITING_MAX: usize = 64;

/// Milliseconds an empty chunk beyond the retained ones waits before it goes back to the OS.
static PURGE_DELAY_MS: AtomicUsize = AtomicUsize::new(250);

/// Sets how long an empty chunk (beyond the retained ones) waits before its memory is returned to the
/// OS (default 250 ms). Zero returns it the moment its last slot is freed and never starts the
/// background purger thread.
pub fn set_purge_delay_ms(ms: usize) {
    PURGE_DELAY_MS.store(ms, Ordering::Relaxed);
}

/// A coarse monotonic clock in milliseconds (wrapping), cheap enough for the slow path.
pub fn now_ms() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000) as u32
}

/// Whole batches a pool parks for the next refill.
pub const TRANSFER_BATCHES: usize = 4;

struct PoolInner {
    /// `transfer[..ntransfer]` are chains of exactly `size_class::batch(class)` slots each.
    transfer: [Chain; TRANSFER_BATCHES],
    ntransfer: usize,
    /// Slots in `transfer[..ntransfer]`.
    transfer_slots: usize,
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

type PoolGuard<'a> = spin::mutex::SpinMutexGuard<'a, PoolInner>;

#[allow(clippy::declare_interior_mutable_const)] // used only to build the POOLS array below
const NEW_POOL: Pool = Pool {
    inner: Lock::new(PoolInner {
        transfer: [Chain::EMPTY; TRANSFER_BATCHES],
        ntransfer: 0,
        transfer_slots: 0,
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
                WAITING.fetch_sub(1, Ordering::Relaxed);
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
        if want == size_class::batch(class) && g.ntransfer > 0 {
            // Slots in the transfer cache are already counted in `used`.
            g.ntransfer -= 1;
            let chain = g.transfer[g.ntransfer];
            g.transfer_slots -= chain.count as usize;
            return chain;
        }
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
    ///
    /// A whole batch is parked in the transfer cache when `park` is set and there is room; thread
    /// exit and `trim` pass `park = false`, because parked slots pin their chunks.
    pub fn flush(&self, class: usize, chain: Chain, park: bool) {
        let mut g = self.inner.lock();
        if park && chain.count == size_class::batch(class) && g.ntransfer < TRANSFER_BATCHES {
            let n = g.ntransfer;
            g.transfer[n] = chain;
            g.ntransfer += 1;
            g.transfer_slots += chain.count as usize;
            drop(self.unpark_excess(g));
            return;
        }
        g = self.give_back(g, chain);
        drop(self.unpark_excess(g));
    }

    /// Parked slots pin their chunks, so they may be at most a quarter of the slots handed out:
    /// while a class is busy the transfer cache serves it, and when the program frees everything it
    /// empties itself (no timer needed).
    fn unpark_excess<'a>(&'a self, mut g: PoolGuard<'a>) -> PoolGuard<'a> {
        while g.ntransfer > 0 && g.used < 4 * g.transfer_slots {
            g.ntransfer -= 1;
            let chain = g.transfer[g.ntransfer];
            g.transfer_slots -= chain.count as usize;
            g = self.give_back(g, chain);
        }
        g
    }

    /// Returns the transfer cache's batches to their chunks.
    pub fn drain_transfer(&self) {
        loop {
            let mut g = self.inner.lock();
            if g.ntransfer == 0 {
                return;
            }
            g.ntransfer -= 1;
            let chain = g.transfer[g.ntransfer];
            g.transfer_slots -= chain.count as usize;
            drop(self.give_back(g, chain));
        }
    }

    /// Returns each slot of `chain` to its chunk. Chunks that become empty are retained (up to the
    /// limit) or given back to the OS — with the lock released for the syscalls, and taken again.
    fn give_back<'a>(&'a self, mut g: PoolGuard<'a>, chain: Chain) -> PoolGuard<'a> {
        let mut release: *mut Chunk = ptr::null_mut();
        let retain = RETAIN.load(Ordering::Relaxed);
        // Keep empty chunks beyond `retain` for the purger when there is one (or can be).
        let delay = PURGE_DELAY_MS.load(Ordering::Relaxed) > 0 && purger_running();
        let now = if delay { now_ms() } else { 0 };
        {
            let mut s = chain.head;
            let mut n = 0;
            while n < chain.count {
                // SAFETY: the chain holds `count` slots of this class handed out by this pool; each
                // first word links to the next. We hold the lock, so chunk headers are ours.
                unsafe {
                    let next = FreeSlot::next(s);
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
                        if g.nempty < retain
                            || delay && WAITING.load(Ordering::Relaxed) < WAITING_MAX
                        {
                            WAITING.fetch_add(1, Ordering::Relaxed);
                            (*c).next = g.empty;
                            (*c).emptied_at = now;
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
        if release.is_null() {
            return g;
        }
        // Syscalls outside the lock.
        drop(g);
        release_all(release);
        self.inner.lock()
    }

    /// Gives back the empty chunks beyond the first `retain` that have been empty for `delay_ms`.
    fn purge_expired(&self, now: u32, delay_ms: u32) {
        let retain = RETAIN.load(Ordering::Relaxed);
        let list = {
            let mut g = self.inner.lock();
            if g.nempty <= retain {
                return;
            }
            let mut out: *mut Chunk = ptr::null_mut();
            let mut link: *mut *mut Chunk = &mut g.empty;
            let mut i = 0;
            let mut gone = 0;
            // SAFETY: every chunk on the empty list is a live header of this pool; we hold the lock.
            unsafe {
                while !(*link).is_null() {
                    let c = *link;
                    if i >= retain && now.wrapping_sub((*c).emptied_at) >= delay_ms {
                        *link = (*c).next;
                        (*c).next = out;
                        out = c;
                        gone += 1;
                    } else {
                        link = &mut (*c).next;
                        i += 1;
                    }
                }
            }
            g.nempty -= gone;
            g.chunks -= gone;
            WAITING.fetch_sub(gone, Ordering::Relaxed);
            out
        };
        release_all(list);
    }

    /// Gives every retained empty chunk back to the OS.
    pub fn trim(&self) {
        self.drain_transfer();
        let list = {
            let mut g = self.inner.lock();
            let list = g.empty;
            g.chunks -= g.nempty;
            WAITING.fetch_sub(g.nempty, Ordering::Relaxed);
            g.empty = ptr::null_mut();
            g.nempty = 0;
            list
        };
        release_all(list);
    }

    /// (chunks held, slots handed out, retained empty chunks, slots in the transfer cache).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let g = self.inner.lock();
        let transfer = g.transfer[..g.ntransfer]
            .iter()
            .map(|t| t.count as usize)
            .sum();
        (g.chunks, g.used, g.nempty, transfer)
    }

    /// Checks every chunk on the pool's lists (tests).
    #[cfg(test)]
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
    unsafe { FreeSlot::set_next(s, ptr::null_mut()) };
    POOLS[class].flush(class, Chain { head: s, count: 1 }, false);
}

// ---------------------------------------------------------------------------------------------------
// fork: a child forked while another thread holds a pool lock would deadlock on its first allocation
// (jemalloc #315). Around fork, the forking thread takes every lock (registry, pools in class order, then the
// chunk source: the order every other path takes them in) and releases them in parent and child.

extern "C" fn fork_prepare() {
    crate::thread_cache::lock_for_fork();
    for p in POOLS.iter() {
        core::mem::forget(p.inner.lock());
    }
    chunk::lock_for_fork();
    #[cfg(feature = "hardened")]
    crate::hardened::lock_for_fork();
}

extern "C" fn fork_child() {
    fork_release();
    // The purger thread does not exist in the child: the next empty chunk starts a new one.
    PURGER.store(0, Ordering::Relaxed);
}

extern "C" fn fork_release() {
    // SAFETY: fork_prepare took every one of these locks in this thread and forgot the guards; in
    // the child this thread is the only one, and the copies of the locks are held by it.
    unsafe {
        #[cfg(feature = "hardened")]
        crate::hardened::unlock_after_fork();
        chunk::unlock_after_fork();
        for p in POOLS.iter() {
            p.inner.force_unlock();
        }
        crate::thread_cache::unlock_after_fork();
    }
}

static FORK_HANDLERS: spin::Once<()> = spin::Once::new();

/// Registers the fork handlers once, before the first chunk is taken.
pub fn install_fork_handlers() {
    FORK_HANDLERS.call_once(|| {
        // SAFETY: the handlers are plain functions that live for the whole program.
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_child));
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
                    s = FreeSlot::next(s);
                }
            }
            got += ch.count as usize;
            chains.push(ch);
        }
        let (chunks, used, _, _) = pool.counts();
        assert_eq!(used, got);
        assert_eq!(chunks, got.div_ceil(cap));
        pool.check(class);
        for ch in chains {
            pool.flush(class, ch, true);
            pool.check(class);
        }
        let (chunks, used, retained, _) = pool.counts();
        assert_eq!(used, 0);
        assert_eq!(retained, chunks);
        pool.trim();
        assert_eq!(pool.counts(), (0, 0, 0, 0));
    }

    /// A retained empty chunk is reused before a new one is taken.
    #[test]
    fn retained_chunk_is_reused() {
        let class = 31;
        let pool = &POOLS[class];
        let ch = pool.refill(class, 3);
        let first = chunk::of(ch.head);
        pool.flush(class, ch, true);
        assert_eq!(pool.counts(), (1, 0, 1, 0));
        let ch = pool.refill(class, 3);
        assert_eq!(chunk::of(ch.head), first);
        assert!(chunk::chunks_in_use() >= 1);
        pool.flush(class, ch, true);
        pool.trim();
        assert_eq!(pool.counts(), (0, 0, 0, 0));
    }
}

// ---------------------------------------------------------------------------------------------------
// The purger: a background thread that gives expired empty chunks back to the OS. It is a plain
// pthread (no Rust runtime, nothing allocated through us), started the first time a pool would keep
// an empty chunk beyond `retain`; if it cannot be started, empty chunks go back at once.

/// 0: not started; 1: running; 2: could not be started.
static PURGER: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// Whether the purger runs (starting it if needed).
fn purger_running() -> bool {
    match PURGER.load(Ordering::Acquire) {
        1 => true,
        2 => false,
        _ => start_purger(),
    }
}

#[cold]
fn start_purger() -> bool {
    if PURGER
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return PURGER.load(Ordering::Acquire) == 1;
    }
    // SAFETY: attr and tid are valid out-pointers; the thread function lives forever and takes no
    // argument. A small stack: the purger only walks lists and makes syscalls.
    let ok = unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        let mut tid: libc::pthread_t = 0;
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 64 * 1024);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let r = libc::pthread_create(&mut tid, &attr, purger_main, ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        r == 0
    };
    if !ok {
        PURGER.store(2, Ordering::Release);
    }
    ok
}

extern "C" fn purger_main(_: *mut libc::c_void) -> *mut libc::c_void {
    loop {
        let delay = PURGE_DELAY_MS.load(Ordering::Relaxed);
        let period = (delay / 2).clamp(10, 100);
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: (period * 1_000_000) as libc::c_long,
        };
        // SAFETY: ts is a valid timespec; a null remainder is allowed.
        unsafe { libc::nanosleep(&ts, ptr::null_mut()) };
        let now = now_ms();
        for p in POOLS.iter() {
            p.purge_expired(now, delay as u32);
        }
    }
}
