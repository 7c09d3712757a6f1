//! Where memory comes from and goes, a file a job:
//!
//! - `arena`: the one way memory for blocks is taken and given back (`take`, `give`, `extend`,
//!   each piece with its `Origin`); the arenas' ranges and their index of free runs.
//! - `source`: regions of chunks in 2 MiB units, the huge-page filler; chunks taken new and given
//!   back for good.
//! - `chunk_lists`: the chunks no heap owns (retained empty, abandoned) per class.
//! - `span`: large blocks in spans (an arena's run, or above 4 MiB a mapping of its own) and their
//!   resizing; `span_cache`: the released spans waiting for reuse.
//! - `large`: the entry for large blocks (the system allocator or spans).
//! - `purge`: the one delay policy, the purger thread, `trim`.
//!
//! Every byte a block can live in comes from here. The allocator's own bookkeeping maps from `os`
//! where it lives, never handing out a byte of it: the address map (`chunks::addr_map`, one
//! sparse reservation), the block tables (`base::block_table`), the heap store
//! (`thread::heap`'s registry, 256 KiB blocks of heap structs, never returned) and `hardened`'s
//! inaccessible space for zero-size blocks.

pub(crate) mod arena;
pub(crate) mod chunk_lists;
pub(crate) mod large;
pub(crate) mod purge;
pub(crate) mod source;
pub(crate) mod span;
pub(crate) mod span_cache;
