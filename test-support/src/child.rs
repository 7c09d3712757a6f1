//! Child processes: a test binary run again to run one case alone, because the case must abort
//! (the death tests of tests/hardened.rs, tests/testing_death.rs, tests/testing_real_crates.rs) or
//! changes the whole process (settings read once in tests/settings.rs, a limit, the profiler's
//! timers in tests/profile_on_demand.rs); and how an abort looks to the parent on each platform.
//!
//! One convention for all of them: the child is this binary again with [`CASE`] naming its case in
//! the environment. The parent starts it with [`test`] (a libtest binary: only the test `entry`
//! runs) or [`command`] (a binary with a `main` of its own); in the child, the entry (or `main`)
//! calls [`enter`], which runs the case and exits with [`RETURNED`]. In the parent `enter` does
//! nothing, so the entry passes there as an empty test.

use std::io::Read;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the case a child runs.
pub const CASE: &str = "POOLALLOC_TEST_CHILD";

/// The exit code of a child whose case returned without aborting: neither 0 (a test binary that
/// ran no test, e.g. an entry misspelled), 3 (the C runtime's `abort()` on Windows) nor 101 (a
/// Rust panic).
pub const RETURNED: i32 = 97;

/// The emulator the test binaries run under, if any: `POOLALLOC_TEST_RUNNER`, set by .ci/targets
/// (e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`), the command line cargo's runner runs them
/// with.
pub fn emulator() -> Option<String> {
    std::env::var("POOLALLOC_TEST_RUNNER")
        .ok()
        .filter(|r| !r.trim().is_empty())
}

/// A command that runs this test binary again. Under an emulator the binary cannot exec itself (a
/// foreign binary, and containers seldom have binfmt_misc to hand it to qemu-user), so it is run
/// under [`emulator`] when one is named, as cargo's runner runs the parent.
pub fn this_binary() -> Command {
    let exe = std::env::current_exe().unwrap();
    let runner = emulator().unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(words).arg(exe);
            c
        }
        None => Command::new(exe),
    }
}

/// This binary again, as the child that runs `case` (for a binary with a `main` of its own, which
/// calls [`enter`]).
pub fn command(case: &str) -> Command {
    let mut c = this_binary();
    c.env(CASE, case);
    c
}

/// This libtest binary again, running only the test `entry` (which calls [`enter`]), as the child
/// that runs `case`.
pub fn test(entry: &str, case: &str) -> Command {
    let mut c = command(case);
    c.args(["--exact", entry, "--nocapture", "--test-threads=1"]);
    c
}

/// The case this process was started to run, if it is a child.
pub fn case() -> Option<String> {
    std::env::var(CASE).ok()
}

/// The child's side: in a child, runs `run` with its case and exits with [`RETURNED`] (whatever
/// else the binary holds does not run); in the parent, nothing.
pub fn enter(run: impl FnOnce(&str)) {
    if let Some(case) = case() {
        run(&case);
        // The C library's `exit`, as a return from `main` ends: it runs the `atexit` handlers
        // (poolalloc's exit hook: the statistics and the profile at exit). On Windows
        // `std::process::exit` calls `ExitProcess`, which skips them.
        unsafe extern "C" {
            fn exit(code: core::ffi::c_int) -> !;
        }
        // SAFETY: `exit` is called once, by the thread that ran the case (no other thread of a
        // child calls it); it ends the process after the handlers, as a return from `main` does.
        unsafe { exit(RETURNED) }
    }
}

/// True if `status` is that of a process that aborted: killed by SIGABRT on Unix; on Windows, ended by
/// `__fastfail` (STATUS_STACK_BUFFER_OVERRUN, 0xC0000409: Rust's `std::process::abort` and the
/// Universal CRT's `abort()`) or by msvcrt's `abort()`, which exits with code 3.
pub fn aborted(status: &ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal() == Some(libc::SIGABRT)
    }
    #[cfg(windows)]
    {
        const STATUS_STACK_BUFFER_OVERRUN: u32 = 0xC000_0409;
        matches!(status.code(), Some(c) if c as u32 == STATUS_STACK_BUFFER_OVERRUN || c == 3)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = status;
        false
    }
}

/// True if `status` is that of a child whose case returned ([`enter`]'s exit).
pub fn returned(status: &ExitStatus) -> bool {
    status.code() == Some(RETURNED)
}

/// How a child's case must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It aborts ([`aborted`]).
    Aborts,
    /// It returns ([`returned`]).
    Returns,
}

/// Runs `case` in a child through the test `entry`. `Ok`: it ended as `ending` says, and this is
/// the first line of its stderr that contains `expect`. `Err`: how it did not, with its stderr.
pub fn expect(entry: &str, case: &str, ending: Ending, expect: &str) -> Result<String, String> {
    let out = match output_within(test(entry, case), HANG) {
        Some(out) => out,
        // qemu-user has been seen to hang for good as a child with live threads ends (CI,
        // 2026-11-28: rayon's pool, the case done, over an hour), which a native run of the same
        // binary never did: under an emulator a hung child is run once more, and says so.
        None if emulator().is_some() => {
            eprintln!(
                "{case}: the child hung under {} for {} s; killed and run again",
                emulator().unwrap_or_default(),
                HANG.as_secs()
            );
            output_within(test(entry, case), HANG).unwrap_or_else(|| {
                panic!("{case}: the child hung twice ({} s each)", HANG.as_secs())
            })
        }
        None => panic!("{case}: the child hung ({} s)", HANG.as_secs()),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ended = match ending {
        Ending::Aborts => aborted(&out.status),
        Ending::Returns => returned(&out.status),
    };
    match stderr.lines().find(|l| l.contains(expect)) {
        Some(line) if ended => Ok(line.to_string()),
        _ => Err(format!(
            "{case}: status {:?}, expected {} with {expect:?} on stderr, stderr:\n{stderr}",
            out.status,
            match ending {
                Ending::Aborts => "an abort",
                Ending::Returns => "a return",
            }
        )),
    }
}

/// How long a child may run before it counts as hung: minutes, where a case takes seconds even
/// under an emulator.
const HANG: Duration = Duration::from_secs(300);

/// Runs `cmd` to its end and collects its output, as `Command::output` does; None when it ran
/// longer than `limit` (it is killed then).
pub fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both pipes drained as the child writes, so that a full pipe never stops it.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

/// [`expect`] for each case, each in a child of its own: prints the line each one was expected to
/// print, and panics naming every case that did not end as expected.
pub fn expect_each<'a>(entry: &str, cases: impl IntoIterator<Item = (&'a str, Ending, &'a str)>) {
    let mut failures = Vec::new();
    for (case, ending, line) in cases {
        match expect(entry, case, ending, line) {
            Ok(line) => eprintln!("{case}: {line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
