//! Names the OS port that serves the target, once, as cfgs every part of the package sees (the
//! library, its tests, benches and examples):
//!
//! - `poolalloc_port = "unix" | "windows" | "wasm"`: the file of `src/os/` that implements the OS
//!   contract; none where poolalloc has no port (`PoolAlloc` forwards to `System` there).
//! - `poolalloc_pools`: the pools run (there is a port).
//! - `poolalloc_wasm_threads`: wasm32 with shared memory and threads (`wasm32-wasip1-threads`, or
//!   any wasm32 build with the `atomics` target feature). On stable Rust `cfg(target_feature =
//!   "atomics")` is false even there, so the target's name decides too.
//! - `poolalloc_profiled`: the profiler records (feature `profiling` on 64-bit Linux, macOS or
//!   FreeBSD, whose plain `thread_local!` never allocates); elsewhere its data-path calls are the
//!   no-op twins of `checks/mod.rs` and `profile::start` says `Unsupported`.
//! - `poolalloc_asm_goto`: the compiler accepts `asm!` with `label` operands (Rust 1.87 and
//!   later; the crate's minimum is older): on x86-64 the owner's free then decrements its
//!   chunk's count and branches on the result in two instructions (`chunk::free_one`).

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(poolalloc_pools)");
    println!("cargo::rustc-check-cfg=cfg(poolalloc_wasm_threads)");
    println!("cargo::rustc-check-cfg=cfg(poolalloc_profiled)");
    println!("cargo::rustc-check-cfg=cfg(poolalloc_port, values(\"unix\", \"windows\", \"wasm\"))");

    let var = |k: &str| env::var(k).unwrap_or_default();
    let os = var("CARGO_CFG_TARGET_OS");
    let arch = var("CARGO_CFG_TARGET_ARCH");
    let width = var("CARGO_CFG_TARGET_POINTER_WIDTH");
    let features = var("CARGO_CFG_TARGET_FEATURE");
    let target = var("TARGET");

    let port = match () {
        _ if matches!(os.as_str(), "linux" | "macos" | "freebsd")
            && matches!(width.as_str(), "32" | "64") =>
        {
            Some("unix")
        }
        _ if os == "windows" && width == "64" => Some("windows"),
        _ if arch == "wasm32" => Some("wasm"),
        _ => None,
    };
    if let Some(port) = port {
        println!("cargo::rustc-cfg=poolalloc_pools");
        println!("cargo::rustc-cfg=poolalloc_port=\"{port}\"");
    }
    if arch == "wasm32"
        && (target.ends_with("-threads") || features.split(',').any(|f| f == "atomics"))
    {
        println!("cargo::rustc-cfg=poolalloc_wasm_threads");
    }
    println!("cargo::rustc-check-cfg=cfg(poolalloc_asm_goto)");
    if rustc_minor().is_some_and(|m| m >= 87) {
        println!("cargo::rustc-cfg=poolalloc_asm_goto");
    }
    if env::var_os("CARGO_FEATURE_PROFILING").is_some()
        && width == "64"
        && matches!(os.as_str(), "linux" | "macos" | "freebsd")
    {
        println!("cargo::rustc-cfg=poolalloc_profiled");
    }
}

/// The minor version of the compiler cargo builds with (`rustc 1.MINOR.PATCH ...`), if it says.
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    if parts.next()? != "1" {
        return None;
    }
    parts.next()?.parse().ok()
}
