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
//!   128 bytes, a header. A slot's chunk is found by masking its address.
//! - **pool**: the shared, locked set of chunks of one class.
//! - **thread cache**: per thread and class, a stack of free slots; the fast path pops and pushes
//!   here without locks or atomic read-modify-writes, and moves batches to and from the pool.
//! - **remote free**: a free by a thread other than the one that allocated the slot. Here it needs
//!   no special path: the slot joins the freeing thread's cache and returns to its chunk in a batch.
//! - **large block**: a request above 32 KiB or aligned above what a class gives, served by the
//!   system allocator.
//!
//! # A request's path
//!
//! ```text
//! alloc(layout) ─ class_of(size, align) ─┬─ class c ─▶ thread cache[c] ── pop ──▶ slot
//!                                        │                 │ empty
//!                                        │                 ▼
//!                                        │            pool[c] (lock) ── partial chunk: free list, then bump
//!                                        │                 │ none
//!                                        │                 ▼
//!                                        │            chunk source ── purged spare chunk, or mmap a region
//!                                        └─ none ────▶ System (malloc / posix_memalign)
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod blocking_pool;
mod chunk;
mod global;
#[cfg(feature = "hardened")]
mod hardened;
mod large;
mod lock;
mod object_pool;
mod os;
mod pool;
mod size_class;
mod stats;
mod thread_cache;

pub use blocking_pool::{AcquireError, BlockingPool, Pooled, Shutdown};
pub use global::PoolAlloc;
pub use object_pool::{CHUNK_SLOTS, Handle, Iter, IterMut, Pool};
pub use pool::{set_purge_delay_ms, set_retained_chunks};
pub use stats::{ClassStats, Stats, stats, trim};

/// Size of every chunk, in bytes.
pub const CHUNK_SIZE: usize = chunk::CHUNK_SIZE;
/// The largest request (after rounding up to its alignment) served from the pools.
pub const MAX_SMALL: usize = size_class::MAX_SMALL;
/// The slot sizes of the size classes, smallest first.
pub fn class_sizes() -> &'static [usize] {
    &size_class::CLASS_SIZE
}
