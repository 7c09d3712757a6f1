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
pub use crate::hooks::forbid;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use crate::hooks::set_limit;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use crate::hooks::{Counts, count};
