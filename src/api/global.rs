//! `PoolAlloc`: the allocator users install. It routes each request by size class: small ones to
//! the calling thread's heap, large or over-aligned ones to `large` (the system allocator or
//! spans, `LargeBlocks`). With `raw` (the size-less interface) it is one of the two places that
//! call the `hardened` hand-out and free checks (no-ops without the feature).

#[cfg(feature = "testing")]
use crate::checks::hooks as testing;
use core::alloc::{GlobalAlloc, Layout};
if_pools! {
    use crate::base::size_class::{self, class_of};
    use crate::{chunks::chunk, checks::hardened, thread::heap};
}
use core::ptr::{self, NonNull};

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
        #[cfg(feature = "testing")]
        if testing::armed() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_alloc(layout, false) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        #[cfg(feature = "testing")]
        if testing::armed() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_dealloc(ptr, layout) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        #[cfg(feature = "testing")]
        if testing::armed() {
            // SAFETY: forwarded contract.
            return unsafe { self.watched_alloc(layout, true) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        #[cfg(feature = "testing")]
        if testing::armed() {
            if !testing::before_realloc(layout, new_size) {
                return ptr::null_mut();
            }
            // SAFETY: forwarded contract.
            let q = unsafe { self.plain_realloc(ptr, layout, new_size) };
            testing::after_realloc(ptr, layout, new_size, q);
            return q;
        }
        // SAFETY: forwarded contract.
        unsafe { self.plain_realloc(ptr, layout, new_size) }
    }
}

// Where the pools have no port (see `os/mod.rs`), the data path is the system allocator's.
if_fallback! {
    // Each has GlobalAlloc's contract for the method of the same name, forwarded to System.
    impl PoolAlloc {
        #[inline(always)]
        unsafe fn plain_alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded contract.
            unsafe { std::alloc::System.alloc(layout) }
        }
        #[inline(always)]
        unsafe fn plain_dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: forwarded contract.
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
        #[inline(always)]
        unsafe fn plain_alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded contract.
            unsafe { std::alloc::System.alloc_zeroed(layout) }
        }
        unsafe fn plain_realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: forwarded contract.
            unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
        }
    }
}

// The data path itself; the GlobalAlloc methods above add only the `testing` hooks (compiled out
// without the feature). Each has GlobalAlloc's contract for the method of the same name.
if_pools! {
/// The layout a block is served with: the caller's, with the alignment of [`block_align`].
#[inline(always)]
fn block_layout(layout: Layout) -> Layout {
    let align = block_align(layout.size(), layout.align());
    if align == layout.align() {
        layout
    } else {
        Layout::from_size_align(layout.size(), align).unwrap_or(layout)
    }
}

/// The alignment a block of `size` bytes asked with `align` is served with: `align`, except that
/// on musl a block of 16 bytes or more is 16-aligned, as malloc's are. Rust's musl targets link
/// LLVM's libunwind, which reads the exception object (which std allocates with alignment 8) with
/// 16-byte SSE moves: with 8-aligned blocks every unwinding panic crashed. Elsewhere this is the
/// identity and compiles away.
#[inline(always)]
fn block_align(size: usize, align: usize) -> usize {
    if cfg!(target_env = "musl") && size >= 16 {
        align.max(16)
    } else {
        align
    }
}

/// `plain_alloc` beyond the common case. Size first, where the fast path holds it.
///
/// # Safety
/// `size` and `align` form a valid layout of non-zero size.
#[inline(never)]
unsafe fn alloc_rest(size: usize, align: usize) -> *mut u8 {
    match class_of(size, align) {
        Some(c) => small_alloc(c, size),
        // SAFETY: a valid, non-zero layout (caller).
        None => unsafe { heap::large_alloc(Layout::from_size_align_unchecked(size, align), false) },
    }
}

/// A block of class `c` for a request of `size` bytes (null when out of memory).
#[inline(always)]
fn small_alloc(c: usize, size: usize) -> *mut u8 {
    let p = heap::alloc(c, size);
    if !p.is_null() {
        hardened::on_hand_out(p, c);
    }
    p
}

// The `plain_*` methods are the data path without the `testing` hooks (the `watched_*` ones add
// them); nothing to do with the `raw` module. Each has GlobalAlloc's contract for its method.
impl PoolAlloc {
    #[inline(always)]
    unsafe fn plain_alloc(&self, layout: Layout) -> *mut u8 {
        let layout = block_layout(layout);
        // SAFETY: forwarded contract.
        let p = unsafe { self.pool_alloc(layout) };
        // With `profiling`, every block passes the sampler's countdown (one subtract, one branch).
        #[cfg(feature = "profiling")]
        crate::checks::profile::on_alloc(p, layout.size());
        p
    }

    #[inline(always)]
    unsafe fn pool_alloc(&self, layout: Layout) -> *mut u8 {
        // The common case straight through (no branch joins it: one jump fewer), the rest out of
        // line.
        if let Some(c) = size_class::class_of_common(layout.size(), layout.align()) {
            return small_alloc(c, layout.size());
        }
        // SAFETY: forwarded contract.
        unsafe { alloc_rest(layout.size(), layout.align()) }
    }

    #[inline(always)]
    unsafe fn plain_dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Once the profiler has recorded a block, frees go out of line past its records (a tail
        // call: the fast path keeps no register for it).
        #[cfg(feature = "profiling")]
        if crate::checks::profile::armed() {
            // SAFETY: forwarded contract.
            return unsafe { self.profiled_dealloc(ptr, layout) };
        }
        // SAFETY: forwarded contract.
        unsafe { self.pool_dealloc(ptr, layout) }
    }

    /// A free while the profiler holds records: the block's record (if any) goes first.
    #[cfg(feature = "profiling")]
    #[inline(never)]
    unsafe fn profiled_dealloc(&self, ptr: *mut u8, layout: Layout) {
        crate::checks::profile::on_free(ptr);
        // SAFETY: forwarded contract.
        unsafe { self.pool_dealloc(ptr, layout) }
    }

    #[inline(always)]
    unsafe fn pool_dealloc(&self, ptr: *mut u8, layout: Layout) {
        let layout = block_layout(layout);
        if size_class::is_small(layout.size(), layout.align()) {
            hardened::on_free(ptr, layout);
            // SAFETY: ptr is a live small block (caller's contract); its chunk header names its
            // class, which the layout's is (checked with `hardened`).
            unsafe { heap::dealloc(ptr, layout.size()) }
        } else {
            // SAFETY: a large block; forwarded contract.
            unsafe { heap::large_dealloc(ptr, layout) }
        }
    }

    #[inline(always)]
    unsafe fn plain_alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let layout = block_layout(layout);
        let p = match class_of(layout.size(), layout.align()) {
            Some(c) => {
                let p = heap::alloc(c, layout.size());
                if !p.is_null() {
                    hardened::on_hand_out(p, c);
                    // A recycled slot is dirty (at least its link word), so zero what was asked for.
                    // SAFETY: p is a fresh slot of at least layout.size() bytes.
                    unsafe { ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
            // SAFETY: forwarded contract.
            None => unsafe { heap::large_alloc(layout, true) },
        };
        #[cfg(feature = "profiling")]
        crate::checks::profile::on_alloc(p, layout.size());
        p
    }

    unsafe fn plain_realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_align = block_align(layout.size(), layout.align());
        let small = size_class::is_small(layout.size(), old_align);
        if small {
            hardened::check_live(ptr, layout.size(), old_align);
            // The slot's own class, from its chunk header: the layout's class, unless an earlier
            // realloc shrank the block in place (`size_class::stays`).
            // SAFETY: ptr is a live small block (caller's contract; checked with `hardened`), so
            // its chunk header is mapped, and its class does not change while the block lives.
            let c = unsafe { (*chunk::of(ptr)).class } as usize;
            if size_class::stays(
                c,
                new_size,
                block_align(new_size, layout.align()),
                ptr as usize,
            ) {
                // The block stays in its slot (its chunk counts it), with its new requested size.
                // SAFETY: ptr is a live small block (caller's contract).
                unsafe { heap::resized(ptr, layout.size(), new_size) };
                // The profiler sees the block freed and allocated again at its new size.
                #[cfg(feature = "profiling")]
                {
                    crate::checks::profile::on_free(ptr);
                    crate::checks::profile::on_alloc(ptr, new_size);
                }
                return ptr;
            }
        } else {
            hardened::on_large_free(ptr, true);
        }
        let new_small = size_class::is_small(new_size, block_align(new_size, layout.align()));
        match (small, new_small) {
            (false, false) => {
                // Forgotten before the system frees it (its address may then be handed out again).
                #[cfg(feature = "profiling")]
                crate::checks::profile::on_free(ptr);
                // SAFETY: both sizes are large; forwarded contract.
                let q = unsafe { heap::large_realloc(ptr, layout, new_size) };
                #[cfg(feature = "profiling")]
                crate::checks::profile::on_alloc(q, new_size);
                q
            }
            _ => {
                // SAFETY: the caller guarantees new_size with layout.align() forms a valid layout.
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                // SAFETY: new_layout is valid and non-zero in size (caller).
                let q = unsafe { self.plain_alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks hold at least min(old, new) bytes and are distinct.
                    unsafe {
                        ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.plain_dealloc(ptr, layout);
                    }
                }
                q
            }
        }
    }
}
}

#[cfg(feature = "testing")]
impl PoolAlloc {
    /// An allocation while a `testing` hook is armed: `forbid`, the limit, then `count`.
    #[inline(never)]
    unsafe fn watched_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if !testing::before_alloc(layout) {
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
        testing::after_alloc(p, layout);
        p
    }

    /// A free while a `testing` hook is armed (out of line, so the fast path stays a leaf).
    #[inline(never)]
    unsafe fn watched_dealloc(&self, ptr: *mut u8, layout: Layout) {
        testing::before_free(ptr, layout);
        // SAFETY: forwarded contract.
        unsafe { self.plain_dealloc(ptr, layout) }
    }
}

/// The usable size of a block allocated with `layout`: its slot size, or the request for large blocks.
#[inline]
pub fn usable_size(layout: Layout) -> usize {
    if_pools! {
        let l = block_layout(layout);
        if let Some(c) = class_of(l.size(), l.align()) {
            return size_class::size_of(c);
        }
    }
    layout.size()
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
