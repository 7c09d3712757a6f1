//! Builds the C (and C++) code the test links: `c/c_side.c` and `c/cpp_side.cpp` into static
//! libraries of this crate, `c/plugin.c` into a shared library the test loads with `dlopen`
//! (its path in `LINKED_PLUGIN_SO`). Linux only, as the C library is; the C++ part and the plugin
//! only with glibc (a static musl executable has no C++ runtime of ours here and cannot `dlopen`).
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(linked_cpp)");
    println!("cargo::rustc-check-cfg=cfg(linked_plugin)");
    println!("cargo::rerun-if-changed=c");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    cc::Build::new()
        .file("c/c_side.c")
        .warnings(true)
        .compile("c_side");
    if env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return;
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("c/cpp_side.cpp")
        .warnings(true)
        .compile("cpp_side");
    println!("cargo::rustc-cfg=linked_cpp");

    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let so = out.join("libplugin.so");
    let compiler = cc::Build::new().get_compiler();
    let status = Command::new(compiler.path())
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg("c/plugin.c")
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "building c/plugin.c failed");
    println!("cargo::rustc-env=LINKED_PLUGIN_SO={}", so.display());
    println!("cargo::rustc-cfg=linked_plugin");
}
