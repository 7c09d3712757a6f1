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

/// Waits (up to 5 s) until the profiler wrote `n` numbered profiles.
fn wait_for(n: usize, what: &str) {
    let t = Instant::now();
    while profile::dumps_written() < n {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{what}: {} profiles written, waited for {n}",
            profile::dumps_written()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The numbered profile `seq` of this process, checked: a pprof file whose live bytes in
/// `grow_by` are within 10% of `live` (every allocation is sampled here: exact but for the
/// blocks allocated between the dump's look and its copy).
fn check(prefix: &str, pid: u32, seq: usize, live: usize) -> PathBuf {
    let path = PathBuf::from(format!("{prefix}.{pid}.{seq}.pb.gz"));
    assert!(path.exists(), "{} missing", path.display());
    let p = pprof::read(&path);
    let got = p.total("grow_by", "inuse_space");
    assert!(
        (got - live as f64).abs() <= 0.1 * live as f64,
        "{}: {got} live bytes in grow_by, expected about {live}",
        path.display()
    );
    path
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("profile-on-demand")
}

/// The child (`child::enter`): started with POOLALLOC_PROF and POOLALLOC_PROF_EVERY_S=1 by the
/// parent; keeps 2 MiB and lives 2.5 s.
fn child() {
    let mut keep = Vec::new();
    grow_by(2 * MIB, &mut keep);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        profile::dumps_written() >= 2,
        "{}",
        profile::dumps_written()
    );
    drop(keep);
}

/// The child "plant": started like "env"; puts a file of its own at the first numbered
/// profile's name and a symbolic link at the second's, as whoever guesses the pid would, then
/// lives 2.5 s: the profiles pass both over, leave them as they were, and still come.
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
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        profile::dumps_written() >= 2,
        "{} profiles written past the planted names",
        profile::dumps_written()
    );
    assert_eq!(std::fs::read(at(1)).unwrap(), b"the planter's own file");
    assert_eq!(std::fs::read(&target).unwrap(), b"not to be written");
    for seq in [3, 4] {
        let p = pprof::read(Path::new(&at(seq)));
        assert!(p.total("grow_by", "inuse_space") >= (2 * MIB) as f64 * 0.9);
    }
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

    // Peaks: the first at 1.5 MiB live, the next at 1.5 times that.
    profile::dump_on(&Dumps {
        prefix: prefix.clone(),
        peak_factor: Some(1.5),
        ..Default::default()
    })
    .unwrap();
    let mut keep = Vec::new();
    grow_by(2 * MIB, &mut keep);
    wait_for(1, "the first peak");
    check(&prefix, pid, 1, 2 * MIB);
    grow_by(MIB / 2, &mut keep); // 2.5 MiB: below 1.5 x 2 MiB
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(profile::dumps_written(), 1, "a dump below the factor");
    grow_by(MIB, &mut keep); // 3.5 MiB
    wait_for(2, "the second peak");
    check(&prefix, pid, 2, 3 * MIB + MIB / 2);
    let live = 3 * MIB + MIB / 2;

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
            if parts.len() == 5 {
                numbered += 1;
                let p = pprof::read(&dir().join(&name));
                assert!(p.total("grow_by", "inuse_space") >= (2 * MIB) as f64 * 0.9);
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
