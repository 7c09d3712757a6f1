//! Allocation over memory the program gives: for bare metal (`no_std`, no OS), and anywhere a
//! fixed budget of memory is wanted. This module needs only `core` (and the `spin` crate, or
//! `critical-section` with that feature), so it is in every build, with or without `std`.
//!
//! ```
//! use poolalloc::region::{Region, RegionAlloc};
//!
//! static mut ARENA: [u8; 48 * 1024] = [0; 48 * 1024];
//! // #[global_allocator] on a bare-metal program; no init call: the region is laid out on first use.
//! static A: RegionAlloc = RegionAlloc::new(unsafe { Region::array(&raw mut ARENA) });
//!
//! let mut v = allocator_api2::vec::Vec::new_in(&A);
//! v.extend_from_slice(&[1u32, 2, 3]);
//! assert_eq!(A.stats().live_blocks, 1);
//! drop(v);
//! assert_eq!(A.stats().requested, 0);
//! ```
//!
//! # Words
//!
//! - **region**: a range of memory given to the allocator ([`Region`]); several may be added, and
//!   need not be contiguous.
//! - **block**: a range of a region with a one-word header (its size and two flags), handed out
//!   whole for a large request or as a slab; free blocks sit in segregated lists found through a
//!   two-level bitmap (TLSF), and merge with free neighbours when freed.
//! - **slab**: a block of 512 B or 1 KiB (2 KiB for a few classes with `hardened` on 64-bit
//!   targets) aligned to its size, holding slots of one size class; the slot's slab is its address
//!   masked.
//! - **small request**: at most 128 bytes, aligned to at most 8: a slot of the crate's size
//!   classes (8, 16, ..., 64, 80, 96, 112, 128). Anything else is a block.
//!
//! # Worst-case costs
//!
//! No operation loops over blocks, slabs, slots or regions:
//!
//! | operation | work, at most |
//! |---|---|
//! | small alloc | one table look-up, one pop or carve, one list unlink (slab now full); if the class has no slab, one block allocation |
//! | small free | one push, one list insert (slab was full) or one unlink and one block free (slab now empty) |
//! | large alloc | two bitmap searches (`trailing_zeros`), one unlink, one split (one insert); two inserts with an alignment above two words |
//! | large free | two unlinks (free neighbours), one insert |
//! | realloc | in place when the class is the same, or a large block shrinks or the block after it is free; else alloc, copy (outside the lock), free |
//!
//! `docs/bare-metal.md` gives the instruction counts measured on the host.
//!
//! # Features
//!
//! - `critical-section`: the lock is a critical section, so interrupt handlers may allocate; by
//!   default a spin lock (an interrupt handler that allocates while interrupted code holds it
//!   would spin forever).
//! - `hardened`: a double free, a pointer this allocator did not hand out, or a layout that is not
//!   the block's is reported where a slab header or block header tells (best effort: a foreign
//!   pointer's header is read). With `std` the report is a message and an abort; without `std`, a
//!   `panic!` with the message (after the lock is released).

mod alloc;
mod blocks;
mod lock;
mod memory;
mod misuse;
mod slab;
mod stats;
#[cfg(test)]
mod tests;

pub use alloc::RegionAlloc;
pub use memory::Region;
pub use stats::RegionStats;

/// The largest request (aligned to at most 8) served from a slab; larger ones are blocks.
pub const MAX_SMALL: usize = slab::MAX_SMALL;
/// Every block's payload is aligned to this (two words); the granule of block sizes.
pub const GRANULE: usize = blocks::GRANULE;
