//! Child processes of the death tests (tests/hardened.rs, tests/testing_death.rs,
//! tests/testing_real_crates.rs) and of tests/settings.rs: this test binary re-run, and how an
//! abort looks to the parent on each platform.

use std::process::{Command, ExitStatus};

/// The exit code of a child case that returned without aborting: neither 0 (success), 3 (the C
/// runtime's `abort()` on Windows) nor 101 (a Rust panic).
#[allow(dead_code)]
pub const RETURNED: i32 = 97;

/// A command that runs this test binary again. Under an emulator the binary cannot exec itself (a
/// foreign binary, and containers seldom have binfmt_misc to hand it to qemu-user), so
/// `POOLALLOC_TEST_RUNNER`, when set (by .ci/targets, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`),
/// is the command line the binary is run under, as cargo's runner runs the parent.
pub fn this_binary() -> Command {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var("POOLALLOC_TEST_RUNNER").unwrap_or_default();
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

/// True if `status` is that of a process that aborted: killed by SIGABRT on Unix; on Windows, ended by
/// `__fastfail` (STATUS_STACK_BUFFER_OVERRUN, 0xC0000409: Rust's `std::process::abort` and the
/// Universal CRT's `abort()`) or by msvcrt's `abort()`, which exits with code 3.
#[allow(dead_code)] // tests/settings.rs runs children that must not abort
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
