//! Profiles written by the profiler itself (`profile::dump_on`, `POOLALLOC_PROF_*`): at new peaks
//! of the live bytes, on `SIGUSR2`, every N seconds, each a numbered file that parses as a pprof
//! profile holding what is live; and their caps (issue 41): a period too long for `Instant`
//! saturates, a minimum gap and a most count bound them, a name planted ahead is passed over.
//! Runs in `main` (no test harness): one thread allocates, so the peaks are the test's; the
//! environment's form runs in a child process (this binary again).

use poolalloc::profile::{self, Config, Dumps};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use poolalloc_test_support::{child, pprof};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const MIB: usize = 1 << 20;

/// Keeps `bytes` more in 1 KiB blocks.
#[inline(never)]
fn grow_by(bytes: usize, keep: &mut Vec<Box<[u8]>>) {
    for _ in 0..bytes / 1024 {
        keep.push(vec![7u8; 1024].into_boxed_slice());
    }
}

/// Waits (up to 10 s: a loaded machine) until the profiler wrote `n` numbered profiles.
fn wait_for(n: usize, what: &str) {
    let t = Instant::now();
    while profile::dumps_written() < n {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: {} profiles written, waited for {n}",
            profile::dumps_written()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The numbered profile `seq` of this process, checked: a pprof file whose live bytes in
/// `grow_by` are within 10% of `live` (every allocation is sampled here; `grow_by`'s vector adds
/// its buffer).
fn check(prefix: &str, pid: u32, seq: usize, live: usize) -> PathBuf {
    check_within(prefix, pid, seq, live, live)
}

/// [`check`] for a profile taken while `grow_by` ran: its live bytes are from 10% below `lo`
/// to 10% above `hi`.
fn check_within(prefix: &str, pid: u32, seq: usize, lo: usize, hi: usize) -> PathBuf {
    let path = PathBuf::from(format!("{prefix}.{pid}.{seq}.pb.gz"));
    assert!(path.exists(), "{} missing", path.display());
    let p = pprof::read(&path);
    let got = p.total("grow_by", "inuse_space");
    assert!(
        got >= 0.9 * lo as f64 && got <= 1.1 * hi as f64,
        "{}: {got} live bytes in grow_by, expected {lo} to {hi}",
        path.display()
    );
    path
}

/// In a child: waits for two numbered profiles written after `grow_by(2 MiB)` returned (a
/// profile due sooner, on a slow machine, may hold less), and checks that each holds the 2 MiB.
/// `first` is the number of the first profile the child writes (past names planted ahead).
fn two_after_growth(prefix: &str, first: usize) {
    let n0 = profile::dumps_written();
    wait_for(n0 + 2, "two profiles after the growth");
    for seq in first + n0..first + n0 + 2 {
        let at = format!("{prefix}.{}.{seq}.pb.gz", std::process::id());
        let p = pprof::read(Path::new(&at));
        let got = p.total("grow_by", "inuse_space");
        assert!(got >= (2 * MIB) as f64 * 0.9, "{at}: {got} live bytes");
    }
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("profile-on-demand")
}

/// The child (`child::enter`): started with POOLALLOC_PROF and POOLALLOC_PROF_EVERY_S=1 by the
/// parent (the minimum gap at its default, 1 s); keeps 2 MiB until two profiles hold it (about
/// 2 s: a period each).
fn child() {
    let prefix = std::env::var("POOLALLOC_PROF").unwrap();
    let mut keep = Vec::new();
    grow_by(2 * MIB, &mut keep);
    two_after_growth(&prefix, 1);
    drop(keep);
}

/// The child "plant": started like "env"; puts a file of its own at the first numbered
/// profile's name and a symbolic link at the second's, as whoever guesses the pid would, then
/// waits for two profiles: they pass both names over (numbers 3 and 4 on), leave them as they
/// were, and still come.
fn plant_child() {
    let prefix = std::env::var("POOLALLOC_PROF").unwrap();
    let pid = std::process::id();
    let at = |seq: usize| format!("{prefix}.{pid}.{seq}.pb.gz");
    std::fs::write(at(1), b"the planter's own file").unwrap();
    let target = format!("{prefix}.target");
    std::fs::write(&target, b"not to be written").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&target, at(2)).unwrap();
    let mut keep = Vec::new();
    grow_by(2 * MIB, &mut keep);
    two_after_growth(&prefix, 3);
    assert_eq!(std::fs::read(at(1)).unwrap(), b"the planter's own file");
    assert_eq!(std::fs::read(&target).unwrap(), b"not to be written");
    drop(keep);
}

/// Sends SIGUSR2 to this process.
fn signal(pid: u32) {
    let kill = std::process::Command::new("kill")
        .args(["-USR2", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

fn main() {
    child::enter(|case| match case {
        "plant" => plant_child(),
        _ => child(),
    });
    // A fresh folder: profiles of an earlier run must not count.
    let _ = std::fs::remove_dir_all(dir());
    std::fs::create_dir_all(dir()).unwrap();
    let pid = std::process::id();
    let prefix = dir().join("run").to_str().unwrap().to_owned();
    profile::start(Config {
        interval: 0,
        seed: 1,
    })
    .unwrap();

    // Bad settings are refused.
    let bad = |d: Dumps| assert!(profile::dump_on(&d).is_err(), "{d:?} accepted");
    bad(Dumps {
        prefix: String::new(),
        every: Some(Duration::from_secs(1)),
        ..Default::default()
    });
    bad(Dumps {
        prefix: prefix.clone(),
        peak_factor: Some(1.0),
        ..Default::default()
    });

    // Peaks: the first at 1.5 MiB live, the next at 1.5 times the live bytes at the first. The
    // first 2 MiB grow before the peaks are armed, so the first dump holds all of them and the
    // next is due at 3 MiB exactly (a dump taken while they grew could hold 1.5 MiB, and move
    // the next peak below 2.5 MiB).
    let mut keep = Vec::new();
    grow_by(2 * MIB, &mut keep);
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        peak_factor: Some(1.5),
        ..Default::default()
    })
    .unwrap();
    wait_for(1, "the first peak");
    check(&prefix, pid, 1, 2 * MIB);
    grow_by(MIB / 2, &mut keep); // 2.5 MiB: below 1.5 x 2 MiB
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(profile::dumps_written(), 1, "a dump below the factor");
    grow_by(MIB, &mut keep); // 3.5 MiB
    wait_for(2, "the second peak");
    // Due from 3 MiB on, while the last MiB grows (or later: the minimum gap, 1 s after the
    // first, may defer it).
    let live = 3 * MIB + MIB / 2;
    check_within(&prefix, pid, 2, 3 * MIB, live);

    // The signal (the peak dumps off).
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        on_signal: true,
        ..Default::default()
    })
    .unwrap();
    signal(pid);
    wait_for(3, "SIGUSR2");
    let signalled = check(&prefix, pid, 3, live);

    // Every second (the signal still on).
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        on_signal: true,
        every: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .unwrap();
    wait_for(5, "every second");
    check(&prefix, pid, 5, live);

    // A period too long for `Instant` saturates: the thread lives on, and the signal still
    // dumps (it panicked on `Instant + Duration`).
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        on_signal: true,
        every: Some(Duration::MAX),
        min_gap: Some(Duration::ZERO),
        ..Default::default()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the thread takes the new period
    let w = profile::dumps_written();
    signal(pid);
    wait_for(w + 1, "SIGUSR2 with a period of Duration::MAX");

    // The minimum gap: a signal within it makes a profile only once it passed.
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        on_signal: true,
        min_gap: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .unwrap();
    signal(pid);
    wait_for(w + 2, "SIGUSR2 with a gap of 1 s");
    let t = Instant::now();
    signal(pid);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(profile::dumps_written(), w + 2, "a profile within the gap");
    wait_for(w + 3, "the profile the gap deferred");
    assert!(
        t.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );

    // The most count: one more, then none.
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        on_signal: true,
        min_gap: Some(Duration::ZERO),
        max_dumps: Some(w + 4),
        ..Default::default()
    })
    .unwrap();
    signal(pid);
    wait_for(w + 4, "SIGUSR2 below the most count");
    for _ in 0..2 {
        signal(pid);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            profile::dumps_written(),
            w + 4,
            "a profile past the most count"
        );
    }
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        ..Default::default()
    })
    .unwrap();
    drop(keep);

    // The environment's form, in a child: numbered profiles every second besides the exit's.
    let child_prefix = dir().join("env").to_str().unwrap().to_owned();
    let out = child::command("env")
        .env("POOLALLOC_PROF", &child_prefix)
        .env("POOLALLOC_PROF_INTERVAL", "0")
        .env("POOLALLOC_PROF_EVERY_S", "1")
        .output()
        .unwrap();
    assert!(
        child::returned(&out.status),
        "child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut numbered = 0;
    for e in std::fs::read_dir(dir()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.starts_with("env.") && name.ends_with(".pb.gz") {
            let parts: Vec<&str> = name.split('.').collect();
            // env.<pid>.pb.gz at exit; env.<pid>.<seq>.pb.gz numbered.
            // Each parses; the child checked that two of them hold its 2 MiB (one taken while
            // they grew may hold less).
            if parts.len() == 5 {
                numbered += 1;
                pprof::read(&dir().join(&name));
            }
        }
    }
    assert!(numbered >= 2, "{numbered} numbered profiles from the child");

    // Names planted ahead are passed over, in a child ("plant").
    let out = child::command("plant")
        .env("POOLALLOC_PROF", dir().join("plant").to_str().unwrap())
        .env("POOLALLOC_PROF_INTERVAL", "0")
        .env("POOLALLOC_PROF_EVERY_S", "1")
        .output()
        .unwrap();
    assert!(
        child::returned(&out.status),
        "plant child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "ok: peaks, SIGUSR2, every second, the caps, the environment's form and planted names; \
         read {}",
        signalled.display()
    );
}
