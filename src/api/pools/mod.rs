//! Typed pools on the allocator's own size-class pools (the object-pool patterns this project grew
//! from), each a file of its own:
//!
//! - [`Pool<T>`] with generational [`Handle<T>`]s (`object.rs`): objects in groups of
//!   [`GROUP_SLOTS`] slots that never move, a stale handle never finds a later object.
//! - [`BlockingPool<T>`] (`blocking.rs`): a fixed set of resources shared by threads; `acquire`
//!   waits, in arrival order, and the [`Pooled`] guard gives the resource back.
//!
//! The crate root re-exports all of them. Guide and figures: `docs/typed-pools.md`.

mod blocking;
mod object;

pub use blocking::{AcquireError, BlockingPool, Pooled, Shutdown};
pub use object::{GROUP_SLOTS, Handle, Iter, IterMut, Pool};
