//! `set_limit`: a ceiling on the process's live requested bytes, to make allocations fail on demand.

use crate::base::lock::{Lock, Rank};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Whether a limit is set; while it is, `LIVE` is kept up to date by every allocation and free.
static ON: AtomicBool = AtomicBool::new(false);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Live requested bytes of the process (all threads, small and large blocks), while `ON`.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Serialises `set_limit` calls.
static SETTING: Lock<()> = Lock::new(Rank::LimitSetting, ());

/// [`testing::set_limit`](crate::testing::set_limit): `live_now` gives the live bytes when a limit
/// is set while none was (the caller reads them from `stats`, above this layer).
pub(crate) fn set_limit(limit: Option<usize>, live_now: impl FnOnce() -> usize) {
    let _g = SETTING.lock();
    match limit {
        Some(n) => {
            LIMIT.store(n, Relaxed);
            if !ON.load(Relaxed) {
                LIVE.store(0, Relaxed);
                ON.store(true, Relaxed);
                super::armed::arm();
                // From here on, allocations and frees move LIVE; add what was live before.
                LIVE.fetch_add(live_now(), Relaxed);
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
