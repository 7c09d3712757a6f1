//! The public API: `PoolAlloc` (`global`), the size-less interface (`raw`), statistics (`stats`,
//! `stats_format`), per-thread counters (`thread_counters`), the tools for tests (`testing`) and typed pools (`pools`).

pub(crate) mod global;
#[cfg(all(poolalloc_pools, test, not(miri)))]
mod os_faults;
pub mod pools;
#[cfg(all(poolalloc_pools, feature = "raw"))]
pub mod raw;
pub(crate) mod stats;
pub(crate) mod stats_format;
pub mod testing;
pub(crate) mod thread_counters;
// Without the feature the module is private but still built, so the large spans it alone
// uses stay compiled and checked in every build (instead of a cfg through five modules).
#[cfg(all(poolalloc_pools, not(feature = "raw")))]
#[allow(dead_code)]
pub(crate) mod raw;
