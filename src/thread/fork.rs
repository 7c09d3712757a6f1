//! `fork`: a child forked while another thread holds one of our locks would deadlock on its first
//! allocation (jemalloc #315). Around fork, the forking thread takes every lock in the lock order
//! (the heap's: shared heap, registry; the source's class locks and region lock; the span cache;
//! `hardened`'s table; the profiler's tables, a leaf) and releases them in parent and child. This is the one place that knows
//! every lock. The OS layer runs the hooks (`pthread_atfork`; nothing where there is no fork).
//!
//! The heap, which installs the hooks on its first use, hands in its own lock functions, so this
//! module does not import the heap (the heap imports it).

use crate::{checks, memory::chunk_lists, memory::purge, memory::span, os};
use core::sync::atomic::{AtomicPtr, Ordering};

/// The heap's lock and unlock functions, stored by [`install`].
static HEAP_LOCK: os::Hook = os::Hook::new();
static HEAP_UNLOCK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Registers the fork hooks once, before the first heap exists (so before any chunk).
/// `lock_heap` takes the heap's locks (the first in the lock order); `unlock_heap` releases them.
pub fn install(lock_heap: fn(), unlock_heap: unsafe fn()) {
    static ONCE: spin::Once<()> = spin::Once::new();
    ONCE.call_once(|| {
        HEAP_LOCK.set(lock_heap);
        HEAP_UNLOCK.store(unlock_heap as *mut (), Ordering::Release);
        os::at_fork(prepare, parent, child);
    });
}

fn prepare() {
    HEAP_LOCK.call();
    chunk_lists::lock_for_fork();
    span::lock_for_fork();
    checks::lock_for_fork();
}

/// # Safety
/// Only after `prepare`, by the same thread (or its child).
unsafe fn release(child: bool) {
    // SAFETY: HEAP_UNLOCK holds the `unsafe fn()` install stored before registering the hooks.
    let unlock_heap: unsafe fn() = unsafe {
        core::mem::transmute::<*mut (), unsafe fn()>(HEAP_UNLOCK.load(Ordering::Acquire))
    };
    // SAFETY: prepare took every one of these locks in this thread and forgot the guards; in the
    // child this thread is the only one, and the copies of the locks are held by it.
    unsafe {
        checks::unlock_after_fork();
        span::unlock_after_fork();
        chunk_lists::unlock_after_fork();
        unlock_heap();
    }
    if child {
        // The purger thread does not exist in the child: the next empty chunk starts a new one.
        purge::forget_after_fork();
    }
}

fn parent() {
    // SAFETY: runs after prepare in the same thread.
    unsafe { release(false) };
}

fn child() {
    // SAFETY: runs after prepare in the forking thread's copy.
    unsafe { release(true) };
}
