//! `RegionAlloc`: the public allocator over user-given regions. One lock around the block
//! allocator (`blocks.rs`), the small classes (`slab.rs`) and the counters of [`RegionStats`]; the
//! initial region is laid out inside the lock on first use, so a `static` needs no init call.

use super::blocks::{self, Blocks};
use super::lock::Lock;
use super::memory::Region;
use super::misuse::{self, Misuse};
use super::slab::{self, Slabs};
use super::stats::RegionStats;
use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::{GlobalAlloc, Layout};
use core::fmt;
use core::ptr::{self, NonNull};

/// A const-constructible allocator over memory the program gives it (see the [module](super)
/// docs): small blocks from slabs of size classes, large ones from byte-granular blocks, all in the
/// given regions; out of memory returns null.
pub struct RegionAlloc {
    inner: Lock<Inner>,
}

/// Everything under the lock.
struct Inner {
    /// The region given to `new`, until the first call lays it out.
    pending: Option<Region>,
    blocks: Blocks,
    slabs: Slabs,
    live_blocks: usize,
    requested: usize,
    peak_requested: usize,
    allocated: usize,
    failed: usize,
}

// SAFETY: Inner's pointers all point into the regions it owns; the lock serializes every access,
// from whichever thread or interrupt.
unsafe impl Send for Inner {}

impl RegionAlloc {
    /// An allocator over `region`, laid out on first use. `const`: a `static` global allocator
    /// needs no init call.
    pub const fn new(region: Region) -> RegionAlloc {
        RegionAlloc::with(Some(region))
    }

    /// An allocator with no memory yet: every allocation fails until [`add_region`](Self::add_region).
    pub const fn empty() -> RegionAlloc {
        RegionAlloc::with(None)
    }

    const fn with(pending: Option<Region>) -> RegionAlloc {
        RegionAlloc {
            inner: Lock::new(Inner {
                pending,
                blocks: Blocks::new(),
                slabs: Slabs::new(),
                live_blocks: 0,
                requested: 0,
                peak_requested: 0,
                allocated: 0,
                failed: 0,
            }),
        }
    }

    /// Gives the allocator one more region (any time, from any thread). Returns false when the
    /// region is too small to hold a block (6 words), and then nothing was added. Regions need
    /// not be contiguous; a block never spans two.
    pub fn add_region(&self, region: Region) -> bool {
        self.inner.with(|i| {
            i.claim();
            // SAFETY: the Region's constructor made its caller promise that the memory is
            // valid, exclusive to this allocator and overlaps no other region.
            unsafe { i.blocks.add(region) }
        })
    }

    /// The allocator's statistics, exact at this moment. Takes the lock; the cost is one walk of
    /// the largest free list (for `largest_free`).
    pub fn stats(&self) -> RegionStats {
        self.inner.with(|i| {
            i.claim();
            RegionStats {
                regions: i.blocks.regions,
                region_bytes: i.blocks.region_bytes,
                live_blocks: i.live_blocks,
                requested: i.requested,
                peak_requested: i.peak_requested,
                allocated: i.allocated,
                slab_bytes: i.slabs.slab_bytes,
                free: i.blocks.free_bytes,
                largest_free: i.blocks.largest_free(),
                failed: i.failed,
            }
        })
    }

    /// Runs `f` on the state, the lock held (tests).
    #[cfg(test)]
    pub(super) fn check(&self) {
        self.inner.with(|i| i.blocks.check());
    }

    /// Non-empty slabs of class `c` with a free slot (tests).
    #[cfg(test)]
    pub(super) fn partial_slabs(&self, c: usize) -> usize {
        self.inner.with(|i| i.slabs.partial_slabs(c))
    }
}

impl Inner {
    /// Lays out the initial region if it is still pending.
    #[inline(always)]
    fn claim(&mut self) {
        if let Some(r) = self.pending.take() {
            // SAFETY: as in add_region: the Region's constructor carries the promise.
            unsafe { self.blocks.add(r) };
        }
    }

    /// Counts a block of `taken` bytes handed out for a request of `size`.
    #[inline(always)]
    fn count_alloc(&mut self, size: usize, taken: usize) {
        self.live_blocks += 1;
        self.requested += size;
        self.allocated += taken;
        if self.requested > self.peak_requested {
            self.peak_requested = self.requested;
        }
    }

    #[inline]
    fn alloc(&mut self, layout: Layout) -> *mut u8 {
        self.claim();
        let (size, align) = (layout.size(), layout.align());
        let got = match slab::class_of(size, align) {
            Some(c) => self
                .slabs
                .alloc(c, &mut self.blocks)
                .map(|p| (p, slab::slot_size(c))),
            None => self.blocks.alloc(size, align).map(|p| {
                // SAFETY: p was just returned by blocks.alloc.
                (p, unsafe { Blocks::size_of(p) })
            }),
        };
        match got {
            Some((p, taken)) => {
                self.count_alloc(size, taken);
                p
            }
            None => {
                self.failed += 1;
                ptr::null_mut()
            }
        }
    }

    /// `hardened`: the checks on a large block about to be freed or resized.
    #[inline(always)]
    fn check_large(p: *mut u8, layout: Layout) -> Result<(), Misuse> {
        if cfg!(feature = "hardened") {
            // SAFETY: p came from this allocator (the contract being checked), so the word before
            // it is its header; where it did not, the word is at least inside the memory a
            // caller may name (the check is best effort, as the module docs say).
            unsafe {
                if !Blocks::looks_used(p) {
                    return Err(Misuse::DoubleFree);
                }
                let need = blocks::block_size(layout.size()).ok_or(Misuse::SizeMismatch)?;
                if Blocks::size_of(p) < need {
                    return Err(Misuse::SizeMismatch);
                }
            }
        }
        Ok(())
    }

    /// # Safety
    ///
    /// `p` was returned by this allocator for `layout` and is not freed yet.
    #[inline]
    unsafe fn free(&mut self, p: *mut u8, layout: Layout) -> Result<(), Misuse> {
        let taken = match slab::class_of(layout.size(), layout.align()) {
            Some(c) => {
                // SAFETY: caller: a live slot of class c.
                unsafe { self.slabs.free(c, p, &mut self.blocks)? };
                slab::slot_size(c)
            }
            None => {
                Self::check_large(p, layout)?;
                // SAFETY: caller: a live large block.
                unsafe {
                    let taken = Blocks::size_of(p);
                    self.blocks.free(p);
                    taken
                }
            }
        };
        self.live_blocks -= 1;
        self.requested -= layout.size();
        self.allocated -= taken;
        Ok(())
    }

    /// Resizes the block `p` in place if it can: the same slot holds the new size, or the large
    /// block shrinks or takes the free block after it. `Ok(false)`: it must move.
    ///
    /// # Safety
    ///
    /// `p` was returned by this allocator for `layout` and is not freed yet.
    unsafe fn resize_in_place(
        &mut self,
        p: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> Result<bool, Misuse> {
        let align = layout.align();
        let old = slab::class_of(layout.size(), align);
        let new = slab::class_of(new_size, align);
        let done = match (old, new) {
            // The same slot holds it.
            (Some(c), Some(d)) => c == d,
            (None, None) => {
                Self::check_large(p, layout)?;
                // SAFETY: caller: a live large block.
                unsafe {
                    let before = Blocks::size_of(p);
                    let done = self.blocks.resize(p, new_size);
                    self.allocated = self.allocated - before + Blocks::size_of(p);
                    done
                }
            }
            _ => false,
        };
        if done {
            self.requested = self.requested - layout.size() + new_size;
            self.peak_requested = self.peak_requested.max(self.requested);
        }
        Ok(done)
    }
}

// SAFETY: alloc returns null or a block of at least layout.size() bytes aligned to layout.align()
// that no other live block overlaps (blocks.rs and slab.rs hand out disjoint memory of the
// regions); dealloc and realloc take back only what the caller says alloc gave.
unsafe impl GlobalAlloc for RegionAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.inner.with(|i| i.alloc(layout))
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: GlobalAlloc's contract: ptr is a live block of this allocator with layout.
        let r = self.inner.with(|i| unsafe { i.free(ptr, layout) });
        if let Err(m) = r {
            misuse::report(m);
        }
    }

    #[inline]
    /// In place under the lock when it can be; else a new block, the copy outside the lock (an
    /// interrupt is not held off for it), and the old block freed: two more lock acquisitions, but
    /// one copy of the allocation and free paths in the program.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract, which is realloc's.
        match self
            .inner
            .with(|i| unsafe { i.resize_in_place(ptr, layout, new_size) })
        {
            Ok(true) => return ptr,
            Ok(false) => {}
            Err(m) => misuse::report(m),
        }
        // SAFETY: realloc's contract: new_size, rounded up to layout.align(), fits isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: non-zero size (realloc's contract).
        let q = unsafe { self.alloc(new_layout) };
        if !q.is_null() {
            // SAFETY: ptr holds layout.size() bytes and q new_size; they are distinct live
            // blocks; ptr is then freed once, with its layout.
            unsafe {
                ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        q
    }
}

// SAFETY: as for GlobalAlloc; a zero-size request gets a dangling aligned pointer that is never
// given to the regions.
unsafe impl Allocator for RegionAlloc {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = if layout.size() == 0 {
            ptr::without_provenance_mut(layout.align())
        } else {
            self.inner.with(|i| i.alloc(layout))
        };
        let p = NonNull::new(p).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: Allocator's contract: ptr is a block of this allocator with layout.
            unsafe { GlobalAlloc::dealloc(self, ptr.as_ptr(), layout) }
        }
    }
}

impl fmt::Debug for RegionAlloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionAlloc")
            .field("stats", &self.stats())
            .finish()
    }
}
