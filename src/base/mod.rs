//! The foundations: the size classes, and the allocator's own small services on top of the OS
//! layer: the lock, the block table, settings, text on the stack, the fatal exit. Nothing here
//! knows a chunk or a heap.

#[cfg(all(
    feature = "std",
    any(feature = "hardened", feature = "testing", feature = "profiling")
))]
pub(crate) mod block_table;
#[cfg(all(feature = "std", poolalloc_pools))]
pub(crate) mod class_set;
#[cfg(feature = "std")]
pub(crate) mod code_settings;
#[cfg(feature = "std")]
pub(crate) mod contention;
#[cfg(all(feature = "std", any(feature = "hardened", feature = "testing")))]
pub(crate) mod fatal;
#[cfg(feature = "std")]
pub(crate) mod lock;
#[cfg(feature = "std")]
pub(crate) mod settings;
pub(crate) mod size_class;
#[cfg(feature = "std")]
pub(crate) mod stack_text;
