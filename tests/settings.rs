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
    let default = if cfg!(all(target_os = "linux", target_env = "musl")) {
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

#[test]
fn show_stats_prints_the_snapshot_at_exit_and_verbose_the_settings() {
    let (_, err) = run(&[("POOLALLOC_SHOW_STATS", "1"), ("POOLALLOC_VERBOSE", "on")]);
    assert!(err.contains("poolalloc: stats at exit"), "{err}");
    assert!(err.contains("backend: "), "{err}");
    assert!(
        err.contains("poolalloc: settings: purge delay 250 ms, retained chunks 1, show stats true"),
        "{err}"
    );
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
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let profiled = cfg!(all(
        feature = "profiling",
        target_pointer_width = "64",
        any(
            target_os = "linux",
            target_os = "macos",
            target_os = "freebsd"
        )
    ));
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
