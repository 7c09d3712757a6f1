//! The harness poolalloc's benchmarks share: `benches/report.rs` (allocators switched inside one
//! Rust binary), `capi/benches/programs.rs` (real programs under `LD_PRELOAD`), `benches/pools.rs`,
//! `benches/heap.rs`, `benches/counting.rs` and `benches/field` (one `median`, one `geomean`).
//! A crate of the workspace, not published: a dev-dependency of poolalloc and poolalloc-c.
//!
//! One concept a file:
//! - [`cargo`]: the target directory, the report folder, the `cargo` to run;
//! - [`rng`]: the one small deterministic random number generator;
//! - [`run`]: rounds interleaved across allocators, with a progress line per run;
//! - [`stats`]: medians, geometric means, MiB;
//! - [`noise`]: a cell's spread over the rounds, a ratio's per-round spread, and when a ratio is
//!   flagged slower or faster (beyond the noise) or called level;
//! - [`table`]: Markdown table rows;
//! - `chart` (feature `chart`): the font, the palette and the bar chart of ratios (plotters).

pub mod cargo;
#[cfg(feature = "chart")]
pub mod chart;
pub mod noise;
pub mod rng;
pub mod run;
pub mod stats;
pub mod table;
