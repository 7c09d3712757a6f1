//! `count`: what the calling thread allocated and freed while a closure ran.

use crate::base::block_table::BlockTable;
use core::cell::{Cell, RefCell};
use core::ptr;

/// What the calling thread did through [`PoolAlloc`](crate::PoolAlloc) while a [`count`] ran. Bytes
/// are requested bytes (`Layout::size()`, as [`stats()`](crate::stats()) counts them), not slot sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Successful allocations (`alloc`, `alloc_zeroed`; a null return is not counted).
    pub allocations: usize,
    /// Frees, of any block (also of blocks allocated before the count, or by other threads).
    pub frees: usize,
    /// Successful reallocations (in place or moved); a reallocation is counted here only, not as an
    /// allocation and a free.
    pub reallocations: usize,
    /// Sum of the requested sizes of the allocations (reallocations add nothing here).
    pub bytes_allocated: usize,
    /// The highest sum of requested sizes of live blocks the closure allocated (itself or through
    /// reallocations of them) reached during the count.
    pub peak_live_bytes: usize,
    /// Blocks the closure allocated and did not free: still live, or freed by another thread.
    pub live_blocks: usize,
}

/// One running `count`, on its caller's stack, linked to the enclosing one.
struct Frame {
    counts: Cell<Counts>,
    live_bytes: Cell<usize>,
    /// Sequence number taken when the count started: the frame owns the blocks whose allocation
    /// came later (their entry's `seq` is greater).
    start: u64,
    parent: *const Frame,
}

/// The calling thread's counting state. Const-initialised, no destructor (the allocator may run
/// during thread exit).
struct State {
    /// The innermost running count, or null.
    top: Cell<*const Frame>,
    /// Orders count starts and allocations (see `Frame::start`).
    seq: Cell<u64>,
    /// Blocks allocated while a count runs, until the outermost count ends, by address.
    table: RefCell<BlockTable<Counted>>,
}

/// A block allocated while a count ran.
#[derive(Clone, Copy)]
struct Counted {
    /// Requested bytes.
    size: usize,
    /// Its allocation's sequence number (see `Frame::start`).
    seq: u64,
}

thread_local! {
    static STATE: State = const {
        State { top: Cell::new(ptr::null()), seq: Cell::new(0), table: RefCell::new(BlockTable::new()) }
    };
}

fn next_seq(s: &State) -> u64 {
    let n = s.seq.get() + 1;
    s.seq.set(n);
    n
}

/// Enters the counted block at `addr` in the thread's table (replacing an entry there: a block
/// another thread freed, whose address came back to this thread).
fn remember(s: &State, addr: usize, c: Counted) {
    if let Err(e) = s.table.borrow_mut().insert(addr, c) {
        crate::base::fatal::fatal(format_args!(
            "testing::count could not map {} bytes for its table of live blocks",
            e.bytes
        ));
    }
}

/// Runs `f` and returns its result with what the calling thread allocated, freed and reallocated
/// through [`PoolAlloc`](crate::PoolAlloc) meanwhile:
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// let (v, c) = poolalloc::testing::count(|| {
///     let _scratch = vec![0u8; 100]; // allocated and freed
///     vec![1u32; 10] // kept: 40 bytes
/// });
/// assert_eq!(c.allocations, 2);
/// assert_eq!(c.frees, 1);
/// assert_eq!(c.bytes_allocated, 140);
/// assert_eq!(c.peak_live_bytes, 140);
/// assert_eq!(c.live_blocks, 1); // `v`: drop it, or it leaks from the caller's point of view
/// drop(v);
/// ```
///
/// - `live_blocks` and `peak_live_bytes` concern the blocks `f` allocated: a free inside `f` of a
///   block allocated before counts in `frees` but does not lower them. A reallocation inside `f`
///   of a block allocated before stays the caller's block: it counts in `reallocations` and
///   nowhere else. A reallocation of a block `f` allocated moves its live bytes (and may raise the
///   peak).
/// - A block `f` allocated and another thread freed stays in `live_blocks` (`f` did not free it).
///   One case is miscounted: if another thread then allocates at the same address and this thread
///   frees that new block inside the count, the free is taken for the old block's.
/// - Only the calling thread is watched; threads `f` starts are not. Several threads can count at
///   the same time, each its own activity.
/// - Nested counts: the outer count sees everything the inner one saw. `count` inside `forbid`
///   works (counting allocates nothing).
/// - If `f` panics, the count ends and the panic goes on.
/// - Cost while a count runs: each allocation, free and reallocation of the thread updates every
///   running count of the thread and a hash table of the blocks allocated (mapped from the OS, 48
///   bytes per live counted block, unmapped when the outermost count ends); other threads take the
///   out-of-line path too (a call and a thread-local read) while any count runs.
///
/// Needs the `testing` feature.
pub fn count<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    struct Scope<'a>(&'a Frame);
    impl Drop for Scope<'_> {
        fn drop(&mut self) {
            STATE.with(|s| {
                s.top.set(self.0.parent);
                if self.0.parent.is_null() {
                    s.table.borrow_mut().clear();
                }
            });
            super::armed::disarm();
        }
    }
    let frame = STATE.with(|s| Frame {
        counts: Cell::new(Counts::default()),
        live_bytes: Cell::new(0),
        start: next_seq(s),
        parent: s.top.get(),
    });
    STATE.with(|s| s.top.set(&frame));
    super::armed::arm();
    let scope = Scope(&frame);
    let r = f();
    drop(scope);
    (r, frame.counts.get())
}

/// Calls `each` on every running count of the thread, innermost first.
fn for_each_frame(s: &State, mut each: impl FnMut(&Frame)) {
    let mut f = s.top.get();
    while !f.is_null() {
        // SAFETY: a frame on the list lives on the stack of a `count` call that has not returned
        // (its scope guard unlinks it first), and is only read and written through `Cell`s.
        let fr = unsafe { &*f };
        each(fr);
        f = fr.parent;
    }
}

fn update(fr: &Frame, change: impl FnOnce(&mut Counts)) {
    let mut c = fr.counts.get();
    change(&mut c);
    fr.counts.set(c);
}

/// Adds `d` (wrapping) to the live bytes of a frame and raises its peak.
fn add_live(fr: &Frame, d: usize) {
    let live = fr.live_bytes.get().wrapping_add(d);
    fr.live_bytes.set(live);
    update(fr, |c| c.peak_live_bytes = c.peak_live_bytes.max(live));
}

/// A block of `size` bytes was allocated at `p` by this thread.
pub fn on_alloc(p: *mut u8, size: usize) {
    STATE.with(|s| {
        if s.top.get().is_null() {
            return;
        }
        let seq = next_seq(s);
        for_each_frame(s, |fr| {
            update(fr, |c| {
                c.allocations += 1;
                c.bytes_allocated += size;
                c.live_blocks += 1;
            });
            add_live(fr, size);
        });
        remember(s, p as usize, Counted { size, seq });
    });
}

/// This thread frees the block at `p`.
pub fn on_free(p: *mut u8) {
    STATE.with(|s| {
        if s.top.get().is_null() {
            return;
        }
        let e = s.table.borrow_mut().remove(p as usize);
        for_each_frame(s, |fr| {
            update(fr, |c| c.frees += 1);
            match e {
                Some(e) if fr.start < e.seq => {
                    update(fr, |c| c.live_blocks -= 1);
                    fr.live_bytes.set(fr.live_bytes.get().wrapping_sub(e.size));
                }
                _ => {}
            }
        });
    });
}

/// This thread reallocated the block at `p` (of `old` bytes) to `q` (of `new` bytes).
pub fn on_realloc(p: *mut u8, q: *mut u8, old: usize, new: usize) {
    STATE.with(|s| {
        if s.top.get().is_null() {
            return;
        }
        let e = s.table.borrow_mut().remove(p as usize);
        for_each_frame(s, |fr| {
            update(fr, |c| c.reallocations += 1);
            match e {
                Some(e) if fr.start < e.seq => add_live(fr, new.wrapping_sub(old)),
                _ => {}
            }
        });
        match e {
            Some(e) => remember(
                s,
                q as usize,
                Counted {
                    size: new,
                    seq: e.seq,
                },
            ),
            // The caller's block moved to `q`: an entry there is a block of `f`'s that another
            // thread freed (it stays counted); forget it so freeing the caller's block later does
            // not count as freeing it.
            None => {
                s.table.borrow_mut().remove(q as usize);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PoolAlloc;
    use core::alloc::{GlobalAlloc, Layout};

    fn tracked() -> usize {
        STATE.with(|s| s.table.borrow().len())
    }

    /// The unit tests' global allocator is not `PoolAlloc`: allocate through it directly.
    fn boxed(n: usize) -> *mut u8 {
        // SAFETY: a valid non-zero layout.
        unsafe { PoolAlloc::new().alloc(Layout::from_size_align(n, 8).unwrap()) }
    }

    fn free(p: *mut u8, n: usize) {
        // SAFETY: p came from `boxed(n)` and is freed once.
        unsafe { PoolAlloc::new().dealloc(p, Layout::from_size_align(n, 8).unwrap()) }
    }

    #[test]
    fn the_table_lives_until_the_outermost_count_ends() {
        let (p, outer) = count(|| {
            let (p, inner) = count(|| boxed(40));
            assert_eq!(inner.live_blocks, 1);
            assert_eq!(
                tracked(),
                1,
                "an inner count's end keeps the outer one's blocks"
            );
            p
        });
        assert_eq!((outer.allocations, outer.live_blocks), (1, 1));
        assert_eq!(tracked(), 0, "the outermost count's end forgets its blocks");
        let ((), c) = count(|| free(p, 40));
        assert_eq!((c.frees, c.live_blocks), (1, 0));
    }

    #[test]
    fn allocations_through_system_are_not_counted() {
        let ((), c) = count(|| {
            // SAFETY: a valid non-zero layout; freed at once with it.
            unsafe {
                let l = Layout::from_size_align(64, 8).unwrap();
                std::alloc::System.dealloc(std::alloc::System.alloc(l), l);
            }
        });
        assert_eq!(c, Counts::default());
    }
}
