//! The report's real input: text files from cargo's registry source cache (the sources of this
//! benchmark's own dependencies, present on every machine that built it, with no network at run
//! time). `examples/profile_markdown.rs` includes this file too, to profile the same documents.

use std::path::PathBuf;

/// Where cargo keeps its registry: `$CARGO_HOME`, else `~/.cargo`.
pub fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("neither CARGO_HOME nor HOME is set")
}

/// The files with extension `ext` in the registry source cache, sorted by path, read until `cap`
/// bytes; files over 256 KiB are skipped (generated files, hundreds of KiB of tables or literals,
/// say little about a heap). The same lockfile gives the same files on every machine. Returns the
/// texts and their total size.
pub fn read_registry(ext: &str, cap: usize) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    let mut dirs = vec![cargo_home().join("registry").join("src")];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == ext) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    let mut total = 0;
    for f in files {
        if total >= cap {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(&f) {
            if text.len() <= 256 * 1024 {
                total += text.len();
                out.push(text);
            }
        }
    }
    (out, total)
}

/// [`read_registry`], asserting that at least half of `cap` was found.
pub fn registry_texts(ext: &str, cap: usize) -> Vec<String> {
    let (out, total) = read_registry(ext, cap);
    assert!(
        total >= cap / 2,
        "found only {total} bytes of .{ext} files under {}: build the benchmark first (its \
         dependencies' sources are the input)",
        cargo_home().display()
    );
    out
}
