//! `PoolAlloc`'s data path where the pools have no port (see `os/mod.rs`): the system
//! allocator's. Each method has GlobalAlloc's contract for the method of the same name, forwarded
//! to `System`.

use super::PoolAlloc;
use core::alloc::{GlobalAlloc, Layout};

impl PoolAlloc {
    #[inline(always)]
    pub(super) unsafe fn plain_alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.alloc(layout) }
    }

    #[inline(always)]
    pub(super) unsafe fn plain_dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    #[inline(always)]
    pub(super) unsafe fn plain_alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    pub(super) unsafe fn plain_realloc(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

/// The usable size of a block allocated with `layout`: the request (the system allocator's
/// own rounding is not known).
#[inline]
pub fn usable_size(layout: Layout) -> usize {
    layout.size()
}
