//! The public API: `PoolAlloc` (`global`), the size-less interface (`raw`), statistics (`stats`,
//! `stats_format`), the tools for tests (`testing`) and typed pools (`pools`).

pub(crate) mod global;
pub mod pools;
pub(crate) mod stats;
pub(crate) mod stats_format;
pub mod testing;
if_pools! {
    #[cfg(all(test, not(miri)))]
    mod os_faults;
    #[cfg(feature = "raw")]
    pub mod raw;
    // Without the feature the module is private but still built, so the large spans it alone
    // uses stay compiled and checked in every build (instead of a cfg through five modules).
    #[cfg(not(feature = "raw"))]
    #[allow(dead_code)]
    pub(crate) mod raw;
}
