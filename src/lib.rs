//! poolalloc — a size-class multi-pool allocator in pure Rust.
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
//! ```
//!
//! # Words
//!
//! - **size class**: one of 44 slot sizes from 8 B to 32 KiB ([`size_class`](crate) module docs give
//!   the table and its waste bound). A request is served by the smallest class that fits its size
//!   and alignment.
//! - **slot**: one fixed-size block of a class; a free slot links to the next free one through its
//!   first word.
//! - **chunk**: a 256 KiB region aligned to its size, holding slots of one class and, in its last
//!   192 bytes, a header. A slot's chunk is found by masking its address.
//! - **heap**: per thread, one pool per class: the chunks the thread owns. The fast path pops and
//!   pushes a chunk's free lists with no lock and no atomic.
//! - **remote free**: a free by a thread other than the chunk's owner: one atomic push onto the
//!   chunk's remote-free list, which the owner takes whole with one swap when it needs slots.
//! - **abandoned chunk**: a chunk with live blocks whose owning thread exited; another thread of
//!   the class adopts it, or the purger gives it back once its blocks are freed.
//! - **large block**: a request above 32 KiB or aligned above what a class gives, served by the
//!   system allocator (by `PoolAlloc`), or by a mapping of its own, a *span* (by [`raw`], the
//!   size-less interface behind the C library `poolalloc-c`, which replaces `malloc` itself).
//!
//! # A request's path
//!
//! ```text
//! alloc(layout) ─ class_of(size, align) ─┬─ class c ─▶ heap[c].current ── pop free ──▶ slot
//!                                        │                 │ empty
//!                                        │                 ▼
//!                                        │     local frees, remote frees (one swap), carve a page;
//!                                        │     next chunk of the heap; adopt an abandoned chunk;
//!                                        │     chunk source (retained empty, purged spare, mmap)
//!                                        └─ none ────▶ System (malloc / posix_memalign)
//! ```
//!
//! The design, its invariants and its lock order: `DESIGN.md` in the repository.
#![deny(unsafe_op_in_unsafe_fn)]

mod addr_map;
mod blocking_pool;
mod chunk;
mod global;
mod hardened;
mod heap;
mod large;
mod link;
mod lock;
mod object_pool;
mod os;
pub mod raw;
mod size_class;
mod source;
mod span;
mod stats;
pub mod testing;

pub use blocking_pool::{AcquireError, BlockingPool, Pooled, Shutdown};
pub use global::PoolAlloc;
pub use object_pool::{CHUNK_SLOTS, Handle, Iter, IterMut, Pool};
pub use source::{set_purge_delay_ms, set_retained_chunks};
pub use stats::{ClassStats, Stats, stats, trim};

/// The README's examples, run as doc tests (some need the `testing` feature, so all run with it).
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// Size of every chunk, in bytes.
pub const CHUNK_SIZE: usize = chunk::CHUNK_SIZE;
/// The largest request (after rounding up to its alignment) served from the pools.
pub const MAX_SMALL: usize = size_class::MAX_SMALL;
/// The slot sizes of the size classes, smallest first.
pub fn class_sizes() -> &'static [usize] {
    &size_class::CLASS_SIZE
}
