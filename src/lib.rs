//! poolalloc — a size-class multi-pool allocator (skeleton; core lands next).
#![deny(unsafe_op_in_unsafe_fn)]

mod global;
mod stats;

pub use global::PoolAlloc;
pub use stats::{stats, trim, ClassStats, Stats};
