//! `gcc`: `gcc -O2 -c` on mimalloc's single-file builds (`static.c`) from the cargo registry's
//! `libmimalloc-sys` sources, one file after the other; the objects must be byte-identical under
//! every allocator.

use super::process::{run, with_alloc};
use super::{Alloc, Outcome, Setup};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run: every unit of `s.gcc_units` compiled, times summed, the largest peak RSS; the output
/// is every object, named.
pub fn measure(what: &str, a: &Alloc, s: &Setup, scratch: &Path) -> Outcome {
    let mut secs = 0.0;
    let mut cpu = 0.0;
    let mut rss = 0;
    let mut output = Vec::new();
    for (k, (include, unit)) in s.gcc_units.iter().enumerate() {
        let obj = scratch.join(format!("unit{k}.o"));
        let mut cmd = Command::new("gcc");
        cmd.args(["-O2", "-w", "-c", "-I"])
            .arg(include)
            .arg(unit)
            .arg("-o")
            .arg(&obj)
            // mimalloc's sources print __DATE__ and __TIME__: fixed by this variable,
            // so that objects can be compared byte for byte.
            .env("SOURCE_DATE_EPOCH", "0")
            .env("TMPDIR", scratch);
        with_alloc(&mut cmd, a);
        let f = run(what, &mut cmd, None, scratch);
        secs += f.secs;
        cpu += f.cpu;
        rss = rss.max(f.maxrss);
        let bytes = std::fs::read(&obj)
            .unwrap_or_else(|e| panic!("{what}: no object {}: {e}", obj.display()));
        assert!(!bytes.is_empty(), "{what}: empty object");
        output.extend_from_slice(format!("{}:{}\n", unit.display(), bytes.len()).as_bytes());
        output.extend_from_slice(&bytes);
    }
    Outcome {
        figure: secs,
        cpu,
        rss,
        output,
        tests: Vec::new(),
    }
}

/// The bindings check's command: a small unit in `dir`, so that the driver, cc1 and as all run, as
/// in the measured compiles.
pub fn probe(dir: &Path) -> Command {
    let probe = dir.join("probe.c");
    std::fs::write(&probe, "int twice(int x) { return 2 * x; }\n").unwrap();
    let mut c = Command::new("gcc");
    c.args(["-O2", "-c"])
        .arg(&probe)
        .arg("-o")
        .arg(dir.join("probe.o"));
    c
}

/// mimalloc's single-file builds in the cargo registry (`libmimalloc-sys`, a dependency of the
/// root package's benchmarks): (include directory, static.c) of its newest version, one per
/// mimalloc major version it ships.
pub fn units() -> Vec<(PathBuf, PathBuf)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let mut crates: Vec<PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libmimalloc-sys-"))
        })
        .collect();
    crates.sort_by_key(|p| {
        let n = p.file_name().unwrap().to_str().unwrap().to_string();
        let v: Vec<u64> = n["libmimalloc-sys-".len()..]
            .split(['.', '+', '-'])
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        v
    });
    let newest = crates.last().unwrap_or_else(|| {
        panic!(
            "no libmimalloc-sys sources in {}: run `cargo fetch` in the repository (the root \
             package's dev-dependency mimalloc brings them)",
            home.join("registry/src").display()
        )
    });
    let base = newest.join("c_src/mimalloc");
    let mut units = Vec::new();
    for dir in [base.join("v2"), base.join("v3"), base.clone()] {
        let unit = dir.join("src/static.c");
        if unit.is_file() && dir.join("include").is_dir() {
            units.push((dir.join("include"), unit));
        }
    }
    assert!(
        !units.is_empty(),
        "no src/static.c in {}: this libmimalloc-sys is laid out differently",
        base.display()
    );
    units
}
