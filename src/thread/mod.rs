//! The thread model: per-thread heaps (`heap`), the fork hooks that know every lock (`fork`), and
//! `Heap`, a heap of its own (`own_heap`).

#[cfg(poolalloc_pools)]
pub(crate) mod fork;
#[cfg(poolalloc_pools)]
pub(crate) mod heap;
pub(crate) mod own_heap;
