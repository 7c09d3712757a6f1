//! Where memory comes from and goes: chunks (`source`: regions in 2 MiB units, retained empty and
//! abandoned chunks, the purger's work), spans (`span`: a mapping, or a piece of one, per large
//! block; `span_cache`: the freed ones waiting for reuse) and large blocks (`large`: the system allocator or spans).
//!
//! Every byte a block can live in comes from here. The allocator's own bookkeeping maps from `os`
//! where it lives, never handing out a byte of it: the address map (`chunks::addr_map`, one
//! sparse reservation), the block tables (`base::block_table`), the heap arena
//! (`thread::heap`'s registry, 256 KiB blocks of heap structs, never returned) and `hardened`'s
//! inaccessible space for zero-size blocks.

pub(crate) mod arena;
pub(crate) mod large;
pub(crate) mod source;
pub(crate) mod span;
pub(crate) mod span_cache;
