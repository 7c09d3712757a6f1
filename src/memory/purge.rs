//! Purging, in one place: one policy (the purge delay: memory freed and not reused for that long
//! goes back to the OS) for chunk memory and span memory alike, applied by one background thread
//! started from here alone ([`running`]), and [`trim`], which applies it with a delay of zero.
//! Every period the thread reaps abandoned chunks whose blocks were freed and gives back the empty
//! chunks that waited the delay (`chunk_lists::purge_expired`), then the freed spans that waited it
//! (`span::expire`: the arenas' dirty runs, freed spans cut from them, decommitted; the mappings
//! of their own in the span cache, to the OS). The layers below know nothing
//! of the thread: each is told by its caller whether the purger runs.
//!
//! It also keeps the memory promise for `PoolAlloc`'s large blocks, which the system allocator
//! holds: glibc keeps freed blocks in its arenas (only the top of a heap above a threshold goes
//! back), so a program that freed 140 MB of buffers on worker threads that stay alive keeps most
//! of it resident. Once large blocks were freed and none has been for the purge delay, the purger
//! asks the system allocator to return its free pages (`os::trim_system_allocator`, glibc's
//! `malloc_trim`; nothing where there is no such call). Only then: a trim walks every arena, and
//! pages given back fault in again when the program allocates there.
//!
//! The thread is a plain OS thread (`os::spawn_purger`: no Rust runtime, nothing allocated through
//! us), started the first time an empty chunk would wait for it; if it cannot be started, empty
//! chunks beyond the retained ones go back at once. A delay of zero never starts it. The delay is a
//! setting (`settings.rs`: `POOLALLOC_PURGE_DELAY_MS`, `set_purge_delay`).

use crate::memory::{chunk_lists, span};
use crate::{base::settings, os};
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// 0: not started; 1: running; 2: could not be started.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Set when a large block went back to the system allocator since the purger last looked.
static SYSTEM_FREED: AtomicBool = AtomicBool::new(false);

/// Notes that a large block went back to the system allocator (the caller then makes sure the
/// purger runs): once none has for the purge delay, the system allocator is trimmed. A load, and a
/// store only when the flag was clear.
#[inline]
pub fn note_system_free() {
    if !SYSTEM_FREED.load(Ordering::Relaxed) {
        SYSTEM_FREED.store(true, Ordering::Relaxed);
    }
}

/// Whether freed memory may wait for the purger: the delay is not zero and the purger runs
/// (started here if it was not yet). Called where memory is given up: an empty chunk, an
/// abandoned one, a freed span or large block.
pub fn running() -> bool {
    if settings::purge_delay_ms() == 0 {
        return false;
    }
    match STATE.load(Ordering::Acquire) {
        1 => true,
        2 => false,
        _ => start(),
    }
}

#[cold]
fn start() -> bool {
    if STATE
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return STATE.load(Ordering::Acquire) == 1;
    }
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
    // When the last period that saw a large block go back to the system allocator ended, if the
    // system allocator has not been trimmed since.
    let mut system_freed_at: Option<u32> = None;
    loop {
        let delay_ms = settings::purge_delay_ms();
        os::sleep_ms((delay_ms / 2).clamp(10, 100));
        // The settings bound the delay to a day; saturate rather than truncate all the same (a
        // truncated 2^32 ms was 0: a purge at every tick).
        let delay = u32::try_from(delay_ms).unwrap_or(u32::MAX);
        let now = os::now_ms();
        tick(now, delay);
        if SYSTEM_FREED.swap(false, Ordering::Relaxed) {
            system_freed_at = Some(now);
        } else if system_freed_at.is_some_and(|t| now.wrapping_sub(t) >= delay) {
            system_freed_at = None;
            os::trim_system_allocator();
        }
    }
}

/// One period: the chunks, then the spans (the arenas' dirty runs, and the mappings in the span
/// cache), that waited `delay_ms` at `now` go back.
fn tick(now: u32, delay_ms: u32) {
    chunk_lists::purge_expired(now, delay_ms);
    span::expire(now, delay_ms);
}

/// Everything that can go back now, whatever its wait: abandoned chunks that became empty, every
/// empty chunk and free chunk kept in a huge page (where memory can go back at all), every
/// waiting span.
pub fn trim() {
    chunk_lists::trim();
    span::expire(os::now_ms(), 0);
}

/// In a forked child: the purger thread does not exist there; the next empty chunk starts one.
pub fn forget_after_fork() {
    STATE.store(0, Ordering::Relaxed);
}
