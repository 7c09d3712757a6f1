//! The purger: a background thread that, every period, gives expired empty chunks and cached
//! spans back to the OS and reaps abandoned chunks whose blocks were freed. Its work is the chunk
//! source's (`source::tick`, handed in); this file owns the thread and its state.
//!
//! The thread is a plain OS thread (`os::spawn_purger`: no Rust runtime, nothing allocated through
//! us), started the first time an empty chunk would wait for it; if it cannot be started, empty
//! chunks beyond the retained ones go back at once. A delay of zero never starts it. The delay is a
//! setting (`settings.rs`: `POOLALLOC_PURGE_DELAY_MS`, `set_purge_delay`).

use crate::{os, settings};
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

/// 0: not started; 1: running; 2: could not be started.
static STATE: AtomicU8 = AtomicU8::new(0);

/// The work of one period, `tick(now_ms, delay_ms)`, stored before the thread starts.
static TICK: AtomicPtr<()> = AtomicPtr::new(ptr::null_mut());

/// Whether empty chunks may wait for the purger: the delay is not zero and the purger runs
/// (started here, with `tick` as its work, if it was not yet).
pub fn running(tick: fn(u32, u32)) -> bool {
    if settings::purge_delay_ms() == 0 {
        return false;
    }
    match STATE.load(Ordering::Acquire) {
        1 => true,
        2 => false,
        _ => start(tick),
    }
}

#[cold]
fn start(tick: fn(u32, u32)) -> bool {
    if STATE
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return STATE.load(Ordering::Acquire) == 1;
    }
    TICK.store(tick as *mut (), Ordering::Release);
    if !os::spawn_purger(main) {
        STATE.store(2, Ordering::Release);
        settings::anomaly(format_args!(
            "the purger thread could not be started: empty chunks go back to the OS at once"
        ));
        return false;
    }
    true
}

/// The thread's body: sleep half the delay (10 to 100 ms), then one tick, for ever.
fn main() {
    // SAFETY: TICK holds the `fn(u32, u32)` start stored before spawning this thread.
    let tick: fn(u32, u32) =
        unsafe { core::mem::transmute::<*mut (), fn(u32, u32)>(TICK.load(Ordering::Acquire)) };
    loop {
        let delay = settings::purge_delay_ms();
        os::sleep_ms((delay / 2).clamp(10, 100));
        tick(os::now_ms(), delay as u32);
    }
}

/// In a forked child: the purger thread does not exist there; the next empty chunk starts one.
pub fn forget_after_fork() {
    STATE.store(0, Ordering::Relaxed);
}
