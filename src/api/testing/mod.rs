//! Tools for testing code that allocates, and for fuzzing it with poolalloc.
//!
//! - [`FailingAlloc`]: an `allocator_api2` allocator that wraps another and fails the
//!   allocations a schedule names (after the first `n`, or as the bits of a fuzz input say), so the
//!   error paths of code written against `Allocator` run. Always available.
//! - With the cargo feature `testing` (off by default; without it `PoolAlloc`'s fast path is
//!   unchanged, instruction for instruction), three hooks into [`PoolAlloc`](crate::PoolAlloc):
//!   `set_limit` (a ceiling on the process's live requested bytes: allocations above it fail),
//!   `count` (what the calling thread allocated, freed and leaked while a closure ran) and `forbid`
//!   (abort on any allocation by the calling thread while a closure runs).
//!
//! Nothing here allocates through the global allocator while it watches it: the hooks keep their
//! state in thread-locals, atomics and memory mapped from the OS, and abort messages are written
//! from a buffer on the stack.
//!
//! # Edge cases, all defined
//!
//! | case | what happens |
//! |---|---|
//! | `fail_pattern` longer than the run | only its first bits are used; past its end nothing fails |
//! | `FailingAlloc` over an allocator that fails by itself | the error is passed on and counted in `failures()`; an allocation the schedule fails never reaches it |
//! | `set_limit(Some(0))` | every allocation through `PoolAlloc` fails; frees and shrinks work |
//! | a limit below the bytes already live | allocations fail until frees make room |
//! | `count` inside `count` | the outer one sees everything the inner one saw |
//! | `count` and `forbid` inside each other | `forbid` aborts on an allocation wherever it sits; `count` allocates nothing, so it works inside `forbid` |
//! | `count` or `forbid` on several threads | each watches its own thread only |
//! | a panic inside `count` or `forbid` | the scope ends and the panic goes on; inside `forbid`, the panic's own allocations do not abort |
//! | a limit with several threads | process-wide: every thread's allocations count and are refused |
//!
//! # Cost
//!
//! Without the feature: none (the same instructions; `examples/fastpath.rs` under callgrind). With
//! it and nothing armed (no limit, no `count` or `forbid` running in any thread): one load and a
//! branch more per allocation and per free. Armed: an out-of-line call per allocation, free and
//! reallocation in every thread; with a limit, one atomic read-modify-write on a shared counter;
//! in a counting thread, a hash-table update (see `count`). Measured with callgrind on a 16-byte
//! alloc/free loop: about 4 more instructions per call unarmed, about 55 per allocation and 30 per
//! free with a limit set, about 105 per allocation and per free inside a `count`.

mod failing_alloc;
pub use failing_alloc::FailingAlloc;

// The hooks themselves (`count`, `forbid`, `set_limit` and what `PoolAlloc` calls) live in the
// crate's `hooks` module, below `global` in the layering; this module, above it, is their public
// face beside `FailingAlloc`.

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use crate::checks::hooks::forbid;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
/// Sets (`Some(bytes)`) or removes (`None`) a ceiling on the live requested bytes of the process.
/// While a limit is set, an allocation through [`PoolAlloc`](crate::PoolAlloc) (`alloc`,
/// `alloc_zeroed`, or the growth of a `realloc`) that would take the sum of `Layout::size()` of
/// all live blocks, in all threads, above the limit returns null: `Vec::try_reserve` returns `Err`,
/// and an infallible allocation aborts through Rust's usual out-of-memory message
/// (`memory allocation of N bytes failed`), as on a real out-of-memory. Frees and shrinking
/// reallocations always succeed.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// let mut v: Vec<u8> = Vec::new();
/// let live = poolalloc::stats().requested_bytes + poolalloc::stats().large_bytes;
/// poolalloc::testing::set_limit(Some(live + 1024));
/// let small = v.try_reserve(512);
/// let huge = v.try_reserve(1 << 20);
/// poolalloc::testing::set_limit(None);
/// assert!(small.is_ok());
/// assert!(huge.is_err());
/// ```
///
/// - **Where live bytes come from.** When a limit is set while none was, the live bytes are read
///   from [`stats()`](crate::stats()) (its `requested_bytes + large_bytes`), then kept up to date by
///   each allocation, reallocation and free. The reading is exact when other threads are not
///   allocating or freeing during the call; otherwise it is off by what they did meanwhile.
///   Setting a new limit while one is set keeps the running count.
/// - **The limit is process-wide**: other threads' allocations fail too, including a test
///   harness's. Set a limit in a test of its own (or a process of its own), and remove it before
///   anything that must allocate.
/// - A limit of zero fails every allocation; a limit below the bytes already live fails every
///   allocation until frees bring the live bytes down to where the next request fits.
/// - Only allocations through `PoolAlloc` are counted and refused (as the global allocator or as an
///   `allocator_api2` allocator); `System` and other allocators are untouched.
/// - While a limit is set, every allocation and free makes one atomic read-modify-write on a shared
///   counter (they do not without a limit).
///
/// Needs the `testing` feature.
pub fn set_limit(limit: Option<usize>) {
    crate::checks::hooks::set_limit(limit, || {
        let s = crate::stats();
        s.requested_bytes + s.large_bytes
    });
}
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use crate::checks::hooks::{Counts, count};

/// The allocator's own contention counters, process-wide, since the process started: lock
/// acquisitions and waits, remote-free pushes and their CAS retries, collections of remote frees,
/// adoptions of abandoned chunks. Take one snapshot before and one after the work and subtract
/// ([`Contention::since`]): other threads' events (a test harness's too) count as well.
///
/// Each count is a relaxed atomic add at a site off the fast path (a lock, a remote push, a
/// collection, an adoption); without the `testing` feature the counters are compiled out. They
/// measure contention without the cores to show it in time: `tests/contention.rs` bounds them.
///
/// Needs the `testing` feature.
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub fn contention() -> Contention {
    crate::base::contention::snapshot()
}
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use crate::base::contention::Contention;
