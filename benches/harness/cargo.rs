//! Where the benchmarks write, and the `cargo` they run for builds of their own.

use std::ffi::OsString;
use std::path::PathBuf;

/// The target directory: `CARGO_TARGET_DIR`, else three levels above the running bench binary
/// (it lives in `<target>/release/deps/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors()
                .nth(3)
                .map(PathBuf::from)
                .unwrap_or_else(|| "target".into())
        })
}

/// `<target>/poolalloc-report`, where both benchmarks write their reports.
pub fn report_dir() -> PathBuf {
    target_dir().join("poolalloc-report")
}

/// The `cargo` that runs this benchmark (`CARGO`), else the one on `PATH`.
pub fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}
