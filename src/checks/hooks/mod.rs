//! The `testing` feature's hooks (their public face is `poolalloc::testing`): what `PoolAlloc`
//! calls, through the facade in `checks/mod.rs`, when the feature is on: one relaxed load on each allocation and free while nothing is
//! armed; with a limit set, or a `count` or `forbid` running in any thread, the calls below. The
//! state of each tool is a file of its own: `limit`, `counts` (with its table of counted blocks, an `block_table`), `forbid`,
//! and `armed`, the count of tools at work that the load reads.

mod armed;
mod counts;
mod forbid;
mod limit;

pub use armed::armed;
use core::alloc::Layout;
pub use counts::{Counts, count};
pub use forbid::forbid;
pub(crate) use limit::set_limit;

/// Before an allocation of `layout`: aborts inside `forbid`; false when the limit refuses it.
#[inline]
pub fn before_alloc(layout: Layout) -> bool {
    forbid::check(layout, None);
    limit::reserve(layout.size())
}

/// After an allocation of `layout` that returned `p` (null when it failed).
#[inline]
pub fn after_alloc(p: *mut u8, layout: Layout) {
    if p.is_null() {
        limit::release(layout.size());
    } else {
        counts::on_alloc(p, layout.size());
    }
}

/// Before the free of `p`, a block of `layout`.
#[inline]
pub fn before_free(p: *mut u8, layout: Layout) {
    limit::release(layout.size());
    counts::on_free(p);
}

/// Before a reallocation of `p` (a block of `layout`) to `new_size`: aborts inside `forbid`; false
/// when the limit refuses the growth.
#[inline]
pub fn before_realloc(layout: Layout, new_size: usize) -> bool {
    forbid::check(layout, Some(new_size));
    new_size <= layout.size() || limit::reserve(new_size - layout.size())
}

/// After a reallocation of `p` to `new_size` that returned `q` (null when it failed: `p` is intact).
#[inline]
pub fn after_realloc(p: *mut u8, layout: Layout, new_size: usize, q: *mut u8) {
    let old = layout.size();
    if q.is_null() {
        if new_size > old {
            limit::release(new_size - old);
        }
    } else {
        if new_size < old {
            limit::release(old - new_size);
        }
        counts::on_realloc(p, q, old, new_size);
    }
}
