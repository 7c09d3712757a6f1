//! The harness the two benchmark programs share: `benches/report.rs` (allocators switched inside
//! one Rust binary) and `capi/benches/programs.rs` (real programs under `LD_PRELOAD`). Each
//! includes this folder with `#[path = ".../benches/harness/mod.rs"] mod harness;`.
//!
//! One concept a file:
//! - [`cargo`]: the target directory, the report folder, the `cargo` to run;
//! - [`rng`]: the one small deterministic random number generator;
//! - [`run`]: rounds interleaved across allocators, with a progress line per run;
//! - [`stats`]: medians, geometric means, MiB;
//! - [`table`]: Markdown table rows;
//! - [`chart`]: the font, the palette and the bar chart of ratios (plotters).
//!
//! Not every item serves both benchmarks (the generator's `range` is the report's), so each
//! includes the module with `dead_code` allowed.

pub mod cargo;
pub mod chart;
pub mod rng;
pub mod run;
pub mod stats;
pub mod table;
