//! Profiles the profiler writes by itself, besides [`dump`](super::dump) calls and the exit dump:
//! each time the live bytes reach a new peak by a set factor, on `SIGUSR2`, and every N seconds
//! (`profile::dump_on`, or `POOLALLOC_PROF_PEAK`, `POOLALLOC_PROF_SIGNAL`,
//! `POOLALLOC_PROF_EVERY_S`). Each is `<prefix>.<pid>.<seq>.pb.gz`, `seq` counting from 1.
//!
//! A thread of its own (`poolalloc-prof`, started at the first of them) looks every [`POLL_MS`]
//! and writes the dumps: the signal handler only sets a flag, and the live bytes are the profile's
//! own estimate (kept with the records), so nothing runs in an allocating thread or in the
//! handler. A peak that lasts less than the poll period can be missed.

use super::table;
use crate::{base::settings, os};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How often the thread looks.
pub const POLL_MS: u64 = 50;
/// The live bytes the first peak dump is measured against.
const FIRST_PEAK: f64 = (1 << 20) as f64;

/// Set by the `SIGUSR2` handler.
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// Whether the handler is installed.
static SIGNAL_WATCHED: AtomicBool = AtomicBool::new(false);
/// Numbered profiles written so far (the last one's number).
static WRITTEN: AtomicUsize = AtomicUsize::new(0);
/// Whether the thread was started (true) or could not be (false).
static THREAD: spin::Once<bool> = spin::Once::new();

/// Makes the settings in force take effect: installs the signal handler if they ask for it and
/// starts the thread if any of them is on. False when the signal was asked for and the program
/// handles `SIGUSR2` itself, or the thread could not be started (said on stderr).
pub fn arm() -> bool {
    let (peak, signal, every) = settings::prof_dumps();
    let mut ok = true;
    if signal && !SIGNAL_WATCHED.load(Relaxed) {
        if os::watch_user_signal(&SIGNALLED) {
            SIGNAL_WATCHED.store(true, Relaxed);
        } else {
            settings::say(format_args!(
                "the program handles SIGUSR2 (or the OS refused it): no profile on that signal"
            ));
            ok = false;
        }
    }
    if peak == 0 && !signal && every == 0 {
        return ok;
    }
    let started = *THREAD.call_once(|| {
        std::thread::Builder::new()
            .name("poolalloc-prof".into())
            .spawn(run)
            .is_ok()
    });
    if !started {
        settings::say(format_args!(
            "the profiler's dump thread could not be started: no profiles on demand"
        ));
    }
    ok && started
}

/// Numbered profiles written so far.
pub fn written() -> usize {
    WRITTEN.load(Relaxed)
}

/// The thread's body: look every `POLL_MS`, write what is due.
fn run() {
    let mut peak_base = FIRST_PEAK;
    let mut last_every = 0;
    let mut next_at = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        let (peak_milli, _, every_s) = settings::prof_dumps();
        let mut due = SIGNALLED.swap(false, Relaxed);
        if every_s != last_every {
            // A new period counts from now.
            last_every = every_s;
            next_at = Instant::now() + Duration::from_secs(every_s as u64);
        } else if every_s != 0 && Instant::now() >= next_at {
            due = true;
            next_at += Duration::from_secs(every_s as u64);
            if next_at < Instant::now() {
                next_at = Instant::now() + Duration::from_secs(every_s as u64);
            }
        }
        if peak_milli != 0 {
            let live = table::live_bytes();
            if live >= peak_base * peak_milli as f64 / 1000.0 {
                due = true;
                peak_base = live;
            }
        }
        if due {
            write();
        }
    }
}

/// Writes the next numbered profile; a failure is one line on stderr.
fn write() {
    let mut prefix = [0u8; settings::PROF_PREFIX_MAX];
    let n = settings::prof_prefix(&mut prefix);
    if n == 0 {
        return;
    }
    let seq = WRITTEN.load(Relaxed) + 1;
    let path = format!(
        "{}.{}.{seq}.pb.gz",
        String::from_utf8_lossy(&prefix[..n]),
        std::process::id()
    );
    match super::dump_new(&path) {
        Ok(()) => WRITTEN.store(seq, Relaxed),
        Err(e) => settings::say(format_args!("profile not written to {path}: {e}")),
    }
}
