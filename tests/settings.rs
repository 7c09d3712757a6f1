//! Runtime settings from the environment: each variable valid, invalid and absent, an unknown
//! name, and a Rust setter that wins. Each case runs this test binary again as a child (settings
//! are read once per process; poolalloc-test-support's `child`): the child prints what it sees.

use poolalloc_test_support::child;
use std::process::Output;
use std::time::Duration;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// The child's part: print the settings in force (after the setter, if asked) and exit.
fn child() {
    if std::env::var_os("POOLALLOC_TEST_SET_DELAY").is_some() {
        poolalloc::set_purge_delay(Duration::from_millis(7));
    }
    let ms = |k: &str| std::env::var(k).ok().map(|v| v.parse::<u64>().unwrap());
    if let Some(ms) = ms("POOLALLOC_TEST_APPLY_DELAY_MS") {
        poolalloc::Settings::new()
            .purge_delay(Duration::from_millis(ms))
            .apply();
    }
    if let Some(ms) = ms("POOLALLOC_TEST_SET_DELAY_MS") {
        poolalloc::set_purge_delay(Duration::from_millis(ms));
    }
    if std::env::var_os("POOLALLOC_TEST_EMPTY_CHUNKS").is_some() {
        empty_chunks_wait();
    }
    if std::env::var_os("POOLALLOC_TEST_PRINT_IDS").is_some() {
        // Who the process is: real, effective, saved and file-system IDs (the setuid case).
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        for l in status.lines().filter(|l| l.starts_with("Uid:")) {
            println!("ids {}", l.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    if let Some(what) = std::env::var_os("POOLALLOC_TEST_PLANT") {
        plant(what.to_str().unwrap());
    }
    let v: Vec<u64> = (0..1000).collect(); // allocate a little
    println!(
        "delay={} retained={} sum={} huge={:?} large={:?}",
        poolalloc::purge_delay().as_millis(),
        poolalloc::retained_chunks(),
        v.iter().sum::<u64>(),
        poolalloc::huge_pages(),
        poolalloc::large_blocks()
    );
}

/// Empties four chunks of 48-byte blocks with no chunk retained, gives the purger 400 ms (four
/// of its periods at least) and prints how many of them still wait in the chunk source.
fn empty_chunks_wait() {
    use std::alloc::{GlobalAlloc, Layout};
    poolalloc::set_retained_chunks(0);
    let l = Layout::from_size_align(48, 8).unwrap();
    let blocks: Vec<*mut u8> = (0..4 * (poolalloc::CHUNK_SIZE / 48))
        .map(|_| {
            // SAFETY: the layout is non-zero in size.
            let p = unsafe { GLOBAL.alloc(l) };
            assert!(!p.is_null());
            // SAFETY: p holds 48 bytes.
            unsafe { p.write_bytes(1, 48) };
            p
        })
        .collect();
    for &p in &blocks {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { GLOBAL.dealloc(p, l) };
    }
    std::thread::sleep(Duration::from_millis(400));
    let s = poolalloc::stats();
    let c = s.classes().iter().position(|c| c.slot_size == 48).unwrap();
    println!("waiting={}", s.classes()[c].retained_chunks);
}

/// Puts something where this process's exit profile will go (`<POOLALLOC_PROF>.<pid>.pb.gz`),
/// as an attacker who guesses the pid would: `file` (a file of its own, which must keep its
/// contents) or `link:<target>` (a symbolic link to a file that must not be written through it).
fn plant(what: &str) {
    let prefix = std::env::var("POOLALLOC_PROF").unwrap();
    let at = format!("{prefix}.{}.pb.gz", std::process::id());
    match what.strip_prefix("link:") {
        #[cfg(unix)]
        Some(target) => std::os::unix::fs::symlink(target, &at).unwrap(),
        #[cfg(not(unix))]
        Some(_) => unreachable!("links are planted on Unix only"),
        None => std::fs::write(&at, b"the planter's own file").unwrap(),
    }
}

/// Runs the child with `env` (and nothing else of ours), through the runner the test scripts
/// name for emulated targets, if any (`child::this_binary`).
fn run(env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = child::test("the_child", "settings");
    for (k, _) in std::env::vars() {
        if k.starts_with("POOLALLOC_") && !k.starts_with("POOLALLOC_TEST_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run the child");
    let (out, err) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    assert!(
        child::returned(&status),
        "child failed: {status}\n{out}\n{err}"
    );
    (out, err)
}

fn seen(out: &str) -> (u64, usize) {
    // libtest prints "test the_child ... " before the child's own output, on the same line.
    let line = out
        .lines()
        .find_map(|l| l.find("delay=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no settings line in:\n{out}"));
    let mut f = line.split(' ');
    let d = f.next().unwrap()["delay=".len()..].parse().unwrap();
    let r = f.next().unwrap()["retained=".len()..].parse().unwrap();
    (d, r)
}

fn warnings(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("poolalloc: "))
        .collect()
}

#[test]
fn the_child() {
    child::enter(|_| child());
}

#[test]
fn absent_variables_keep_the_defaults_silently() {
    let (out, err) = run(&[]);
    assert_eq!(seen(&out), (250, 1));
    assert!(warnings(&err).is_empty(), "{err}");
}

#[test]
fn valid_values_are_taken() {
    let (out, err) = run(&[
        ("POOLALLOC_PURGE_DELAY_MS", "40"),
        ("POOLALLOC_RETAINED_CHUNKS", "3"),
    ]);
    assert_eq!(seen(&out), (40, 3));
    assert!(warnings(&err).is_empty(), "{err}");
    let (out, _) = run(&[("POOLALLOC_PURGE_DELAY_MS", "0")]);
    assert_eq!(seen(&out).0, 0);
}

#[test]
fn invalid_values_warn_once_and_keep_the_default() {
    let (out, err) = run(&[
        ("POOLALLOC_PURGE_DELAY_MS", "250ms"),
        ("POOLALLOC_RETAINED_CHUNKS", "-1"),
        ("POOLALLOC_VERBOSE", "maybe"),
    ]);
    assert_eq!(seen(&out), (250, 1));
    let w = warnings(&err);
    assert_eq!(w.len(), 3, "{err}");
    assert!(
        w.iter()
            .any(|l| l.contains("POOLALLOC_PURGE_DELAY_MS=250ms is not a whole number"))
    );
    assert!(w.iter().any(|l| l.contains("POOLALLOC_RETAINED_CHUNKS=-1")));
    assert!(w.iter().any(|l| l.contains("POOLALLOC_VERBOSE=maybe")));
}

#[test]
fn an_unknown_name_is_named_in_one_warning() {
    let (out, err) = run(&[("POOLALLOC_PURGE_DELAY", "5")]);
    assert_eq!(seen(&out), (250, 1));
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(
        w[0].contains("unknown setting POOLALLOC_PURGE_DELAY "),
        "{err}"
    );
}

/// The large-block source the child reports.
fn large(out: &str) -> &str {
    out.lines()
        .find_map(|l| l.find("large=").map(|i| l[i + "large=".len()..].trim()))
        .unwrap_or_else(|| panic!("no large= in:\n{out}"))
}

#[test]
fn large_blocks_source_is_chosen_by_name_and_a_bad_name_warns() {
    let default = if cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_env = "musl")
    )) {
        "Spans"
    } else {
        "System"
    };
    assert_eq!(large(&run(&[]).0), default);
    for (name, seen) in [
        ("system", "System"),
        ("system-kept", "SystemKept"),
        ("spans", "Spans"),
    ] {
        let (out, err) = run(&[("POOLALLOC_LARGE_BLOCKS", name)]);
        assert_eq!(large(&out), seen);
        assert!(warnings(&err).is_empty(), "{err}");
    }
    let (out, err) = run(&[("POOLALLOC_LARGE_BLOCKS", "mmap")]);
    assert_eq!(large(&out), default);
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(w[0].contains("POOLALLOC_LARGE_BLOCKS=mmap is not"), "{err}");
}

/// The huge-page setting the child reports.
fn huge(out: &str) -> &str {
    out.lines()
        .find_map(|l| {
            l.find("huge=")
                .map(|i| l[i + "huge=".len()..].split(' ').next().unwrap())
        })
        .unwrap_or_else(|| panic!("no huge= in:\n{out}"))
}

#[test]
fn huge_pages_take_off_on_or_a_threshold_and_a_bad_value_warns() {
    let default = "Off";
    assert_eq!(huge(&run(&[]).0), default);
    for (value, seen) in [
        ("off", "Off"),
        ("on", "PastMiB(0)"),
        ("0", "PastMiB(0)"),
        ("64", "PastMiB(64)"),
    ] {
        let (out, err) = run(&[("POOLALLOC_HUGE_PAGES", value)]);
        assert_eq!(huge(&out), seen, "POOLALLOC_HUGE_PAGES={value}");
        assert!(warnings(&err).is_empty(), "{err}");
    }
    let (out, err) = run(&[("POOLALLOC_HUGE_PAGES", "lots")]);
    assert_eq!(huge(&out), default);
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(w[0].contains("POOLALLOC_HUGE_PAGES=lots is not"), "{err}");
}

#[test]
fn the_setter_wins_over_the_environment() {
    let (out, _) = run(&[
        ("POOLALLOC_PURGE_DELAY_MS", "40"),
        ("POOLALLOC_TEST_SET_DELAY", "1"),
    ]);
    assert_eq!(seen(&out).0, 7);
}

/// A purge delay past the bound (a day), from a setter or from `Settings` in code, is taken as
/// the bound and said so by `purge_delay()`; from the environment it is refused with a warning
/// (issue 41: code's values skipped the bounds, and the purger truncated 2^32 ms to 0).
#[test]
fn a_delay_past_the_bound_is_a_day_from_code_and_refused_from_the_environment() {
    const DAY_MS: u64 = 86_400_000;
    let big = (1u64 << 32).to_string();
    for k in [
        "POOLALLOC_TEST_SET_DELAY_MS",
        "POOLALLOC_TEST_APPLY_DELAY_MS",
    ] {
        let (out, err) = run(&[(k, &big)]);
        assert_eq!(seen(&out).0, DAY_MS, "{k}");
        assert!(warnings(&err).is_empty(), "{err}");
    }
    let (out, _) = run(&[("POOLALLOC_TEST_SET_DELAY_MS", &u64::MAX.to_string())]);
    assert_eq!(seen(&out).0, DAY_MS);
    let (out, err) = run(&[("POOLALLOC_PURGE_DELAY_MS", &big)]);
    assert_eq!(seen(&out).0, 250);
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(
        w[0].contains("is not a whole number from 0 to 86400000"),
        "{err}"
    );
}

/// How many emptied chunks still wait after the purger had 400 ms (`empty_chunks_wait`).
fn waiting(out: &str) -> usize {
    out.lines()
        .find_map(|l| l.find("waiting=").map(|i| &l[i + "waiting=".len()..]))
        .unwrap_or_else(|| panic!("no waiting= in:\n{out}"))
        .trim()
        .parse()
        .unwrap()
}

/// With a delay of 2^32 ms set, emptied chunks wait (a day) instead of going back at the
/// purger's next tick, as a 1 ms delay makes them (which shows the test sees a purge).
#[test]
fn a_huge_delay_does_not_purge_at_every_tick() {
    let (out, _) = run(&[
        ("POOLALLOC_TEST_SET_DELAY_MS", "1"),
        ("POOLALLOC_TEST_EMPTY_CHUNKS", "1"),
    ]);
    assert_eq!(waiting(&out), 0, "{out}");
    let (out, _) = run(&[
        ("POOLALLOC_TEST_SET_DELAY_MS", &(1u64 << 32).to_string()),
        ("POOLALLOC_TEST_EMPTY_CHUNKS", "1"),
    ]);
    assert!(waiting(&out) >= 3, "{out}");
}

#[test]
fn show_stats_prints_the_snapshot_at_exit_and_verbose_the_settings() {
    let (_, err) = run(&[("POOLALLOC_SHOW_STATS", "1"), ("POOLALLOC_VERBOSE", "on")]);
    assert!(err.contains("poolalloc: stats at exit"), "{err}");
    assert!(err.contains("backend: "), "{err}");
    assert!(err.contains("poolalloc: settings (backend "), "{err}");
    assert!(
        err.contains("poolalloc:   POOLALLOC_SHOW_STATS=1 (environment)"),
        "{err}"
    );
    assert!(
        err.contains("poolalloc:   POOLALLOC_PURGE_DELAY_MS=250 (default)"),
        "{err}"
    );
    // Every setting the docs' table lists (which a unit test holds to the code's table) has its
    // line.
    let page = include_str!("../docs/stats-and-settings.md");
    let names: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `POOLALLOC_"))
        .map(|l| &l[..l.find('`').unwrap()])
        .collect();
    assert_eq!(names.len(), 14, "{names:?}");
    for n in names {
        assert!(
            err.contains(&format!("poolalloc:   POOLALLOC_{n}=")),
            "{n} not printed:\n{err}"
        );
    }
    let (_, err) = run(&[("POOLALLOC_SHOW_STATS", "0")]);
    assert!(!err.contains("stats at exit"), "{err}");
}

#[test]
fn prof_writes_a_profile_at_exit_or_says_why_not() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("settings-prof");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("heap");
    let (out, err) = run(&[
        ("POOLALLOC_PROF", prefix.to_str().unwrap()),
        ("POOLALLOC_PROF_INTERVAL", "0"),
        ("POOLALLOC_SHOW_STATS", "1"),
    ]);
    assert_eq!(seen(&out), (250, 1));
    // The one exit hook runs both: the statistics, and the profile.
    assert!(err.contains("poolalloc: stats at exit"), "{err}");
    let files = names_in(&dir);
    let profiled = PROFILED;
    let w: Vec<&str> = warnings(&err)
        .into_iter()
        .filter(|l| !l.contains("stats at exit"))
        .collect();
    if profiled {
        assert!(w.is_empty(), "{err}");
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].to_string_lossy();
        assert!(
            name.starts_with("heap.") && name.ends_with(".pb.gz"),
            "{name}"
        );
    } else {
        // No profiler in this build or on this platform: one line says so, nothing is written.
        assert_eq!(w.len(), 1, "{err}");
        assert!(w[0].contains("POOLALLOC_PROF ignored"), "{err}");
        assert!(files.is_empty(), "{files:?}");
    }
    let (_, err) = run(&[("POOLALLOC_PROF_INTERVAL", "often")]);
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(
        w[0].contains("POOLALLOC_PROF_INTERVAL=often is not a whole number"),
        "{err}"
    );
}

/// Whether this build's profiler records (the feature, on a platform it samples on).
const PROFILED: bool = cfg!(all(
    feature = "profiling",
    target_pointer_width = "64",
    any(
        target_os = "linux",
        target_os = "macos",
        target_os = "freebsd"
    )
));

fn names_in(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

/// The exit profile is created new: a file already at its path keeps its contents, a symbolic
/// link there is not followed (its target is not created, nor written if it exists), and one
/// line says why no profile was written.
#[cfg(unix)]
#[test]
fn the_exit_profile_follows_no_link_and_overwrites_no_file() {
    if !PROFILED {
        return; // no profile is written at all (the test above checks the message)
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("settings-plant");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("heap");
    let prof = prefix.to_str().unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let absent = dir.join("absent");
    for (plant, target) in [("link:", &victim), ("link:", &absent)] {
        let what = format!("{plant}{}", target.display());
        let (_, err) = run(&[("POOLALLOC_PROF", prof), ("POOLALLOC_TEST_PLANT", &what)]);
        let w = warnings(&err);
        assert_eq!(w.len(), 1, "{err}");
        assert!(
            w[0].contains("profile not written to") && w[0].contains("exists"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(!absent.exists(), "a dangling link was followed");
    let (_, err) = run(&[("POOLALLOC_PROF", prof), ("POOLALLOC_TEST_PLANT", "file")]);
    assert_eq!(warnings(&err).len(), 1, "{err}");
    for name in names_in(&dir) {
        let path = dir.join(&name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_file() && name != "victim" {
            assert_eq!(
                std::fs::read(&path).unwrap(),
                b"the planter's own file",
                "{name:?}"
            );
        }
    }
    // Without a plant, the profile is written, readable by its owner only.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_, err) = run(&[("POOLALLOC_PROF", prof)]);
    assert!(warnings(&err).is_empty(), "{err}");
    let files = names_in(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join(&files[0]))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

/// A set-user-ID copy of this binary, owned by root and started by `nobody` (uid 65534) through
/// `setpriv`: the kernel marks the process `AT_SECURE`, and every `POOLALLOC_*` it was given is
/// ignored. Nothing is written into a directory only root may write (the profile of
/// `POOLALLOC_PROF`, the vulnerability this guards against), the settings stay the defaults, and
/// the statistics and verbose lines are not printed: one line says the settings were ignored. The
/// same copy started by root (not privileged: real and effective IDs agree) honours them, so the
/// environment given is one that would have written.
///
/// It needs root (CI runs the tests as root and sets `POOLALLOC_TEST_REQUIRE_ROOT=1`, which
/// makes its absence a failure), `setpriv` (util-linux), and a file system that honours setuid.
#[cfg(target_os = "linux")]
#[test]
fn a_privileged_process_ignores_the_environment() {
    use std::os::unix::fs::PermissionsExt;
    let required = std::env::var_os("POOLALLOC_TEST_REQUIRE_ROOT").is_some();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if child::emulator().is_some() {
        // qemu-user runs the copy as a file it reads: the setuid bit would be the emulator's.
        eprintln!("skipped: under an emulator");
        return;
    }
    if !root {
        assert!(
            !required,
            "POOLALLOC_TEST_REQUIRE_ROOT is set, but this test runs as a user other than root"
        );
        eprintln!("skipped: needs root (to make a setuid-root copy)");
        return;
    }
    // A directory every user can enter (the checkout may sit under a private home), holding the
    // setuid copy and a directory only root may write.
    let dir = std::env::temp_dir().join(format!("poolalloc-setuid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("settings-setuid");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let victim = dir.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).unwrap();
    let prefix = victim.join("owned");
    let env = [
        ("POOLALLOC_PROF", prefix.to_str().unwrap()),
        ("POOLALLOC_PROF_INTERVAL", "0"),
        ("POOLALLOC_SHOW_STATS", "1"),
        ("POOLALLOC_VERBOSE", "1"),
        ("POOLALLOC_PURGE_DELAY_MS", "40"),
        ("POOLALLOC_TEST_PRINT_IDS", "1"),
    ];
    let start = |as_nobody: bool| {
        let mut cmd = if as_nobody {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c.arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        cmd.args(["--exact", "the_child", "--nocapture", "--test-threads=1"]);
        cmd.current_dir(&dir).env(child::CASE, "settings");
        for (k, _) in std::env::vars() {
            if k.starts_with("POOLALLOC_") && !k.starts_with("POOLALLOC_TEST_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env);
        let o = cmd.output().expect("run setpriv (util-linux)");
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        assert!(
            child::returned(&o.status),
            "child failed: {}\n{out}\n{err}",
            o.status
        );
        (out, err)
    };

    let (out, err) = start(true);
    let ids = out.lines().find_map(|l| l.find("ids ").map(|i| &l[i..]));
    assert_eq!(
        ids,
        Some("ids Uid: 65534 0 0 0"),
        "the copy did not run setuid root (a file system mounted nosuid?):\n{out}\n{err}"
    );
    assert_eq!(seen(&out), (250, 1), "{out}");
    let w = warnings(&err);
    assert_eq!(w.len(), 1, "{err}");
    assert!(
        w[0].contains("5 POOLALLOC_* setting(s) ignored: the process is privileged"),
        "{err}"
    );
    assert!(names_in(&victim).is_empty(), "{:?}", names_in(&victim));
    let mut all = names_in(&dir);
    all.sort();
    assert_eq!(all, ["settings-setuid", "victim"], "written beside it");

    // The control: the same copy and environment, started by root, is not privileged.
    let (out, err) = start(false);
    assert!(out.contains("ids Uid: 0 0 0 0"), "{out}");
    assert_eq!(seen(&out), (40, 1), "{out}");
    assert!(err.contains("poolalloc: stats at exit"), "{err}");
    assert_eq!(names_in(&victim).len(), usize::from(PROFILED), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
