//! Profiles written by the profiler itself (`profile::dump_on`, `POOLALLOC_PROF_*`): at new peaks
//! of the live bytes, on `SIGUSR2`, every N seconds, each a numbered file that parses as a pprof
//! profile holding what is live. Runs in `main` (no test harness): one thread allocates, so the
//! peaks are the test's; the environment's form runs in a child process (this binary again).

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

fn main() {
    child::enter(|_| child());
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
    let kill = std::process::Command::new("kill")
        .args(["-USR2", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
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
    println!(
        "ok: peaks, SIGUSR2, every second and the environment's form; read {}",
        signalled.display()
    );
}
