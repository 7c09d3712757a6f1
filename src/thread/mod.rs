//! The thread model: per-thread heaps (`heap`), the fork hooks that know every lock (`fork`), and
//! `Heap`, a heap of its own (`own_heap`).

if_pools! {
    pub(crate) mod fork;
    pub(crate) mod heap;
}
pub(crate) mod own_heap;
