use core::alloc::{GlobalAlloc, Layout};
use std::alloc::System;

/// The allocator handle. Every value shares the process-wide pools.
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolAlloc {
    _private: (),
}

impl PoolAlloc {
    pub const fn new() -> Self {
        PoolAlloc { _private: () }
    }
}

// TEMPORARY forwarding so that tests and benches can be written against the API; replaced by the core.
unsafe impl GlobalAlloc for PoolAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}
