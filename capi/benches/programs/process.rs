//! Running a process and measuring it: wall-clock time, CPU time and peak RSS from `wait4`.

use super::Alloc;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// What a process that ran to its end gave.
pub struct Finished {
    /// Wall-clock seconds from start to end.
    pub secs: f64,
    /// User + system seconds, children included.
    pub cpu: f64,
    /// Peak RSS in bytes (`ru_maxrss`: the process's or a waited-for descendant's).
    pub maxrss: u64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `cmd` to its end with stdout and stderr in files of `scratch` and stdin from `stdin` (or
/// nothing), and measures it with `wait4`. Panics, naming `what`, if it does not exit with 0 or
/// if the dynamic linker refused a preloaded library.
pub fn run(what: &str, cmd: &mut Command, stdin: Option<&Path>, scratch: &Path) -> Finished {
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    cmd.stdout(File::create(&out_path).expect("cannot create a scratch file"))
        .stderr(File::create(&err_path).expect("cannot create a scratch file"))
        .stdin(match stdin {
            Some(p) => Stdio::from(
                File::open(p).unwrap_or_else(|e| panic!("cannot open {}: {e}", p.display())),
            ),
            None => Stdio::null(),
        });
    let start = Instant::now();
    // Reaped by `wait4` below, which also gives the resource usage `Child::wait` would not.
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    let (status, usage) = wait4(&child);
    let secs = start.elapsed().as_secs_f64();
    let stdout = std::fs::read(&out_path).unwrap();
    let stderr = std::fs::read(&err_path).unwrap();
    let fine = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    assert!(
        fine,
        "{what} failed (wait status {status:#x}, {}):\nstdout (end):\n{}\nstderr (end):\n{}",
        describe_status(status),
        tail(&stdout),
        tail(&stderr)
    );
    check_preload_errors(what, &stderr);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Finished {
        secs,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        maxrss: usage.ru_maxrss as u64 * 1024,
        stdout,
        stderr,
    }
}

/// Waits for `child` (which nobody has waited for) and returns its wait status and resource usage.
fn wait4(child: &Child) -> (i32, libc::rusage) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (a struct of integers).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is a child of this process that has not been reaped (`Child::wait` is
        // never called on it), and `status` and `usage` are valid, writable, exclusively borrowed
        // locals for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return (status, usage);
        }
        let e = std::io::Error::last_os_error();
        assert!(
            e.kind() == std::io::ErrorKind::Interrupted,
            "wait4({pid}) failed: {e}"
        );
    }
}

fn describe_status(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else {
        "stopped".into()
    }
}

/// The last 30 lines of `b`, for messages.
pub fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Panics, naming `what`, if the dynamic linker said it could not preload the library.
pub fn check_preload_errors(what: &str, stderr: &[u8]) {
    let s = String::from_utf8_lossy(stderr);
    assert!(
        !s.contains("cannot be preloaded"),
        "{what}: the dynamic linker did not preload the allocator:\n{s}"
    );
}

/// Puts the allocator `a` in place for `cmd` (`LD_PRELOAD`).
pub fn with_alloc(cmd: &mut Command, a: &Alloc) {
    cmd.env("LD_PRELOAD", &a.preload);
}
