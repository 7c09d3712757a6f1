//! Profiles the profiler writes by itself, besides [`dump`](super::dump) calls and the exit dump:
//! each time the live bytes reach a new peak by a set factor, on `SIGUSR2`, and every N seconds
//! (`profile::dump_on`, or `POOLALLOC_PROF_PEAK`, `POOLALLOC_PROF_SIGNAL`,
//! `POOLALLOC_PROF_EVERY_S`). Each is `<prefix>.<pid>.<seq>.pb.gz`, `seq` counting from 1 and
//! passing over a name that exists. At most `POOLALLOC_PROF_MAX_DUMPS` of them, at least
//! `POOLALLOC_PROF_MIN_GAP_MS` apart: whoever may signal the process cannot fill its disk.
//!
//! A thread of its own (`poolalloc-prof`, started at the first of them) looks every [`POLL_MS`]
//! and writes the dumps: the signal handler only sets a flag, and the live bytes are the profile's
//! own estimate (kept with the records), so nothing runs in an allocating thread or in the
//! handler. A peak that lasts less than the poll period can be missed.

use super::{Error, table};
use crate::{base::settings, os};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::io::ErrorKind;
use std::time::{Duration, Instant};

/// How often the thread looks.
pub const POLL_MS: u64 = 50;
/// The live bytes the first peak dump is measured against.
const FIRST_PEAK: f64 = (1 << 20) as f64;

/// Set by the `SIGUSR2` handler.
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// Whether the handler is installed.
static SIGNAL_WATCHED: AtomicBool = AtomicBool::new(false);
/// Numbered profiles written so far.
static WRITTEN: AtomicUsize = AtomicUsize::new(0);
/// The number the next profile tries first (written by the thread only).
static NEXT: AtomicUsize = AtomicUsize::new(1);
/// Names a profile tries before it gives up (the next one starts past them).
const TRIES: usize = 64;
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

/// The thread's body: look every `POLL_MS`, write what is due, no sooner than the minimum gap
/// after the last one.
fn run() {
    let mut peak_base = FIRST_PEAK;
    let mut last_every = 0;
    // When the next periodic dump is due; None: never (a period past what `Instant` holds).
    let mut next_at = Some(Instant::now());
    // A dump is due and waits for the gap.
    let mut due = false;
    let mut last_dump: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        let (peak_milli, _, every_s) = settings::prof_dumps();
        let now = Instant::now();
        let period = Duration::from_secs(every_s as u64);
        due |= SIGNALLED.swap(false, Relaxed);
        if every_s != last_every {
            // A new period counts from now.
            last_every = every_s;
            next_at = now.checked_add(period);
        } else if every_s != 0 && next_at.is_some_and(|t| now >= t) {
            due = true;
            next_at = next_at
                .and_then(|t| t.checked_add(period))
                .filter(|&t| t >= now)
                .or_else(|| now.checked_add(period));
        }
        if peak_milli != 0 {
            let live = table::live_bytes();
            if live >= peak_base * peak_milli as f64 / 1000.0 {
                due = true;
                peak_base = live;
            }
        }
        let (max, gap_ms) = settings::prof_dump_cap();
        let gap = Duration::from_millis(gap_ms as u64);
        if due && last_dump.is_none_or(|t| now.duration_since(t) >= gap) {
            due = false;
            last_dump = Some(now);
            write(max);
        }
    }
}

/// Writes the next numbered profile unless `max` were written (said once on stderr), at the
/// first free name from [`NEXT`] on; a failure is one line on stderr.
fn write(max: usize) {
    static CAPPED: AtomicBool = AtomicBool::new(false);
    let written = WRITTEN.load(Relaxed);
    if written >= max {
        if !CAPPED.swap(true, Relaxed) {
            settings::say(format_args!(
                "{written} numbered profiles written, the most allowed \
                 (POOLALLOC_PROF_MAX_DUMPS): no more"
            ));
        }
        return;
    }
    let mut prefix = [0u8; settings::PROF_PREFIX_MAX];
    let n = settings::prof_prefix(&mut prefix);
    if n == 0 {
        return;
    }
    let prefix = String::from_utf8_lossy(&prefix[..n]);
    let bytes = match super::encode() {
        Ok(b) => b,
        Err(e) => return settings::say(format_args!("profile not written: {e}")),
    };
    let pid = std::process::id();
    let first = NEXT.load(Relaxed);
    for seq in first..first + TRIES {
        let path = format!("{prefix}.{pid}.{seq}.pb.gz");
        let result = super::create_new(path.as_ref())
            .map_err(Error::Io)
            .and_then(|f| super::gzip_to(&bytes, f));
        match result {
            Ok(()) => {
                NEXT.store(seq + 1, Relaxed);
                WRITTEN.store(written + 1, Relaxed);
                return;
            }
            // Someone's file or link: pass it over for good.
            Err(Error::Io(e)) if e.kind() == ErrorKind::AlreadyExists => {
                NEXT.store(seq + 1, Relaxed);
            }
            Err(e) => return settings::say(format_args!("profile not written to {path}: {e}")),
        }
    }
    settings::say(format_args!(
        "profile not written: {prefix}.{pid}.{first}.pb.gz to .{}.pb.gz exist",
        first + TRIES - 1
    ));
}
