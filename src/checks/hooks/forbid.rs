//! `forbid`: a scope in which the calling thread must not allocate through `PoolAlloc`.

use crate::base::fatal::fatal;
use core::alloc::Layout;
use core::cell::Cell;

thread_local! {
    /// How many `forbid` scopes the thread is inside. Const-initialised, no destructor.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`; an allocation (or reallocation) through [`PoolAlloc`](crate::PoolAlloc) by the calling
/// thread while `f` runs aborts the process with a message naming the layout, such as
/// `poolalloc: allocation of 24 bytes (align 8) inside testing::forbid`. Use it to prove that a
/// hot path or a real-time callback does not allocate:
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// let mut buf = Vec::with_capacity(64);
/// poolalloc::testing::forbid(|| {
///     for i in 0..64 {
///         buf.push(i); // within capacity: no allocation
///     }
/// });
/// ```
///
/// - Frees are allowed (dropping a value is not an allocation), and so are allocations by other
///   threads, and allocations that do not go through `PoolAlloc`.
/// - Nesting: `forbid` inside `forbid` is the same as one; `count` inside `forbid` works (counting
///   allocates nothing), and `forbid` inside `count` aborts on the first allocation as it would
///   alone. Several threads can each be inside their own `forbid`.
/// - A panic inside `f` is let through: while the thread is panicking (the panic machinery
///   allocates its message and payload) allocations do not abort, so a failing `assert!` inside
///   `forbid` reports as usual. When `f` returns or unwinds, the scope ends.
///
/// Needs the `testing` feature.
pub fn forbid<R>(f: impl FnOnce() -> R) -> R {
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get() - 1));
            super::armed::disarm();
        }
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    super::armed::arm();
    let _scope = Scope;
    f()
}

/// Aborts if the calling thread is inside `forbid` (and not panicking). `new_size` is `Some` for a
/// reallocation of a block of `layout` to that size.
#[inline]
pub fn check(layout: Layout, new_size: Option<usize>) {
    if DEPTH.with(|d| d.get()) == 0 || std::thread::panicking() {
        return;
    }
    match new_size {
        None => fatal(format_args!(
            "allocation of {} bytes (align {}) inside testing::forbid",
            layout.size(),
            layout.align()
        )),
        Some(n) => fatal(format_args!(
            "reallocation of {} bytes to {} bytes (align {}) inside testing::forbid",
            layout.size(),
            n,
            layout.align()
        )),
    }
}
