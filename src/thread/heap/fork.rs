//! The heap's locks around `fork` (`thread/fork.rs` takes every lock in the lock order; the heap's
//! come first).

use super::alloc::SHARED;
use super::registry::REGISTRY;

/// Installs the heap's fork hooks (once per process: `thread/fork.rs` keeps the first).
pub(super) fn install() {
    crate::thread::fork::install(lock_for_fork, unlock_after_fork);
}

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
