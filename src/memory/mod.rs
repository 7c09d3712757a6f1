//! Where memory comes from and goes. Address space comes from the arenas (`arena`: large reserved
//! ranges, free runs found through an index); chunks (`source`: regions in 2 MiB units, the
//! huge-page filler; `chunk_lists`: the retained empty and abandoned chunks of each class) and spans (`span`: an arena's run, or above 4 MiB a mapping of its
//! own, per large block; `span_cache`: the freed ones waiting for reuse) are cut from them; large
//! blocks (`large`: the system allocator or spans); purging (`purge`: the one delay policy, the
//! purger thread, `trim`).
//!
//! Every byte a block can live in comes from here. The allocator's own bookkeeping maps from `os`
//! where it lives, never handing out a byte of it: the address map (`chunks::addr_map`, one
//! sparse reservation), the block tables (`base::block_table`), the heap arena
//! (`thread::heap`'s registry, 256 KiB blocks of heap structs, never returned) and `hardened`'s
//! inaccessible space for zero-size blocks.

pub(crate) mod arena;
pub(crate) mod chunk_lists;
pub(crate) mod large;
pub(crate) mod purge;
pub(crate) mod source;
pub(crate) mod span;
pub(crate) mod span_cache;
