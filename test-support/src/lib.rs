//! What poolalloc's tests, fuzz targets and examples share (a member of the workspace, not
//! published):
//!
//! - [`child`]: the test binary re-run as a child process for one case (death tests, cases that
//!   change the whole process), one environment variable for all of them;
//! - [`shadow`]: the shadow model of a `GlobalAlloc` (alloc / alloc_zeroed / realloc / dealloc
//!   decoded from bytes, on one thread or spread over threads), [`pool`]: of `poolalloc::Pool`,
//!   [`collections`]: of hashbrown and allocator-api2 collections on a `FailingAlloc`;
//! - [`seed`]: their seeded inputs, and `replay(dir, run)` of the inputs the fuzz targets saved
//!   (fuzz/regressions/<target>/), which fails when the folder is missing or empty;
//! - [`rss`]: the process's RSS, and whether it says anything of the allocator here;
//! - [`pprof`]: a minimal reader of the profiler's pprof files.
//!
//! It does not depend on poolalloc: a test binary links poolalloc itself, with the features it
//! is built with, and a second path to it would be a second copy with types of its own. The
//! models take the allocator as a `GlobalAlloc`, or through the traits of [`pool`] and
//! [`collections`], which `pool_under_test!` and `failing_pool_alloc!` implement for poolalloc's
//! types in the crate that expands them.

pub mod child;
pub mod collections;
pub mod pool;
pub mod pprof;
pub mod rss;
pub mod seed;
pub mod shadow;
