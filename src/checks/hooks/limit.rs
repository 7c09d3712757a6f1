//! `set_limit`: a ceiling on the process's live requested bytes, to make allocations fail on demand.

use crate::lock::Lock;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Whether a limit is set; while it is, `LIVE` is kept up to date by every allocation and free.
static ON: AtomicBool = AtomicBool::new(false);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Live requested bytes of the process (all threads, small and large blocks), while `ON`.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Serialises `set_limit` calls.
static SETTING: Lock<()> = Lock::new(());

/// Sets (`Some(bytes)`) or removes (`None`) a ceiling on the live requested bytes of the process.
/// While a limit is set, an allocation through [`PoolAlloc`](crate::PoolAlloc) (`alloc`,
/// `alloc_zeroed`, or the growth of a `realloc`) that would take the sum of `Layout::size()` of
/// all live blocks, in all threads, above the limit returns null: `Vec::try_reserve` returns `Err`,
/// and an infallible allocation aborts through Rust's usual out-of-memory message
/// (`memory allocation of N bytes failed`), as on a real out-of-memory. Frees and shrinking
/// reallocations always succeed.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// let mut v: Vec<u8> = Vec::new();
/// let live = poolalloc::stats().requested_bytes + poolalloc::stats().large_bytes;
/// poolalloc::testing::set_limit(Some(live + 1024));
/// let small = v.try_reserve(512);
/// let huge = v.try_reserve(1 << 20);
/// poolalloc::testing::set_limit(None);
/// assert!(small.is_ok());
/// assert!(huge.is_err());
/// ```
///
/// - **Where live bytes come from.** When a limit is set while none was, the live bytes are read
///   from [`stats()`](crate::stats) (its `requested_bytes + large_bytes`), then kept up to date by
///   each allocation, reallocation and free. The reading is exact when other threads are not
///   allocating or freeing during the call; otherwise it is off by what they did meanwhile.
///   Setting a new limit while one is set keeps the running count.
/// - **The limit is process-wide**: other threads' allocations fail too, including a test
///   harness's. Set a limit in a test of its own (or a process of its own), and remove it before
///   anything that must allocate.
/// - A limit of zero fails every allocation; a limit below the bytes already live fails every
///   allocation until frees bring the live bytes down to where the next request fits.
/// - Only allocations through `PoolAlloc` are counted and refused (as the global allocator or as an
///   `allocator_api2` allocator); `System` and other allocators are untouched.
/// - While a limit is set, every allocation and free makes one atomic read-modify-write on a shared
///   counter (they do not without a limit).
///
/// Needs the `testing` feature.
pub fn set_limit(limit: Option<usize>) {
    let _g = SETTING.lock();
    match limit {
        Some(n) => {
            LIMIT.store(n, Relaxed);
            if !ON.load(Relaxed) {
                LIVE.store(0, Relaxed);
                ON.store(true, Relaxed);
                super::armed::arm();
                // From here on, allocations and frees move LIVE; add what was live before.
                let s = crate::stats::stats();
                LIVE.fetch_add(s.requested_bytes + s.large_bytes, Relaxed);
            }
        }
        None => {
            if ON.load(Relaxed) {
                ON.store(false, Relaxed);
                LIMIT.store(usize::MAX, Relaxed);
                super::armed::disarm();
            }
        }
    }
}

/// Takes `size` more live bytes if the limit allows it; false means the allocation must fail.
#[inline]
pub fn reserve(size: usize) -> bool {
    if !ON.load(Relaxed) {
        return true;
    }
    let limit = LIMIT.load(Relaxed) as i128;
    let mut cur = LIVE.load(Relaxed);
    loop {
        // LIVE is a wrapping sum: read as signed, a baseline that raced with frees on other threads
        // can make it transiently negative.
        if cur as isize as i128 + size as i128 > limit {
            return false;
        }
        match LIVE.compare_exchange_weak(cur, cur.wrapping_add(size), Relaxed, Relaxed) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

/// Gives back `size` live bytes (a free, a shrink, or a reservation whose allocation failed).
#[inline]
pub fn release(size: usize) {
    if ON.load(Relaxed) {
        LIVE.fetch_sub(size, Relaxed); // wrapping, like the sum
    }
}
