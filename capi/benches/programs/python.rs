//! `python` and `python-malloc`: CPython runs a standard-library workload (`inputs/workload.py`),
//! once with its own small-object allocator and once with `PYTHONMALLOC=malloc`; its output must be
//! the same under every allocator.

use super::process::{run, with_alloc};
use super::{Alloc, Outcome, Setup, outcome};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workload: dicts, lists, strings, objects with reference cycles, JSON, big buffers, a
/// producer and a consumer thread; prints digests of what it built.
pub const WORKLOAD: &str = include_str!("../inputs/workload.py");

/// One run of `s.py` (scale 1 in quick mode, else 4); `malloc`: with `PYTHONMALLOC=malloc`.
pub fn measure(what: &str, a: &Alloc, s: &Setup, scratch: &Path, malloc: bool) -> Outcome {
    let mut cmd = Command::new(&s.python);
    cmd.arg(&s.py)
        .arg(if s.quick { "1" } else { "4" })
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONMALLOC");
    if malloc {
        cmd.env("PYTHONMALLOC", "malloc");
    }
    with_alloc(&mut cmd, a);
    outcome(run(what, &mut cmd, None, scratch))
}

/// The bindings check's command: a little JSON.
pub fn probe(s: &Setup, malloc: bool) -> Command {
    let mut c = Command::new(&s.python);
    c.args(["-c", "import json; json.dumps(list(range(1000)))"]);
    if malloc {
        c.env("PYTHONMALLOC", "malloc");
    }
    c
}

/// The real CPython 3 executable (not a version manager's shell-script shim, which the preload
/// would also measure).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("POOLALLOC_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from("/usr/bin/python3");
    assert!(
        p.is_file(),
        "/usr/bin/python3 is missing: install Debian's python3 (apt-get install -y python3), or set \
         POOLALLOC_TEST_PYTHON to a CPython executable"
    );
    p
}
