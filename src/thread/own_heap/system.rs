//! A `Heap` where the pools have no port: every block is a tracked block from the system
//! allocator, and nothing is routed.

use super::{Heap, Inner};
use core::alloc::Layout;

/// No pools heap where the pools have no port.
pub(super) type PoolsHeap = ();

/// Where tracked blocks (every block, here) come from where the pools have no port: the
/// system allocator (no thread counters here: `counted` is for the pools' version).
///
/// # Safety
/// `layout` has a non-zero size.
pub(super) unsafe fn backing_alloc(layout: Layout, _counted: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe { std::alloc::GlobalAlloc::alloc(&std::alloc::System, layout) }
}

/// # Safety
/// `p` came from [`backing_alloc`] with `layout`.
pub(super) unsafe fn backing_dealloc(p: *mut u8, layout: Layout, _counted: usize) {
    // SAFETY: forwarded contract.
    unsafe { std::alloc::GlobalAlloc::dealloc(&std::alloc::System, p, layout) }
}

impl Inner {
    pub(super) fn alloc(&mut self, layout: Layout) -> *mut u8 {
        self.alloc_tracked(layout)
    }

    /// # Safety
    /// `p` is a live block of this heap of `layout`.
    pub(super) unsafe fn free(&mut self, p: *mut u8, _layout: Layout) {
        // SAFETY: every block is tracked here.
        unsafe { self.free_tracked(p) }
    }

    pub(super) fn destroy_pools(&mut self) {}

    pub(super) fn entered_bytes(&self) -> usize {
        0
    }
}

impl Heap {
    /// Runs `f`. Where the pools have no port nothing is routed: the global allocations of
    /// `f` are the system allocator's.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }

    pub(super) fn entered_here(&self) -> bool {
        false
    }
}
