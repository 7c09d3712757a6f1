//! poolalloc — a size-class multi-pool allocator in pure Rust.
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
//! ```
//!
//! # Words
//!
//! Each word below means one thing, here and in the code, the statistics and `docs/`. The path a
//! request takes through them, in one diagram: `docs/how-it-works.md` in the repository; the
//! layer folders, the lock order and the known traps: `DESIGN.md`; the chunk invariants: on
//! the fields of the chunk header (`src/chunks/chunk.rs`).
//!
//! - **size class**: one of 48 slot sizes from 8 B to 64 KiB (`base/size_class.rs` gives the
//!   table and its waste bound). A request is served by the smallest class that fits its size and
//!   alignment; [`class_sizes`] lists them.
//! - **slot**: one block of a size class inside a chunk, handed out whole; a free slot links to
//!   the next free one through its first word. (A typed [`Pool`]'s entries are *slots of the
//!   pool*, [`GROUP_SLOTS`] to a group: always said with the pool. A thread's heap pointer lives in
//!   its *TLS word*; the block tables, the span cache and the profiler's stack table hold
//!   *entries*: none is called a slot.)
//! - **chunk**: [`CHUNK_SIZE`] (256 KiB) aligned to its size, holding the slots of one class and,
//!   in its last 192 bytes, the **chunk header** (`Chunk` in `chunks/chunk.rs`, whose fields
//!   state the invariants). A slot's chunk is found by masking its address. Chunks come in
//!   **chunk regions** of 16 (4 MiB, cut from an arena on 64-bit targets, else mapped from the OS;
//!   one chunk where the OS cannot unmap part of a mapping), which have nothing to do with [`region`] (allocation
//!   over memory the program gives).
//! - **arena** (`memory/arena.rs`): address space reserved from the OS in large **ranges** (64 MiB
//!   to 1 GiB), cut into **runs** of granules for chunk regions and spans, and given runs back
//!   (purged); its free runs are found through lists by length (a bitmap of the non-empty ones),
//!   never a scan. The one way memory for blocks is taken and given back: each piece carries its
//!   **origin** (an arena's run, or a mapping of its own).
//! - **carve**: to link never-used slots of a chunk onto its free list, at most 4 KiB of them at a
//!   time, so untouched memory stays out of RSS. 4 KiB is a fixed byte count, not the **OS page**,
//!   which is 4 KiB to 64 KiB depending on the system and is read at run time.
//! - **heap**: per thread, the chunks the thread owns, in one **bin** per class (the type
//!   `ThreadHeap`, `thread/heap/`): the *current* chunk the fast path pops from, the *avail* list
//!   (chunks with free slots) and the *full* list.
//!   The fast paths take no lock and make no atomic read-modify-write. A [`Heap`] of your own is a
//!   heap no thread names, behind a lock.
//! - **pool**: the slots of one size class, over every chunk and thread ("one pool per size
//!   class"); inside one heap the same is a bin. A typed pool ([`Pool`]) is always written with
//!   its type.
//! - **remote free**: a free by a thread other than the chunk's owner. It joins the freeing
//!   thread's **batch** for the class (one destination chunk per class, no atomic), and the batch
//!   goes onto the chunk's **remote-free list** with one compare-and-swap; the owner **collects**
//!   the whole list with one swap when it needs slots. "Batch" means only this.
//! - **cached slot**: a slot freed by a remote free and not yet collected by its chunk's owner (in
//!   a batch or on a remote-free list). It still counts in its chunk's `used`; statistics call it
//!   `cached_slots` and `cached_bytes` (the table's `cached` column). "Cached" alone means only
//!   this: the freed mappings of their own that wait for reuse are the **span cache**, whose places
//!   are *entries* (a freed arena span waits in its arena, as a dirty run).
//! - **supplied**: slots the slow path puts on a current chunk's free list for the fast path to hand
//!   out; [`Stats::allocations`] counts small blocks as supplied slots.
//! - **abandoned chunk**: a chunk with live slots whose owning thread exited; a heap that needs a
//!   chunk of its class **adopts** it, or the purger gives it back once its slots are freed.
//! - **chunk source**: where chunks come from and go when no heap owns them. Its per-class lists
//!   (`memory/chunk_lists.rs`): **retained** empty chunks (every empty chunk kept for a class,
//!   the first [`retained_chunks`] of them kept past the purge delay) and abandoned chunks. Its
//!   chunk regions (`memory/source.rs`), whose 2 MiB **units** hold the chunks no one holds
//!   (never handed out, or given back: purged, or kept resident inside a huge page), handed out
//!   again fullest unit first.
//! - Three verbs for memory going back, each used one way: to **release** a chunk or span is to
//!   let it go to the layer below, which may keep it waiting for reuse (`chunk_lists::release`,
//!   `span::release`); to **give** memory back is for good, to where it came from (a chunk to its
//!   unit, a run to its arena, a mapping to the OS: `source::give_chunks`, `arena::give`); to
//!   **purge** is to give a range's pages back to the OS but keep it mapped (`madvise` on Linux).
//!   The **purger** (`memory/purge.rs`) is the background thread that gives back retained chunks
//!   and waiting spans after the purge delay, reaps abandoned chunks and trims the system
//!   allocator.
//! - **large block**: a request above 64 KiB or aligned above what a class gives, served by a
//!   **span**: whole granules of an arena's run or of a mapping of its own, a header then the block (by `raw`, feature
//!   `raw`: the size-less interface behind the C library `poolalloc-c`, which replaces `malloc`
//!   itself; by `PoolAlloc` on x86-64 Linux and musl), or by the system allocator (by
//!   `PoolAlloc` elsewhere; [`LargeBlocks`] chooses).
//! - **granule**: a [`CHUNK_SIZE`]-aligned 256 KiB piece of the address space.
//! - **address map** (`chunks/addr_map.rs`): one byte per granule saying whether it is one of our
//!   chunks, part of one of our spans, or **foreign** (not ours): how a pointer with no size is
//!   recognised. Not to be confused with a **block table** (`base/block_table.rs`): a hash table
//!   from block addresses to small values (`hardened`'s live large blocks, the `testing` counts,
//!   the profiler's records).
//! - **Om**: the C++ scripting engine this project grew from; its `object_pool<T>` and the
//!   `enlarge()` that carves a new group of slots are where the pools and [`Pool`] come from.
//!   **GTA**: the *Grand Theft Auto* engines, whose entity pools keep a generation (a "seed") per
//!   slot of the pool, as [`Handle`] does.
//!
//! # Features
//!
//! - `hardened`: checks that detect misuse (double free, invalid pointer, size mismatch, corrupted
//!   free lists) and abort with a message naming it: the checks that catch the most per cost.
//! - `hardened-full`: every check of `hardened` plus the costly ones (freed small blocks poisoned
//!   and checked when handed out again, freed spans kept read-only while they wait);
//!   `docs/hardening.md` gives each level's catalogue and cost.
//! - `testing`: the hooks of [`testing`] (`set_limit`, `count`, `forbid`).
//! - `profiling`: the sampling heap profiler (`profile`: live and cumulative bytes by call stack,
//!   written as pprof; `POOLALLOC_PROF`). See `docs/profiling.md`.
//! - `std` (default): everything above the OS. Off, the crate is `#![no_std]` and holds only
//!   [`region`] (allocation over memory the program gives, for bare metal; `docs/bare-metal.md`).
//! - `critical-section`: [`region::RegionAlloc`]'s lock is a critical section, so interrupt
//!   handlers may allocate.
//! - `raw`: the size-less interface (`poolalloc::raw`: free, usable size and realloc by address
//!   alone) that the C library `poolalloc-c` exports as `malloc` & co. (a Rust user does not need it).
//!
//! `hardened`, `hardened-full`, `testing` and `profiling` change the allocator of the **whole
//! process**, not only the crate that turns them on, and cargo unifies features across a build: a
//! library that enables one (even as a dev-dependency of a test) enables it for every binary of
//! the build that uses `PoolAlloc`. Turn them on in the binary's own `Cargo.toml`; a library
//! should leave them to its users.
//!
//! # Platforms
//!
//! The pools run on Linux (glibc and musl; x86-64 and AArch64, and the 32-bit i686 and armv7),
//! macOS, FreeBSD (64- and 32-bit), 64-bit Windows and wasm32 (`wasm32-unknown-unknown`,
//! `wasm32-wasip1`, `wasm32-wasip1-threads`: chunks from linear memory, which never shrinks, so
//! freed chunks are reused by any size class instead); every OS service they use sits behind one
//! contract (`src/os/`). On a 32-bit target the same pools serve a 4 GiB address space: the address
//! map covers all of it in 16 KiB, and the size classes and chunks are the same. Everywhere else
//! (32-bit Windows, any OS without a port) the crate still compiles and [`PoolAlloc`]
//! forwards every call to `std::alloc::System`; [`Stats::backend`] says which is live, and `raw`
//! (the C library's interface) does not exist there. Without an OS (bare metal, `no_std`),
//! [`region::RegionAlloc`] serves memory the program gives.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations, missing_docs)]
#![cfg_attr(feature = "std", deny(rustdoc::broken_intra_doc_links))]
// Without `std` the crate is `region` alone: the crate page's glossary and overview still name the
// std parts (`PoolAlloc`, `Pool`, `Heap`, ...), whose links then render as plain names, so that
// the bare-metal build's docs (`cargo doc --no-default-features`: `RegionAlloc`'s) build.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a port most of the crate is compiled out, and what remains uses only part of the rest.
// Without `std` only `region` (and the size classes it shares) is compiled: most of `size_class`
// goes unused.
#![cfg_attr(
    any(not(poolalloc_pools), not(feature = "std")),
    allow(dead_code, unused_imports)
)]

// The layers, each a folder using only those above it (`.ci/layers.py` checks it), in their
// order (a blank line between two keeps rustfmt from sorting them).
// The OS.
#[cfg(feature = "std")]
mod os;

// The foundations.
mod base;

// `region` (the one module of a build without `std`, besides `size_class`).
pub mod region;

// The chunks (where the pools have an OS port: `cfg(poolalloc_pools)`, set by build.rs).
#[cfg(all(feature = "std", poolalloc_pools))]
mod chunks;

// The optional checks, hooks and profiler of the data path.
#[cfg(feature = "std")]
mod checks;

// Where memory comes from.
#[cfg(all(feature = "std", poolalloc_pools))]
mod memory;

// The thread model.
#[cfg(feature = "std")]
mod thread;

// The public API.
#[cfg(feature = "std")]
mod api;

/// The atomics of the model-checked modules (`remote_list`): `core`'s here; loom's in
/// `tests/loom_remote.rs`, which includes those files with its own `sync`.
#[allow(unused_imports)]
mod sync {
    pub(crate) use core::sync::atomic;
}

#[cfg(feature = "std")]
pub use api::pools;
#[cfg(all(feature = "std", poolalloc_pools, feature = "raw"))]
#[cfg_attr(docsrs, doc(cfg(feature = "raw")))]
pub use api::raw;
#[cfg(feature = "std")]
pub use api::testing;
#[cfg(feature = "profiling")]
pub use checks::profile;

#[cfg(feature = "std")]
pub use api::global::PoolAlloc;
#[cfg(feature = "std")]
pub use api::pools::{AcquireError, BlockingPool, Pooled, Shutdown};
#[cfg(feature = "std")]
pub use api::pools::{GROUP_SLOTS, Handle, Iter, IterMut, Pool};
#[cfg(feature = "std")]
pub use api::stats::{ClassStats, Stats, stats, trim};
#[cfg(feature = "std")]
pub use api::thread_counters::{
    ThreadCounters, thread_allocated, thread_counters, thread_deallocated,
};
#[cfg(feature = "std")]
pub use base::code_settings::Settings;
#[cfg(feature = "std")]
pub use base::settings::{HugePages, huge_pages, set_huge_pages};
#[cfg(feature = "std")]
pub use base::settings::{LargeBlocks, large_blocks, set_large_blocks};
#[cfg(feature = "std")]
pub use base::settings::{purge_delay, retained_chunks, set_purge_delay, set_retained_chunks};
#[cfg(feature = "std")]
pub use os::Backend;
#[cfg(feature = "std")]
pub use thread::own_heap::{Heap, HeapStats};

/// The examples of the README and of `docs/`, run as doc tests (some need the `testing` feature,
/// so all run with it).
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../docs/testing.md")]
struct TestingDocExamples;
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../docs/typed-pools.md")]
struct TypedPoolsDocExamples;
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../docs/stats-and-settings.md")]
struct StatsDocExamples;
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../docs/heaps.md")]
struct HeapsDocExamples;

/// Size of every chunk, in bytes.
#[cfg(all(feature = "std", poolalloc_pools))]
pub const CHUNK_SIZE: usize = chunks::chunk::CHUNK_SIZE;
/// Size of every chunk, in bytes (where the pools run).
#[cfg(all(feature = "std", not(poolalloc_pools)))]
pub const CHUNK_SIZE: usize = 256 * 1024;
/// The largest request (after rounding up to its alignment) served from the pools.
pub const MAX_SMALL: usize = base::size_class::MAX_SMALL;
/// The slot sizes of the size classes, smallest first.
pub fn class_sizes() -> &'static [usize] {
    &base::size_class::CLASS_SIZE
}
