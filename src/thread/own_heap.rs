//! [`Heap`]: a heap of its own on the process's size-class pools, for memory a program wants to
//! account for apart and drop at once (a request's, a tenant's, a game level's).
//!
//! A `Heap` owns chunks as a thread's heap does, but no thread names it as its own: every
//! allocation and free goes through its lock (taken before any of the pools' locks; DESIGN.md,
//! "Locks and their order"), so it is `Send` and `Sync` and any thread may use it.
//! Small blocks are slots of its chunks, freed one by one into them; large blocks (above 64 KiB,
//! or aligned beyond a class) come from where `PoolAlloc`'s do ([`crate::LargeBlocks`]) with a
//! header that links them into the heap's list. Dropping the heap gives every chunk back to the
//! pools at once, without visiting its slots, and frees the large blocks on its list.
//!
//! Dropping with blocks still allocated is safe: the [`Allocator`] methods take `&Heap`, so a
//! `Vec<T, &Heap>` or `Box<T, &Heap>` (and a `&mut T` from [`Box::leak`](allocator_api2::boxed::Box::leak))
//! borrows the heap and cannot outlive it; the borrow checker proves every block dead before the
//! drop, so the drop frees them all (mimalloc's `mi_heap_destroy`, without its dangling pointers).
//! Their destructors do not run: leaking into a heap and dropping it is for data whose drop does
//! nothing but free memory.
//!
//! [`Heap::enter`] routes the calling thread's global allocations (`PoolAlloc`'s small blocks)
//! into the heap for the length of a closure, so the memory a request or a tenant allocates
//! through code that knows nothing of the heap is accounted to it ([`HeapStats::entered_bytes`]).
//! Those blocks come from a second pools heap of the `Heap`'s, apart from its `Allocator`
//! blocks: they may be freed anywhere, on any thread, after the scope, and may outlive the `Heap`
//! (safe code can keep a `String` made in the scope), so dropping the heap does not free them:
//! its scope chunks are retired as a thread's are at exit (empty ones given back, the others
//! abandoned and adopted by other heaps; mimalloc's `mi_heap_delete`), while its `Allocator`
//! blocks go at once as before (`mi_heap_destroy`).
//!
//! What a `Heap` does not do: route large blocks (above 64 KiB) of a scope (they are `PoolAlloc`'s
//! as always, not counted); show its blocks to the `testing` hooks or the profiler; survive a
//! `fork` while another thread holds its lock (the child finds it locked).

use crate::base::lock::{Lock, Rank};
use crate::checks;
use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::Layout;
use core::ptr::{self, NonNull};

/// A heap of its own on the process's size-class pools: an [`Allocator`] (allocator-api2) whose
/// blocks are freed one by one as usual, or all at once when it is dropped, with its own
/// statistics ([`Heap::stats`]) and an optional limit ([`Heap::with_limit`]).
///
/// ```
/// use allocator_api2::{boxed::Box, vec::Vec};
/// let heap = poolalloc::Heap::new();
/// let mut v: Vec<u64, &poolalloc::Heap> = Vec::new_in(&heap);
/// v.extend(0..1000);
/// // Many small objects, never freed one by one: they go when the heap does.
/// for i in 0..10_000u32 {
///     let node: &mut [u32; 4] = Box::leak(Box::new_in([i; 4], &heap));
///     node[0] += 1;
/// }
/// assert!(heap.stats().live_bytes >= 10_000 * 16);
/// drop(v);
/// drop(heap); // the 10 000 nodes' chunks go back to the pools at once
/// ```
pub struct Heap {
    inner: Lock<Inner>,
    limit: usize,
    /// `Inner::scoped` once made, readable without the lock: a thread inside [`Heap::enter`] finds
    /// its own scope by it (its slot names this pools heap).
    routed: core::sync::atomic::AtomicPtr<PoolsHeap>,
}

struct Inner {
    /// The pools' heap whose chunks this one owns (null until the first small block).
    pools: *mut PoolsHeap,
    /// The pools' heap that [`Heap::enter`] routes global allocations to (null until the first
    /// scope).
    scoped: *mut PoolsHeap,
    /// Large blocks (every block where the pools have no port), newest first.
    tracked: *mut Tracked,
    /// This heap's number in its tracked blocks' `check` (0 until the first).
    id: usize,
    stats: HeapStats,
}

// SAFETY: the raw pointers name memory only this heap refers to (its pools heap, its large
// blocks); every access is under the lock.
unsafe impl Send for Heap {}
// SAFETY: as above: `&Heap` reaches the pointers only through the lock.
unsafe impl Sync for Heap {}

/// A [`Heap`]'s own counts, exact (every allocation and free of the heap is counted under its
/// lock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapStats {
    /// Blocks allocated and not freed.
    pub live_blocks: usize,
    /// Bytes asked for by those blocks.
    pub live_bytes: usize,
    /// The most `live_bytes` ever were.
    pub peak_bytes: usize,
    /// Blocks allocated since the heap was made.
    pub allocations: usize,
    /// Allocations refused because they would have passed the limit.
    pub refused: usize,
    /// Bytes asked for by the live small blocks that global allocations made inside
    /// [`Heap::enter`] (freed ones leave as they are freed, on any thread); `live_bytes +
    /// entered_bytes` is what the heap accounts for. Exact at quiet points.
    pub entered_bytes: usize,
}

impl Default for Heap {
    fn default() -> Self {
        Heap::new()
    }
}

impl core::fmt::Debug for Heap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Heap")
            .field("limit", &self.limit)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Heap {
    /// An empty heap with no limit. Maps nothing until its first block.
    pub const fn new() -> Heap {
        Heap::with_limit(usize::MAX)
    }

    /// An empty heap whose live blocks may ask for `limit` bytes in all: an allocation past it
    /// fails ([`AllocError`]; `Vec` and `Box` then call the allocation error handler, the `try_`
    /// methods return the error), as [`crate::api::testing::FailingAlloc`] fails.
    pub const fn with_limit(limit: usize) -> Heap {
        Heap {
            inner: Lock::new(
                Rank::Heap,
                Inner {
                    pools: ptr::null_mut(),
                    scoped: ptr::null_mut(),
                    tracked: ptr::null_mut(),
                    id: 0,
                    stats: HeapStats {
                        live_blocks: 0,
                        live_bytes: 0,
                        peak_bytes: 0,
                        allocations: 0,
                        refused: 0,
                        entered_bytes: 0,
                    },
                },
            ),
            limit,
            routed: core::sync::atomic::AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// This heap's counts now. From another thread while one is inside [`Heap::enter`], this waits
    /// for the scope to end.
    pub fn stats(&self) -> HeapStats {
        self.with_inner(|inner| {
            let mut s = inner.stats;
            s.entered_bytes = inner.entered_bytes();
            s
        })
    }

    /// Runs `f` with `inner`: under the lock, or, on a thread inside [`Heap::enter`] on this heap
    /// (which holds the lock for the scope), directly.
    fn with_inner<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        if self.entered_here() {
            // SAFETY: this thread is inside `enter` on this heap, which took the lock for the
            // scope and holds no reference to the data while the scope's closure runs: nothing
            // else touches it until `enter` returns.
            return f(unsafe { &mut *self.inner.as_mut_ptr() });
        }
        f(&mut self.inner.lock())
    }

    /// The limit given to [`Heap::with_limit`] (`usize::MAX`: none).
    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// The header before a tracked block: its links in the heap's list and what to free it with.
#[repr(C)]
struct Tracked {
    prev: *mut Tracked,
    next: *mut Tracked,
    /// The layout the whole allocation (header included) was made with.
    size: usize,
    align: usize,
    /// `TRACKED ^ id ^ address of this header`: a block of this heap (`hardened` checks it).
    check: usize,
}

const TRACKED: usize = 0x7ac4_ed00_b10c_u64 as usize;

/// A number for each heap that tracks blocks, so a block freed to another heap is told apart.
static NEXT_ID: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(1);

/// Bytes before a tracked block of alignment `align`: room for the header, keeping the alignment.
fn header_room(align: usize) -> usize {
    align.max(size_of::<Tracked>().next_power_of_two())
}

/// The layout of a tracked block's whole allocation, or None when it would overflow.
fn tracked_layout(layout: Layout) -> Option<(Layout, usize)> {
    let room = header_room(layout.align());
    let size = layout.size().checked_add(room)?;
    let align = layout.align().max(align_of::<Tracked>());
    Some((Layout::from_size_align(size, align).ok()?, room))
}

/// Frees the whole allocation of the tracked block whose header is `t`: it starts
/// `header_room(align)` bytes before the block, which starts right after the header
/// (`header_room` of the allocation's alignment equals that of the block's: both are at most 32
/// or equal).
///
/// The block's size counts as deallocated in the calling thread's counters when `counted` (a
/// free, not the heap's drop, which frees no block of the program's).
///
/// # Safety
/// `t` is the header of a live tracked block, taken off its list, not used afterwards.
unsafe fn dealloc_whole(t: *mut Tracked, counted: bool) {
    // SAFETY: forwarded; size and align are the allocation's own layout, which was valid.
    unsafe {
        let whole = Layout::from_size_align_unchecked((*t).size, (*t).align);
        let block = t.cast::<u8>().add(size_of::<Tracked>());
        let room = header_room(whole.align());
        let size = if counted { whole.size() - room } else { 0 };
        backing_dealloc(block.sub(room), whole, size);
    }
}

impl Inner {
    /// Allocates a tracked block (null when out of memory).
    fn alloc_tracked(&mut self, layout: Layout) -> *mut u8 {
        let Some((whole, room)) = tracked_layout(layout) else {
            return ptr::null_mut();
        };
        if self.id == 0 {
            self.id = NEXT_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: `whole` has a non-zero size (room > 0).
        let base = unsafe { backing_alloc(whole, layout.size()) };
        if base.is_null() {
            return base;
        }
        // SAFETY: base holds `whole` (room + the block); the header fits in the `room` bytes
        // before the block, at `room - size_of::<Tracked>()`, aligned (room and base are
        // multiples of Tracked's alignment).
        unsafe {
            let p = base.add(room);
            let t = p.sub(size_of::<Tracked>()).cast::<Tracked>();
            t.write(Tracked {
                prev: ptr::null_mut(),
                next: self.tracked,
                size: whole.size(),
                align: whole.align(),
                check: TRACKED ^ self.id ^ t as usize,
            });
            if !self.tracked.is_null() {
                (*self.tracked).prev = t;
            }
            self.tracked = t;
            p
        }
    }

    /// Frees the tracked block `p`.
    ///
    /// # Safety
    /// `p` is a live block from [`Inner::alloc_tracked`] of this heap.
    unsafe fn free_tracked(&mut self, p: *mut u8) {
        // Wrapping: under `hardened` p may be any pointer until its header is checked.
        let t = p.wrapping_sub(size_of::<Tracked>()).cast::<Tracked>();
        // With `hardened`: the header's check word, where a header of p would be (none for a
        // misaligned p), says this heap made it.
        let check = if p as usize % align_of::<Tracked>() == 0 {
            t.cast::<u8>()
                .wrapping_add(core::mem::offset_of!(Tracked, check))
        } else {
            ptr::null_mut()
        };
        checks::on_tracked_free(p, check, TRACKED ^ self.id ^ t as usize);
        // SAFETY: p's header lies just before it (alloc_tracked), linked in our list (checked
        // first with `hardened`).
        unsafe {
            let (prev, next) = ((*t).prev, (*t).next);
            if prev.is_null() {
                self.tracked = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            dealloc_whole(t, true);
        }
    }

    /// Frees every tracked block.
    fn free_all_tracked(&mut self) {
        let mut t = self.tracked;
        while !t.is_null() {
            // SAFETY: t is a live header of our list, read before its allocation is freed.
            unsafe {
                let next = (*t).next;
                dealloc_whole(t, false);
                t = next;
            }
        }
        self.tracked = ptr::null_mut();
    }

    fn count_alloc(&mut self, size: usize) {
        let s = &mut self.stats;
        s.live_blocks += 1;
        s.live_bytes += size;
        s.allocations += 1;
        s.peak_bytes = s.peak_bytes.max(s.live_bytes);
    }

    fn count_free(&mut self, size: usize) {
        self.stats.live_blocks -= 1;
        self.stats.live_bytes -= size;
    }
}

// SAFETY: blocks are distinct slots or tracked allocations of at least `layout.size()` bytes at
// `layout.align()`, valid until deallocated or until the heap is dropped (which needs every
// borrow of it, and so every block handed out through `&Heap`, to have ended).
unsafe impl Allocator for Heap {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            // A dangling, aligned pointer: nothing to free.
            let p = ptr::without_provenance_mut::<u8>(layout.align());
            // SAFETY: an alignment is never zero.
            let p = unsafe { NonNull::new_unchecked(p) };
            return Ok(NonNull::slice_from_raw_parts(p, 0));
        }
        self.with_inner(|inner| {
            if layout.size() > self.limit - inner.stats.live_bytes.min(self.limit) {
                inner.stats.refused += 1;
                return Err(AllocError);
            }
            let p = inner.alloc(layout);
            let p = NonNull::new(p).ok_or(AllocError)?;
            inner.count_alloc(layout.size());
            Ok(NonNull::slice_from_raw_parts(p, layout.size()))
        })
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        self.with_inner(|inner| {
            // SAFETY: ptr is a live block of this heap of `layout` (the Allocator contract).
            unsafe { inner.free(ptr.as_ptr(), layout) };
            inner.count_free(layout.size());
        })
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        inner.free_all_tracked();
        inner.destroy_pools();
    }
}

// What a `Heap` stands on: the pools' heaps where the pools have a port, the system allocator
// elsewhere (each file holds the same items: `PoolsHeap`, `backing_alloc`, `backing_dealloc`,
// `Heap::enter`, and `Inner`'s small-block methods).
#[cfg(poolalloc_pools)]
mod pools;
#[cfg(poolalloc_pools)]
use pools::{PoolsHeap, backing_alloc, backing_dealloc};
#[cfg(not(poolalloc_pools))]
mod system;
#[cfg(not(poolalloc_pools))]
use system::{PoolsHeap, backing_alloc, backing_dealloc};
