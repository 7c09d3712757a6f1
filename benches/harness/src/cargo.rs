//! Where the benchmarks write, and the `cargo` they run for builds of their own.

use std::ffi::OsString;
use std::path::PathBuf;

/// The target directory: `CARGO_TARGET_DIR`, else three levels above the running bench binary
/// (it lives in `<target>/release/deps/`; four for a musl build, in
/// `<target>/<triple>/release/deps/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors()
                .nth(if cfg!(target_env = "musl") { 4 } else { 3 })
                .map(PathBuf::from)
                .unwrap_or_else(|| "target".into())
        })
}

/// `<target>/poolalloc-report`, where both benchmarks write their reports (`musl/` in it for a
/// build for musl, beside the glibc report).
pub fn report_dir() -> PathBuf {
    let dir = target_dir().join("poolalloc-report");
    if cfg!(target_env = "musl") {
        dir.join("musl")
    } else {
        dir
    }
}

/// `--target <triple>` for a build of our own of the same target as this one, when it is not the
/// host's (a musl build), else nothing.
pub fn target_args() -> Vec<String> {
    if cfg!(target_env = "musl") {
        vec![
            "--target".into(),
            format!("{}-unknown-linux-musl", std::env::consts::ARCH),
        ]
    } else {
        Vec::new()
    }
}

/// The `cargo` that runs this benchmark (`CARGO`), else the one on `PATH`.
pub fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The executable of bench target `name` among the JSON messages of
/// `cargo build --message-format json` (its `compiler-artifact` line).
pub fn bench_executable(messages: &str, name: &str) -> Option<PathBuf> {
    let named = format!("\"name\":\"{name}\"");
    messages
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains(&named))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(PathBuf::from(&l[at..at + end]))
        })
}
