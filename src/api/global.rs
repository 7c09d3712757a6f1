//! `PoolAlloc`: the allocator users install. It routes each request by size class: small ones to
//! the calling thread's heap, large or over-aligned ones to `large` (the system allocator or
//! spans, `LargeBlocks`). With `raw` (the size-less interface) it is one of the two places that
//! call the `hardened` hand-out and free checks; every optional check, hook and profiler call goes
//! through `checks` (no-ops without their features).
//!
//! The data path itself is a file of its own, chosen by the platform: `global/pools.rs` where the
//! pools have a port, `global/system.rs` (the system allocator) elsewhere. This file adds the
//! `testing` hooks around it, and the allocator-api2 `Allocator` trait.

use crate::checks;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::{self, NonNull};

#[cfg(poolalloc_pools)]
mod pools;
#[cfg(not(poolalloc_pools))]
mod system;
#[cfg(poolalloc_pools)]
pub use pools::usable_size;
#[cfg(not(poolalloc_pools))]
pub use system::usable_size;

/// The allocator. Every value is a handle to the same process-wide pools, so values are free to
/// create, copy and compare; `new` is `const` so it can initialise a `static`:
///
/// ```
/// #[global_allocator]
/// static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolAlloc {
    _private: (),
}

impl PoolAlloc {
    /// A handle to the process-wide pools.
    pub const fn new() -> Self {
        PoolAlloc { _private: () }
    }
}

// SAFETY: small blocks are distinct slots of at least `layout.size()` bytes aligned to
// `layout.align()` (size_class module docs); large ones come from System. Nothing here unwinds or
// allocates through the global allocator.
unsafe impl GlobalAlloc for PoolAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if checks::watched() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_alloc(layout, false) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if checks::watched() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_dealloc(ptr, layout) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if checks::watched() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_alloc(layout, true) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if checks::watched() {
            if !checks::before_realloc(layout, new_size) {
                return ptr::null_mut();
            }
            // SAFETY: forwarded contract.
            let q = unsafe { self.plain_realloc(ptr, layout, new_size) };
            checks::after_realloc(ptr, layout, new_size, q);
            return q;
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_realloc(ptr, layout, new_size) }
    }
}

// The `testing` hooks, out of line (never called without the feature: `checks::watched` is then
// false).
impl PoolAlloc {
    /// An allocation while a `testing` hook is armed: `forbid`, the limit, then `count`.
    #[inline(never)]
    unsafe fn watched_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if !checks::before_alloc(layout) {
            return ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        let p = unsafe {
            if zeroed {
                self.plain_alloc_zeroed(layout)
            } else {
                self.plain_alloc(layout)
            }
        };
        checks::after_alloc(p, layout);
        p
    }

    /// A free while a `testing` hook is armed (out of line, so the fast path stays a leaf).
    #[inline(never)]
    unsafe fn watched_dealloc(&self, ptr: *mut u8, layout: Layout) {
        checks::before_free(ptr, layout);
        // SAFETY: forwarded contract.
        unsafe { self.plain_dealloc(ptr, layout) }
    }
}

// The allocator-api2 `Allocator` trait, so collections can take a `PoolAlloc` on stable Rust.
// SAFETY: blocks stay valid until deallocated through any PoolAlloc value (all share the pools);
// every method follows GlobalAlloc's contract above.
unsafe impl allocator_api2::alloc::Allocator for PoolAlloc {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        if layout.size() == 0 {
            // Zero-sized: a dangling, well-aligned pointer, as the trait allows.
            let p = ptr::without_provenance_mut::<u8>(layout.align());
            // SAFETY: an alignment is never zero.
            return Ok(NonNull::slice_from_raw_parts(
                unsafe { NonNull::new_unchecked(p) },
                0,
            ));
        }
        // SAFETY: layout has non-zero size.
        let p = unsafe { self.alloc(layout) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, usable_size(layout)))
            .ok_or(allocator_api2::alloc::AllocError)
    }

    #[inline]
    fn allocate_zeroed(
        &self,
        layout: Layout,
    ) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        if layout.size() == 0 {
            return self.allocate(layout);
        }
        // SAFETY: layout has non-zero size.
        let p = unsafe { self.alloc_zeroed(layout) };
        // Only layout.size() bytes are zeroed: report exactly that many.
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(allocator_api2::alloc::AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: ptr was allocated by this allocator with a layout that fits it (trait contract);
            // any size in [layout.size(), usable size] maps to the same class.
            unsafe { self.dealloc(ptr.as_ptr(), layout) }
        }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        // SAFETY: forwarded trait contract.
        unsafe { self.resize(ptr, old, new) }
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        // SAFETY: forwarded trait contract.
        let p = unsafe { self.resize(ptr, old, new)? };
        // SAFETY: the block holds new.size() ≥ old.size() bytes.
        unsafe {
            ptr::write_bytes(
                p.cast::<u8>().as_ptr().add(old.size()),
                0,
                new.size() - old.size(),
            )
        };
        Ok(NonNull::slice_from_raw_parts(p.cast(), new.size()))
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        // SAFETY: forwarded trait contract.
        unsafe { self.resize(ptr, old, new) }
    }
}

impl PoolAlloc {
    /// grow/shrink: with the same alignment, `realloc` (in place when the slot holds the new
    /// size, `size_class::stays`), else move the block.
    unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        use allocator_api2::alloc::{AllocError, Allocator};
        if old.size() != 0 && new.size() != 0 && old.align() == new.align() {
            // SAFETY: same alignment, non-zero sizes: GlobalAlloc::realloc's contract holds.
            let p = unsafe { self.realloc(ptr.as_ptr(), old, new.size()) };
            return NonNull::new(p)
                .map(|p| NonNull::slice_from_raw_parts(p, usable_size(new)))
                .ok_or(AllocError);
        }
        let q = self.allocate(new)?;
        // SAFETY: both blocks hold at least min(old, new) bytes and are distinct; ptr is then freed
        // with the layout it was allocated with.
        unsafe {
            ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                q.cast::<u8>().as_ptr(),
                old.size().min(new.size()),
            );
            self.deallocate(ptr, old);
        }
        Ok(q)
    }
}
