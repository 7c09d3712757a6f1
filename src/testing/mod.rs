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
//! With the feature on and nothing armed (no limit, no `count` or `forbid` running in any thread),
//! each allocation and free costs one relaxed load and a branch more.

mod failing_alloc;
pub use failing_alloc::FailingAlloc;

#[cfg(feature = "testing")]
mod counts;
#[cfg(feature = "testing")]
mod forbid;
#[cfg(feature = "testing")]
pub(crate) mod hooks;
#[cfg(feature = "testing")]
mod limit;
#[cfg(feature = "testing")]
mod table;

#[cfg(feature = "testing")]
pub use counts::{Counts, count};
#[cfg(feature = "testing")]
pub use forbid::forbid;
#[cfg(feature = "testing")]
pub use limit::set_limit;
