//! `FailingAlloc`: an allocator that fails the allocations a schedule names.

use crate::PoolAlloc;
use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// An [`Allocator`] that wraps another (by default [`PoolAlloc`]) and fails the allocations a
/// schedule names, so the out-of-memory paths of code written against `Allocator` can be tested,
/// or driven by a fuzzer's input.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use poolalloc::testing::FailingAlloc;
///
/// let a = FailingAlloc::new(poolalloc::PoolAlloc::new()).fail_after(1);
/// let mut v: Vec<u8, _> = Vec::new_in(&a);
/// assert!(v.try_reserve(10).is_ok()); // allocation 0
/// assert!(v.try_reserve(100).is_err()); // allocation 1 (a grow) fails
/// assert_eq!((a.allocations(), a.failures()), (2, 1));
/// ```
///
/// - Allocation `i` (counting from 0, over every `allocate`, `allocate_zeroed`, `grow` and
///   `grow_zeroed` call, failed ones included) fails when the schedule names it: `fail_after(n)`
///   names every `i >= n`; `fail_pattern(bytes)` names `i` when bit `i % 8` of byte `i / 8` is
///   set, and nothing past the pattern's end. With both set, an allocation fails when either names
///   it; calling one again replaces its earlier setting. With neither, nothing fails.
/// - A failed `grow` leaves the block as it was (the `Allocator` contract). `deallocate` and
///   `shrink` are passed through and not counted.
/// - `&FailingAlloc` is itself an `Allocator`, so one schedule and one count serve several
///   containers at once; it is `Send + Sync` when the inner allocator is, and its counters are
///   atomic, so containers on several threads share the numbering (in the order the threads reach
///   it).
/// - When the inner allocator fails, the error is passed on and counted in `failures()`: it counts
///   every allocation that returned an error, whoever refused it. An allocation the schedule fails
///   never reaches the inner allocator.
/// - Allocations of size zero are counted and scheduled like any other.
pub struct FailingAlloc<A = PoolAlloc> {
    inner: A,
    /// Allocations from this index on fail (`usize::MAX`: none).
    after: usize,
    /// Bit `i` set: allocation `i` fails.
    pattern: Box<[u8]>,
    attempts: AtomicUsize,
    failures: AtomicUsize,
}

impl<A> FailingAlloc<A> {
    /// Wraps `inner`; nothing fails until a schedule is set.
    pub fn new(inner: A) -> Self {
        FailingAlloc {
            inner,
            after: usize::MAX,
            pattern: Box::new([]),
            attempts: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
        }
    }

    /// Every allocation after the first `n` fails (`fail_after(0)`: all of them).
    pub fn fail_after(mut self, n: usize) -> Self {
        self.after = n;
        self
    }

    /// Allocation `i` fails when bit `i % 8` of `bytes[i / 8]` is set; none past the end. The bytes
    /// are copied, so a fuzz input can be passed as it is.
    pub fn fail_pattern(mut self, bytes: &[u8]) -> Self {
        self.pattern = bytes.into();
        self
    }

    /// Allocation attempts so far, failed ones included.
    pub fn allocations(&self) -> usize {
        self.attempts.load(Relaxed)
    }

    /// Attempts that returned an error so far (refused by the schedule or by the inner allocator).
    pub fn failures(&self) -> usize {
        self.failures.load(Relaxed)
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Numbers the next attempt; true if the schedule fails it.
    fn scheduled_to_fail(&self) -> bool {
        let i = self.attempts.fetch_add(1, Relaxed);
        let by_pattern = self
            .pattern
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0);
        i >= self.after || by_pattern
    }

    /// Runs one attempt: the schedule first, then `inner`; counts the failure.
    fn attempt<T>(&self, inner: impl FnOnce() -> Result<T, AllocError>) -> Result<T, AllocError> {
        let r = if self.scheduled_to_fail() {
            Err(AllocError)
        } else {
            inner()
        };
        if r.is_err() {
            self.failures.fetch_add(1, Relaxed);
        }
        r
    }
}

impl<A> core::fmt::Debug for FailingAlloc<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FailingAlloc")
            .field(
                "fail_after",
                &(self.after != usize::MAX).then_some(self.after),
            )
            .field("pattern_bytes", &self.pattern.len())
            .field("allocations", &self.allocations())
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

// SAFETY: every block comes from `inner` and is given back to it unchanged (deallocate, shrink,
// and grow when the schedule lets it through), so `inner`'s guarantees hold; failing is always
// allowed by the trait, and a failed grow leaves the block untouched.
unsafe impl<A: Allocator> Allocator for FailingAlloc<A> {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.attempt(|| self.inner.allocate(layout))
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.attempt(|| self.inner.allocate_zeroed(layout))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: forwarded contract: ptr came from inner with layout.
        unsafe { self.inner.deallocate(ptr, layout) }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded contract.
        self.attempt(|| unsafe { self.inner.grow(ptr, old, new) })
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded contract.
        self.attempt(|| unsafe { self.inner.grow_zeroed(ptr, old, new) })
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded contract.
        unsafe { self.inner.shrink(ptr, old, new) }
    }
}
