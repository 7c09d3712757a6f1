//! Whether `PoolAlloc` must call the `testing` hooks: a count of reasons to watch (a limit is set,
//! plus each running `count` and `forbid` scope). Below the hooks and the tools that arm them, so
//! neither imports the other.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Number of reasons to watch: a limit is set (1), plus each running `count` and `forbid` scope.
static ARMED: AtomicUsize = AtomicUsize::new(0);

/// True while any reason to watch holds: one relaxed load.
#[inline(always)]
pub fn armed() -> bool {
    ARMED.load(Relaxed) != 0
}

/// One more reason to watch.
pub(super) fn arm() {
    ARMED.fetch_add(1, Relaxed);
}

/// One reason to watch fewer.
pub(super) fn disarm() {
    ARMED.fetch_sub(1, Relaxed);
}
