//! The `testing` feature's contention counters (their public face is
//! `poolalloc::testing::contention`): how often the shared parts of the allocator were contended,
//! counted by the allocator itself, so that contention can be measured on a machine with fewer
//! cores than threads (issue 33: a count that does not need cores). Each counter is one relaxed
//! `fetch_add` on a process-wide atomic at a site that is already off the fast path (a lock, a
//! remote push, a collection, an adoption); without `testing` every function here is an empty
//! `#[inline(always)]` body and the counters do not exist.

#[cfg(feature = "testing")]
/// What the allocator's shared parts saw since the process started (or between two snapshots:
/// [`Contention::since`]). Process-wide: every thread's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    /// Acquisitions of the allocator's spin locks (`base/lock`: a heap's `lists`, the shared heap,
    /// the registry, a source class lock, the region lock, the span cache, ...).
    pub lock_acquisitions: u64,
    /// Of those, the ones whose first attempt found the lock held (the thread then waited).
    pub lock_waits: u64,
    /// Yields while waiting for a lock (each a failed attempt that gave the core away).
    pub lock_yields: u64,
    /// Pushes onto a chunk's remote-free list (one CAS each when uncontended; a batch is one push).
    pub remote_pushes: u64,
    /// Extra CAS attempts of those pushes: the list word changed between the load and the CAS
    /// (another pusher, or the owner's swap).
    pub remote_push_retries: u64,
    /// Swaps of a chunk's remote-free list by its owner (or by the source, for abandoned chunks)
    /// that found slots waiting.
    pub collections: u64,
    /// Abandoned chunks adopted by a heap.
    pub adoptions: u64,
    /// Blocks freed by a thread that does not own their chunk (remote frees), the denominator of
    /// the three counts below (issue 45: what a block that changes threads costs, counted where a
    /// CPU's clock hides it).
    pub remote_frees: u64,
    /// Atomic read-modify-writes on a chunk's header by remote frees outside a batch's push: 0
    /// per block unless the freeing thread has exited or the chunk has no owner (each such free
    /// is pushed alone).
    pub remote_header_rmws: u64,
    /// Links of remote-free lists the owner followed to collect them: one per message (its next),
    /// and in the classes that link their slots, one per slot where the list is walked for its
    /// tail and count (every list on 32-bit targets; on 64-bit ones only a list joined to a free
    /// list that is not empty).
    pub remote_links_walked: u64,
    /// Blocks the freeing thread wrote into: the first of each message (which holds the indices
    /// of the others), and each block of the classes that link their slots.
    pub remote_block_writes: u64,
}

#[cfg(feature = "testing")]
impl Contention {
    /// The events between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Contention) -> Contention {
        Contention {
            lock_acquisitions: self.lock_acquisitions - earlier.lock_acquisitions,
            lock_waits: self.lock_waits - earlier.lock_waits,
            lock_yields: self.lock_yields - earlier.lock_yields,
            remote_pushes: self.remote_pushes - earlier.remote_pushes,
            remote_push_retries: self.remote_push_retries - earlier.remote_push_retries,
            collections: self.collections - earlier.collections,
            adoptions: self.adoptions - earlier.adoptions,
            remote_frees: self.remote_frees - earlier.remote_frees,
            remote_header_rmws: self.remote_header_rmws - earlier.remote_header_rmws,
            remote_links_walked: self.remote_links_walked - earlier.remote_links_walked,
            remote_block_writes: self.remote_block_writes - earlier.remote_block_writes,
        }
    }
}

#[cfg(feature = "testing")]
mod on {
    use super::Contention;
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

    pub static LOCKS: AtomicU64 = AtomicU64::new(0);
    pub static WAITS: AtomicU64 = AtomicU64::new(0);
    pub static YIELDS: AtomicU64 = AtomicU64::new(0);
    pub static PUSHES: AtomicU64 = AtomicU64::new(0);
    pub static RETRIES: AtomicU64 = AtomicU64::new(0);
    pub static COLLECTIONS: AtomicU64 = AtomicU64::new(0);
    pub static ADOPTIONS: AtomicU64 = AtomicU64::new(0);
    pub static REMOTE_FREES: AtomicU64 = AtomicU64::new(0);
    pub static HEADER_RMWS: AtomicU64 = AtomicU64::new(0);
    pub static LINKS_WALKED: AtomicU64 = AtomicU64::new(0);
    pub static BLOCK_WRITES: AtomicU64 = AtomicU64::new(0);

    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    pub fn snapshot() -> Contention {
        Contention {
            lock_acquisitions: LOCKS.load(Relaxed),
            lock_waits: WAITS.load(Relaxed),
            lock_yields: YIELDS.load(Relaxed),
            remote_pushes: PUSHES.load(Relaxed),
            remote_push_retries: RETRIES.load(Relaxed),
            collections: COLLECTIONS.load(Relaxed),
            adoptions: ADOPTIONS.load(Relaxed),
            remote_frees: REMOTE_FREES.load(Relaxed),
            remote_header_rmws: HEADER_RMWS.load(Relaxed),
            remote_links_walked: LINKS_WALKED.load(Relaxed),
            remote_block_writes: BLOCK_WRITES.load(Relaxed),
        }
    }
}

#[cfg(feature = "testing")]
pub use on::snapshot;

/// A lock was taken; `waited`: its first attempt found it held.
#[inline(always)]
#[cfg_attr(not(any(feature = "testing", debug_assertions)), allow(dead_code))]
pub fn lock_taken(waited: bool) {
    #[cfg(feature = "testing")]
    {
        on::add(&on::LOCKS, 1);
        if waited {
            on::add(&on::WAITS, 1);
        }
    }
    #[cfg(not(feature = "testing"))]
    let _ = waited;
}

/// A lock waiter gave its core away once.
#[inline(always)]
pub fn lock_yield() {
    #[cfg(feature = "testing")]
    on::add(&on::YIELDS, 1);
}

/// A push onto a remote-free list took `attempts` CAS attempts (at least 1).
#[inline(always)]
pub fn remote_push(attempts: u64) {
    #[cfg(feature = "testing")]
    {
        on::add(&on::PUSHES, 1);
        on::add(&on::RETRIES, attempts.saturating_sub(1));
    }
    #[cfg(not(feature = "testing"))]
    let _ = attempts;
}

/// A swap of a remote-free list found slots waiting.
#[inline(always)]
pub fn collection() {
    #[cfg(feature = "testing")]
    on::add(&on::COLLECTIONS, 1);
}

/// A heap adopted an abandoned chunk.
#[inline(always)]
pub fn adoption() {
    #[cfg(feature = "testing")]
    on::add(&on::ADOPTIONS, 1);
}

/// A block was freed by a thread that does not own its chunk; `writes`: 1 if it wrote into the
/// block (a link, or a message's first slot), else 0.
#[inline(always)]
pub fn remote_free(writes: u64) {
    #[cfg(feature = "testing")]
    {
        on::add(&on::REMOTE_FREES, 1);
        on::add(&on::BLOCK_WRITES, writes);
    }
    #[cfg(not(feature = "testing"))]
    let _ = writes;
}

/// A remote free made an atomic read-modify-write on its chunk's header outside a batch's push.
#[inline(always)]
pub fn header_rmw() {
    #[cfg(feature = "testing")]
    on::add(&on::HEADER_RMWS, 1);
}

/// The owner followed `n` links of a remote-free list it took.
#[inline(always)]
pub fn links_walked(n: u64) {
    #[cfg(feature = "testing")]
    on::add(&on::LINKS_WALKED, n);
    #[cfg(not(feature = "testing"))]
    let _ = n;
}
