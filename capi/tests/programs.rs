//! Real programs under `LD_PRELOAD` of `libpoolalloc_c.so`: python3, gcc, sqlite3, git, and the C/C++ tests
//! of `tests/c/` (every exported function's edge cases, allocation at odd moments of a process's life).
//!
//! The library: `POOLALLOC_TEST_C_SO` if set, else built here with
//! `$CARGO build --release -p poolalloc-c --target-dir <workspace>/target/capi-test` (a target dir of its own:
//! the outer `cargo test` holds the lock of the usual one). `POOLALLOC_TEST_C_SO=glibc` runs every program
//! without an allocator preloaded, and a peer's path (`/usr/lib/x86_64-linux-gnu/libjemalloc.so.2`,
//! `.../libmimalloc.so.2`) runs them under that allocator: that is how the tests themselves are checked.
//!
//! Each test compares a program's output with the same program's output without the preload (and, where
//! it can, with figures computed here), and checks that the preload was in effect in every process the
//! program started: a small witness library (`tests/c/witness.c`), preloaded after the allocator, logs
//! which library `malloc`, `free`, `calloc` and `realloc` resolve to in each process.
//!
//! Needs gcc, g++, python3, sqlite3 and git: `bash .ci/deps` installs what is missing. Everything built or
//! written goes under `<workspace>/target/capi-test/`.
//!
//! Linux only, as the library is: on other targets this file compiles to no test.
#![cfg(target_os = "linux")]

use std::env;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The allocator the programs run under.
struct Setup {
    /// The library to preload, `None` for glibc (no preload).
    so: Option<PathBuf>,
    /// The witness library (`tests/c/witness.c`), built with gcc.
    witness: PathBuf,
    /// `<workspace>/target/capi-test`.
    root: PathBuf,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("capi/ has a parent")
        .to_path_buf()
}

fn inputs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Fails the test naming what to install when `tool` is not on PATH.
fn require(tool: &str) -> PathBuf {
    let path = env::var_os("PATH").unwrap_or_default();
    for dir in env::split_paths(&path) {
        let candidate = dir.join(tool);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{tool}` not found on PATH: the C library's program tests need gcc, g++, python3, sqlite3 and git; \
         run `bash .ci/deps` (from the workspace root) to install them"
    );
}

/// Runs `cmd` to completion; panics with its output when it cannot start or exits non-zero.
fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{what} failed ({}): {cmd:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let root = workspace().join("target").join("capi-test");
        fs::create_dir_all(&root).expect("create target/capi-test");
        let so = match env::var("POOLALLOC_TEST_C_SO") {
            Ok(v) if v == "glibc" => None,
            Ok(v) => {
                let p = PathBuf::from(v);
                assert!(
                    p.is_file(),
                    "POOLALLOC_TEST_C_SO={} is not a file",
                    p.display()
                );
                Some(fs::canonicalize(&p).expect("canonicalize POOLALLOC_TEST_C_SO"))
            }
            Err(_) => Some(build_library(&root)),
        };
        require("gcc");
        let witness = root.join("libpoolalloc_witness.so");
        run_ok(
            Command::new("gcc")
                .args([
                    "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o",
                ])
                .arg(&witness)
                .arg(inputs().join("c/witness.c"))
                .arg("-ldl")
                .env_remove("LD_PRELOAD"),
            "building the witness library",
        );
        Setup { so, witness, root }
    })
}

fn build_library(root: &Path) -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run_ok(
        Command::new(cargo)
            .args(["build", "--release", "-p", "poolalloc-c", "--target-dir"])
            .arg(root)
            .current_dir(workspace())
            .env_remove("LD_PRELOAD"),
        "building libpoolalloc_c.so",
    );
    let so = root.join("release").join("libpoolalloc_c.so");
    assert!(so.is_file(), "cargo build did not produce {}", so.display());
    fs::canonicalize(so).expect("canonicalize the library")
}

impl Setup {
    /// A fresh directory for one test's files.
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.root.join("programs").join(name);
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("create a test directory");
        d
    }

    /// The expected library of malloc in a preloaded process, for messages.
    fn expected(&self) -> String {
        match &self.so {
            Some(p) => p.display().to_string(),
            None => "glibc's libc.so.6".to_string(),
        }
    }

    fn is_expected_library(&self, lib: &str) -> bool {
        match &self.so {
            Some(p) => fs::canonicalize(lib).map(|l| &l == p).unwrap_or(false),
            None => Path::new(lib)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libc.so")),
        }
    }

    /// Makes `cmd` run under the allocator, with the witness logging to `log`.
    fn preload(&self, cmd: &mut Command, log: &Path) {
        let _ = fs::remove_file(log);
        let mut libs = String::new();
        if let Some(so) = &self.so {
            libs.push_str(&so.display().to_string());
            libs.push(' ');
        }
        libs.push_str(&self.witness.display().to_string());
        cmd.env("LD_PRELOAD", libs)
            .env("POOLALLOC_TEST_WITNESS_LOG", log);
    }

    /// Checks the witness log: every process resolved the four functions to the allocator, and each of
    /// `must_run` (executable file names) ran at least once. Returns the executables seen.
    fn check_witness(&self, log: &Path, must_run: &[&str]) -> Vec<String> {
        let text = fs::read_to_string(log).unwrap_or_else(|e| {
            panic!(
                "no witness log {} ({e}): the preload was not in effect",
                log.display()
            )
        });
        let mut exes = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 3, "witness line {line:?}");
            assert!(
                self.is_expected_library(f[1]),
                "{}: malloc comes from {}, not from {}",
                f[0],
                f[1],
                self.expected()
            );
            assert_eq!(
                f[2], "ok",
                "{}: malloc, free, calloc, realloc not all from {}",
                f[0], f[1]
            );
            let name = Path::new(f[0])
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !exes.contains(&name) {
                exes.push(name);
            }
        }
        // "gcc" matches x86_64-linux-gnu-gcc-12, "ld" matches x86_64-linux-gnu-ld.bfd.
        let matches =
            |name: &str, want: &str| name == want || name.split(['-', '.']).any(|t| t == want);
        for exe in must_run {
            assert!(
                exes.iter().any(|e| matches(e, exe)),
                "`{exe}` never ran under the preload (processes seen: {exes:?})"
            );
        }
        exes
    }
}

/// Runs a program twice, without and with the preload (`stdin` fed to both), and returns both outputs.
/// The preloaded run must exit as the reference did.
fn twice(
    s: &Setup,
    name: &str,
    make: &dyn Fn() -> Command,
    stdin: Option<&[u8]>,
) -> (Output, Output) {
    let run = |cmd: &mut Command| -> Output {
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {cmd:?}: {e}"));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            pipe.write_all(input).expect("write stdin");
        }
        child.wait_with_output().expect("wait")
    };
    let mut reference = make();
    reference.env_remove("LD_PRELOAD");
    let reference = run(&mut reference);
    let mut preloaded = make();
    s.preload(
        &mut preloaded,
        &s.root.join("programs").join(format!("{name}.witness")),
    );
    let preloaded = run(&mut preloaded);
    assert!(
        reference.status.success(),
        "{name} fails even without the preload ({}):\n{}\n{}",
        reference.status,
        String::from_utf8_lossy(&reference.stdout),
        String::from_utf8_lossy(&reference.stderr)
    );
    assert!(
        preloaded.status.success(),
        "{name} under {} exited with {}\n--- stdout\n{}\n--- stderr\n{}",
        s.expected(),
        preloaded.status,
        String::from_utf8_lossy(&preloaded.stdout),
        String::from_utf8_lossy(&preloaded.stderr)
    );
    (reference, preloaded)
}

fn witness_log(s: &Setup, name: &str) -> PathBuf {
    s.root.join("programs").join(format!("{name}.witness"))
}

/// Output lines, without the "note:" lines a test prints about a peer allocator's known differences.
fn lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.starts_with("note:"))
        .map(str::to_owned)
        .collect()
}

fn compile_c(dir: &Path, source: &str, exe: &str, extra: &[&str]) -> PathBuf {
    let compiler = if source.ends_with(".cpp") {
        "g++"
    } else {
        "gcc"
    };
    require(compiler);
    let out = dir.join(exe);
    let mut cmd = Command::new(compiler);
    cmd.args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o"])
        .arg(&out)
        .arg(inputs().join("c").join(source))
        .args(extra)
        .arg("-ldl")
        .env_remove("LD_PRELOAD");
    if compiler == "g++" {
        cmd.arg("-std=c++17");
    }
    run_ok(&mut cmd, &format!("compiling {source}"));
    out
}

#[test]
fn edge_cases_of_every_exported_function() {
    let s = setup();
    let dir = s.dir("edge_cases");
    // -fno-builtin: gcc must not fold `malloc(n) == NULL` or drop a malloc/free pair.
    let exe = compile_c(&dir, "edge_cases.c", "edge_cases", &["-fno-builtin"]);
    let log = witness_log(s, "edge_cases");
    let mut cmd = Command::new(&exe);
    s.preload(&mut cmd, &log);
    let out = cmd.output().expect("run edge_cases");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "edge_cases under {} exited with {}:\n{text}\n{}",
        s.expected(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    s.check_witness(&log, &["edge_cases"]);
    let from = text
        .lines()
        .find_map(|l| l.strip_prefix("malloc from: "))
        .unwrap_or_else(|| panic!("no 'malloc from' line:\n{text}"));
    assert!(
        s.is_expected_library(from),
        "edge_cases: malloc from {from}, expected {}",
        s.expected()
    );
    let is_poolalloc =
        s.so.as_ref()
            .is_some_and(|p| p.to_string_lossy().contains("poolalloc"));
    if is_poolalloc || s.so.is_none() {
        assert!(
            text.lines()
                .any(|l| l == "provider: poolalloc" || l == "provider: glibc"),
            "edge_cases did not run its strict checks:\n{text}"
        );
    }
    let last = text.lines().last().unwrap_or("");
    assert!(
        last.starts_with("edge_cases: ") && last.ends_with(", 0 failures"),
        "{text}"
    );
    // Enough checks ran for the summary to mean something (each size, alignment and pair of sizes).
    let n: u64 = last
        .trim_start_matches("edge_cases: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(n > 5000, "only {n} checks ran:\n{text}");
}

/// Runs an odd_moments program with and without the preload; the stage lines must be the same and all
/// end in ": ok".
fn odd_moments(name: &str, exe: &Path, args: &[&Path]) {
    let s = setup();
    let make = || {
        let mut c = Command::new(exe);
        c.args(args);
        c
    };
    let (reference, preloaded) = twice(s, name, &make, None);
    let want = lines(&reference.stdout);
    let got = lines(&preloaded.stdout);
    assert!(want.len() >= 6, "{name}: too few stages: {want:?}");
    assert!(
        want.iter().all(|l| l.ends_with(": ok")),
        "{name} without preload: {want:?}"
    );
    assert_eq!(
        got,
        want,
        "{name} under {}: stages differ (stderr: {})",
        s.expected(),
        String::from_utf8_lossy(&preloaded.stderr)
    );
    s.check_witness(&witness_log(s, name), &[name]);
}

#[test]
fn odd_moments_c() {
    let s = setup();
    let dir = s.dir("odd_moments");
    require("gcc");
    let plugin = dir.join("libodd_plugin.so");
    run_ok(
        Command::new("gcc")
            .args([
                "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o",
            ])
            .arg(&plugin)
            .arg(inputs().join("c/odd_plugin.c"))
            .env_remove("LD_PRELOAD"),
        "compiling odd_plugin.c",
    );
    let exe = compile_c(&dir, "odd_moments.c", "odd_moments", &[]);
    odd_moments("odd_moments", &exe, &[&plugin]);
}

#[test]
fn odd_moments_cpp() {
    let s = setup();
    let dir = s.dir("odd_moments_cpp");
    let exe = compile_c(&dir, "odd_moments.cpp", "odd_moments_cpp", &[]);
    odd_moments("odd_moments_cpp", &exe, &[]);
}

/// The C++ operators of the library (`tests/c/cpp_new.cpp`): every form of new and delete, over-
/// alignment, nothrow giving null, std::bad_alloc caught, the new-handler loop, sized delete and
/// cross-thread deletes, with the same results as under libstdc++'s own operators. Under our
/// library every operator symbol must resolve to it.
#[test]
fn cpp_operators_preloaded() {
    let s = setup();
    let dir = s.dir("cpp_new");
    let exe = compile_c(&dir, "cpp_new.cpp", "cpp_new", &[]);
    let (reference, preloaded) = twice(s, "cpp_new", &|| Command::new(&exe), None);
    let want = lines(&reference.stdout);
    let got = lines(&preloaded.stdout);
    assert!(want.len() >= 9, "cpp_new: too few stages: {want:?}");
    assert!(want.iter().all(|l| l.ends_with(": ok")), "{want:?}");
    assert_eq!(
        got,
        want,
        "cpp_new under {}: stages differ (stderr: {})",
        s.expected(),
        String::from_utf8_lossy(&preloaded.stderr)
    );
    s.check_witness(&witness_log(s, "cpp_new"), &["cpp_new"]);
    if let Some(so) =
        s.so.as_ref()
            .filter(|p| p.to_string_lossy().contains("poolalloc"))
    {
        check_operators_from(&preloaded.stdout, so);
    }
}

/// The same program linked with `-lpoolalloc_c` instead of preloaded.
#[test]
fn cpp_operators_linked() {
    let s = setup();
    let Some(so) =
        s.so.as_ref()
            .filter(|p| p.to_string_lossy().contains("poolalloc"))
    else {
        return; // only our library is linked here
    };
    let dir = s.dir("cpp_new_linked");
    let lib_dir = so.parent().expect("the library's directory");
    let search = format!("-L{}", lib_dir.display());
    let rpath = format!("-Wl,-rpath,{}", lib_dir.display());
    let exe = compile_c(
        &dir,
        "cpp_new.cpp",
        "cpp_new_linked",
        &[&search, &rpath, "-lpoolalloc_c"],
    );
    let out = run_ok(
        // cargo's LD_LIBRARY_PATH names its own target dir, which would win over the rpath.
        Command::new(&exe)
            .env_remove("LD_PRELOAD")
            .env_remove("LD_LIBRARY_PATH"),
        "cpp_new linked with -lpoolalloc_c",
    );
    let got = lines(&out.stdout);
    assert!(
        got.len() >= 9 && got.iter().all(|l| l.ends_with(": ok")),
        "{got:?}"
    );
    check_operators_from(&out.stdout, so);
}

/// Every `note: SYMBOL from LIBRARY` line of cpp_new names `so`.
fn check_operators_from(stdout: &[u8], so: &Path) {
    let text = String::from_utf8_lossy(stdout);
    let notes: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("note: ")?.split_once(" from "))
        .collect();
    assert!(
        notes.len() >= 21,
        "cpp_new printed no symbol notes:\n{text}"
    );
    for (sym, lib) in notes {
        assert!(
            fs::canonicalize(lib).is_ok_and(|l| l == so),
            "{sym} resolves to {lib}, not to {}",
            so.display()
        );
    }
}

#[test]
fn python_threads_dicts_lists_strings() {
    let s = setup();
    require("python3");
    // The interpreter itself (python3 on PATH may be a shim script that starts it).
    let exe = run_ok(
        Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .env_remove("LD_PRELOAD"),
        "finding python3",
    );
    let python = PathBuf::from(String::from_utf8_lossy(&exe.stdout).trim());
    let script = inputs().join("py/workload.py");
    let make = || {
        let mut c = Command::new(&python);
        // Every object through malloc, not Python's own small-object arenas.
        c.arg(&script).env("PYTHONMALLOC", "malloc");
        c
    };
    let (reference, preloaded) = twice(s, "python", &make, None);
    let want = lines(&reference.stdout);
    assert_eq!(want.last().map(String::as_str), Some("workload: ok"));
    assert_eq!(
        lines(&preloaded.stdout),
        want,
        "python3 output differs under {}",
        s.expected()
    );
    // A figure computed here: the sum of 0..200000 and the count of 'A' in 2^20 letters A..Z.
    let sum: u64 = (0..200_000u64).sum();
    let count_a = (1u64 << 20).div_ceil(26);
    let big = format!("big list sum {sum}, big string 1048576 bytes, count of A {count_a}");
    assert!(want.contains(&big), "{want:?} lacks {big:?}");
    // The witness names the executable as /proc/self/exe does: symbolic links resolved.
    let real = fs::canonicalize(&python).expect("canonicalize python3");
    let name = real.file_name().unwrap().to_string_lossy().into_owned();
    s.check_witness(&witness_log(s, "python"), &[&name]);
}

/// mimalloc's amalgamated C source from the libmimalloc-sys crate (a dev-dependency of the workspace, so
/// its source is in cargo's registry once the tests are built).
fn mimalloc_source() -> PathBuf {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let mut found = Vec::new();
    for registry in fs::read_dir(home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for krate in fs::read_dir(registry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if krate
                .file_name()
                .to_string_lossy()
                .starts_with("libmimalloc-sys-")
            {
                for v in ["c_src/mimalloc/v2", "c_src/mimalloc"] {
                    let dir = krate.path().join(v);
                    if dir.join("src/static.c").is_file()
                        && dir.join("include/mimalloc.h").is_file()
                    {
                        found.push(dir);
                        break;
                    }
                }
            }
        }
    }
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "libmimalloc-sys's C source not found under {}/registry/src: run `cargo fetch` in the workspace",
            home.display()
        )
    })
}

#[test]
fn gcc_compiles_mimalloc_and_the_result_runs() {
    let s = setup();
    require("gcc");
    let src = mimalloc_source();
    let dir = s.dir("gcc");
    // The same compilation without and with the preload must give the same object file (gcc is
    // deterministic; SOURCE_DATE_EPOCH fixes __DATE__ and __TIME__, which mimalloc prints).
    let compile = |out: &str| {
        let mut c = Command::new("gcc");
        c.args(["-O2", "-frandom-seed=poolalloc", "-I"])
            .arg(src.join("include"))
            .arg("-c")
            .arg(src.join("src/static.c"))
            .arg("-o")
            .arg(dir.join(out))
            .env("SOURCE_DATE_EPOCH", "1700000000");
        c
    };
    let mut reference = compile("static-ref.o");
    reference.env_remove("LD_PRELOAD");
    run_ok(&mut reference, "gcc without the preload");
    let log = witness_log(s, "gcc");
    let mut preloaded = compile("static.o");
    s.preload(&mut preloaded, &log);
    run_ok(&mut preloaded, "gcc under the preload");
    let a = fs::read(dir.join("static-ref.o")).expect("static-ref.o");
    let b = fs::read(dir.join("static.o")).expect("static.o");
    assert!(a.len() > 50_000, "static.o is only {} bytes", a.len());
    assert!(
        a == b,
        "gcc -O2 static.c gave a different object file under {}",
        s.expected()
    );
    // Compile the driver and link, still under the preload (cc1, as, collect2, ld), then run the result.
    let mut c = Command::new("gcc");
    c.args(["-O2", "-pthread", "-I"])
        .arg(src.join("include"))
        .arg("-o")
        .arg(dir.join("mi_driver"))
        .arg(inputs().join("c/mi_driver.c"))
        .arg(dir.join("static.o"));
    s.preload(&mut c, &dir.join("link.witness"));
    run_ok(
        &mut c,
        "gcc compiling and linking mi_driver under the preload",
    );
    s.check_witness(&log, &["gcc", "cc1", "as"]);
    s.check_witness(&dir.join("link.witness"), &["gcc", "cc1", "as", "ld"]);
    let exe = dir.join("mi_driver");
    let (reference, preloaded) = twice(s, "mi_driver", &|| Command::new(&exe), None);
    let want = lines(&reference.stdout);
    assert!(
        want.iter()
            .any(|l| l.starts_with("mimalloc driver: checksum") && l.ends_with(" ok")),
        "{want:?}"
    );
    assert_eq!(lines(&preloaded.stdout), want);
    s.check_witness(&witness_log(s, "mi_driver"), &["mi_driver"]);
}

#[test]
fn sqlite3_bulk_inserts_indexes_queries() {
    let s = setup();
    require("sqlite3");
    let script = fs::read(inputs().join("sql/bulk.sql")).expect("bulk.sql");
    let make = || {
        let mut c = Command::new("sqlite3");
        c.arg(":memory:");
        c
    };
    let (reference, preloaded) = twice(s, "sqlite3", &make, Some(&script));
    let want = lines(&reference.stdout);
    assert_eq!(
        lines(&preloaded.stdout),
        want,
        "sqlite3 output differs under {}",
        s.expected()
    );
    // Three results computed here.
    let n = 200_000u64;
    let sum: u64 = (1..=n).sum();
    let g7: Vec<u64> = (1..=n).filter(|i| i % 97 == 7).collect();
    let blob: u64 = (1..=n).map(|i| i % 700).sum();
    for line in [
        format!("count_sum|{n}|{sum}"),
        format!("group_7|{}|{}", g7.len(), g7.iter().sum::<u64>()),
        format!("blob_bytes|{blob}"),
        "ok".to_string(),
    ] {
        assert!(
            want.contains(&line),
            "sqlite3 output lacks {line:?}: {want:?}"
        );
    }
    s.check_witness(&witness_log(s, "sqlite3"), &["sqlite3"]);
}

#[test]
fn git_on_a_fresh_repository() {
    let s = setup();
    require("git");
    let base = s.dir("git");
    const FILES: usize = 150;
    // The same session in two fresh repositories, without and with the preload: identical output
    // (fixed author, committer and dates make the commit ids the same).
    let session = |repo: &Path, preload: Option<&Path>| -> String {
        fs::create_dir_all(repo).unwrap();
        let git = |args: &[&str]| -> String {
            let mut c = Command::new("git");
            c.args(args)
                .current_dir(repo)
                .env("HOME", repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "Test")
                .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
                .env("GIT_COMMITTER_NAME", "Test")
                .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
                .env("GIT_AUTHOR_DATE", "1700000000 +0000")
                .env("GIT_COMMITTER_DATE", "1700000000 +0000")
                .env_remove("LD_PRELOAD");
            if let Some(log) = preload {
                // Appends: the whole session's processes in one log.
                let mut libs = String::new();
                if let Some(so) = &s.so {
                    libs = format!("{} ", so.display());
                }
                libs.push_str(&s.witness.display().to_string());
                c.env("LD_PRELOAD", libs)
                    .env("POOLALLOC_TEST_WITNESS_LOG", log);
            }
            let out = run_ok(&mut c, &format!("git {}", args.join(" ")));
            format!(
                "$ git {}\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout)
            )
        };
        let mut log = String::new();
        log += &git(&["init", "-q", "-b", "main"]);
        for i in 0..FILES {
            let body: String = (0..(i * 7 % 200 + 1))
                .map(|k| format!("line {k} of file {i}\n"))
                .collect();
            fs::write(repo.join(format!("f{i:03}.txt")), body).unwrap();
        }
        log += &git(&["add", "-A"]);
        log += &git(&["commit", "-q", "-m", "first"]);
        for i in (0..FILES).step_by(3) {
            let p = repo.join(format!("f{i:03}.txt"));
            let mut body = fs::read_to_string(&p).unwrap();
            body.insert_str(body.len() / 2, "changed in the middle\n");
            fs::write(&p, body).unwrap();
        }
        fs::remove_file(repo.join("f001.txt")).unwrap();
        log += &git(&["checkout", "-q", "-b", "topic"]);
        log += &git(&["commit", "-q", "-a", "-m", "second"]);
        log += &git(&["diff", "--stat", "main", "topic"]);
        log += &git(&["log", "--format=%H %s", "--all"]);
        log += &git(&["checkout", "-q", "main"]);
        log += &git(&["merge", "-q", "--no-edit", "topic"]);
        log += &git(&["gc", "-q", "--aggressive"]);
        log += &git(&["fsck", "--full", "--strict"]);
        log += &git(&["count-objects", "-v"]);
        log += &git(&["ls-files"]);
        log += &git(&["grep", "-c", "changed in the middle"]);
        log += &git(&["rev-parse", "HEAD", "HEAD^{tree}"]);
        log
    };
    let reference = session(&base.join("reference"), None);
    let wlog = witness_log(s, "git");
    let _ = fs::remove_file(&wlog);
    let preloaded = session(&base.join("preloaded"), Some(&wlog));
    // count-objects reports sizes on disk, which depend on file system blocks; compare it loosely.
    let strip = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("size"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        strip(&preloaded),
        strip(&reference),
        "git output differs under {}",
        s.expected()
    );
    // Figures computed here: the files left after the merge, and how many were changed.
    let ls: Vec<&str> = reference
        .split("$ git ls-files\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.starts_with("$ "))
        .collect();
    assert_eq!(ls.len(), FILES - 1, "{reference}");
    let changed = (0..FILES).step_by(3).count();
    let grep = reference.split("$ git grep").nth(1).unwrap();
    assert_eq!(
        grep.lines().filter(|l| l.ends_with(":1")).count(),
        changed,
        "{reference}"
    );
    // gc ran its helpers (pack-objects and friends) under the preload too.
    let exes = s.check_witness(&wlog, &["git"]);
    assert!(
        fs::read_to_string(&wlog).unwrap().lines().count() >= 15,
        "too few processes under the preload: {exes:?}"
    );
}

/// The settings through the C library: a C program (`ls -l` of a large directory, one process: a
/// pyenv `python3` is a shell script starting several) under the preload, with each variable
/// valid, invalid and absent, and an unknown name. Each process reads its settings once.
#[test]
fn settings_from_the_environment_under_the_preload() {
    let s = setup();
    let Some(so) = &s.so else {
        return; // the glibc reference run has no settings to read
    };
    let ls = require("ls");
    let run = |env: &[(&str, &str)]| -> String {
        let mut cmd = Command::new(&ls);
        cmd.args(["-l", "/usr/bin"])
            .env("LD_PRELOAD", so)
            .env_remove("POOLALLOC_PURGE_DELAY_MS")
            .env_remove("POOLALLOC_RETAINED_CHUNKS")
            .env_remove("POOLALLOC_SHOW_STATS")
            .env_remove("POOLALLOC_VERBOSE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = run_ok(&mut cmd, "ls under the preload with settings");
        assert!(out.stdout.len() > 1000);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let ours = |err: &str| -> Vec<String> {
        err.lines()
            .filter(|l| l.starts_with("poolalloc: "))
            .map(str::to_owned)
            .collect()
    };
    // Absent: silence.
    assert!(ours(&run(&[])).is_empty());
    // Valid: taken (verbose prints them), and the report at exit.
    let err = run(&[
        ("POOLALLOC_PURGE_DELAY_MS", "40"),
        ("POOLALLOC_RETAINED_CHUNKS", "2"),
        ("POOLALLOC_VERBOSE", "1"),
        ("POOLALLOC_SHOW_STATS", "yes"),
    ]);
    assert!(
        err.contains("poolalloc:   POOLALLOC_PURGE_DELAY_MS=40 (environment)")
            && err.contains("poolalloc:   POOLALLOC_RETAINED_CHUNKS=2 (environment)")
            && err.contains("poolalloc:   POOLALLOC_SHOW_STATS=1 (environment)"),
        "{err}"
    );
    assert!(err.contains("poolalloc: stats at exit"), "{err}");
    // C's malloc passes no size to free: the report says requested sizes are not known instead
    // of printing zero and calling the live bytes waste.
    assert!(
        err.contains("(n/a requested)") && err.contains("the C interface's malloc passes no size"),
        "{err}"
    );
    let table: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("slot"))
        .skip(1)
        .take_while(|l| !l.starts_with("small:"))
        .collect();
    assert!(!table.is_empty(), "{err}");
    assert!(
        table
            .iter()
            .all(|l| l.split_whitespace().filter(|w| *w == "n/a").count() == 3),
        "requested, waste and util% are n/a on every line: {err}"
    );
    // Invalid and unknown: one line each, naming them; the program runs on.
    let err = run(&[
        ("POOLALLOC_PURGE_DELAY_MS", "soon"),
        ("POOLALLOC_SHOW_STATS", "2"),
        ("POOLALLOC_PURGE", "1"),
    ]);
    let w = ours(&err);
    assert_eq!(w.len(), 3, "{err}");
    assert!(
        w.iter()
            .any(|l| l.contains("POOLALLOC_PURGE_DELAY_MS=soon")),
        "{err}"
    );
    assert!(
        w.iter().any(|l| l.contains("POOLALLOC_SHOW_STATS=2")),
        "{err}"
    );
    assert!(
        w.iter()
            .any(|l| l.contains("unknown setting POOLALLOC_PURGE ")),
        "{err}"
    );
}
