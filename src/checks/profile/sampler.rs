//! When to sample: TCMalloc's scheme. Each thread counts down the bytes it allocates from a
//! distance drawn from an exponential distribution of mean `interval`; the allocation that takes
//! the count below zero is sampled, and a new distance is drawn. Allocated bytes thus meet sample
//! points as a Poisson process: a block of `s` bytes is sampled with probability
//! `1 - exp(-s / interval)`, and recording it with the inverse of that as its weight makes every
//! estimate (blocks, bytes, per stack) unbiased, large blocks included.
//!
//! The fast path ([`on_alloc`]) is one subtract and one branch on a thread-local word. Everything
//! else happens in [`sample`]: while the profiler is stopped it only resets the countdown (to
//! [`IDLE_INTERVAL`], so a thread notices a `start` soon); while it runs it walks the stack
//! (without allocating: `backtrace`'s unsynchronized trace) and records the block.
//!
//! Re-entrance: the unwinder may allocate (and a dump does); a per-thread `busy` flag makes every
//! allocation made meanwhile an ordinary, unsampled one.
//!
//! The thread-local words are `thread_local!` with constant initialisers and no destructor: on
//! the platforms the profiler runs on (64-bit Linux, macOS, FreeBSD) that is plain TLS, which
//! never allocates. (On windows-gnu it allocates through the global allocator, so the profiler is
//! not compiled there: `start` returns [`Error::Unsupported`](super::Error::Unsupported).)

use super::table::{self, MAX_FRAMES};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Bytes a thread allocates between two looks at whether the profiler was started.
const IDLE_INTERVAL: isize = 64 * 1024;

/// Whether the profiler samples now.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Bumped by every `start`: a thread whose epoch differs draws a fresh countdown.
static EPOCH: AtomicU32 = AtomicU32::new(0);
/// The mean distance between samples, in bytes (0: every allocation).
static INTERVAL: AtomicUsize = AtomicUsize::new(0);
/// The seed of the threads' generators (0: from the OS), and how many threads took one.
static SEED: AtomicU64 = AtomicU64::new(0);
static THREADS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Bytes left before the next sample (below zero: take the slow path).
    static COUNTDOWN: Cell<isize> = const { Cell::new(0) };
    /// The epoch this thread's countdown was drawn in.
    static MY_EPOCH: Cell<u32> = const { Cell::new(0) };
    /// This thread is inside the profiler: its allocations are not sampled.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// This thread's xorshift state.
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// Counts an allocation of `size` bytes at `p` (null: failed) against this thread's countdown.
#[inline(always)]
pub fn on_alloc(p: *mut u8, size: usize) {
    let left = COUNTDOWN.with(|c| {
        let n = c.get().wrapping_sub(size as isize);
        c.set(n);
        n
    });
    if left < 0 {
        sample(p, size);
    }
}

/// A block at `p` is being freed: drops its record if it was sampled.
#[inline(always)]
pub fn on_free(p: *mut u8) {
    table::forget(p);
}

/// Whether a free must call [`on_free`] (the profiler ever recorded a block).
#[inline(always)]
pub fn armed() -> bool {
    table::armed()
}

/// Starts sampling one allocation per `interval` bytes on average (0: every allocation).
pub fn start(interval: usize, seed: u64) {
    INTERVAL.store(interval, Relaxed);
    SEED.store(seed, Relaxed);
    THREADS.store(0, Relaxed);
    EPOCH.fetch_add(1, Relaxed);
    RUNNING.store(true, Relaxed);
    // The calling thread starts at once; others within IDLE_INTERVAL bytes.
    COUNTDOWN.with(|c| c.set(-1));
}

pub fn stop() {
    RUNNING.store(false, Relaxed);
}

pub fn running() -> bool {
    RUNNING.load(Relaxed)
}

pub fn interval() -> usize {
    INTERVAL.load(Relaxed)
}

/// Marks this thread busy until the guard goes (nothing it allocates meanwhile is sampled).
pub struct Busy(bool);

impl Busy {
    pub fn enter() -> Busy {
        Busy(BUSY.with(|b| b.replace(true)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(self.0));
    }
}

fn next_random() -> u64 {
    RNG.with(|r| {
        // xorshift64*
        let mut x = r.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// A distance to the next sample: exponential with mean `interval`.
fn draw(interval: usize) -> isize {
    if interval == 0 {
        return 0;
    }
    // u in (0, 1], so ln(u) is finite.
    let u = ((next_random() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let d = -u.ln() * interval as f64;
    d.min((isize::MAX / 2) as f64) as isize
}

/// The countdown ran out (or this thread has not looked at the profiler lately).
#[cold]
#[inline(never)]
fn sample(p: *mut u8, size: usize) {
    if BUSY.with(|b| b.get()) {
        return; // the count stays below zero: the next allocation after the guard comes back here
    }
    if !RUNNING.load(Relaxed) {
        COUNTDOWN.with(|c| c.set(IDLE_INTERVAL));
        return;
    }
    let interval = INTERVAL.load(Relaxed);
    let epoch = EPOCH.load(Relaxed);
    if MY_EPOCH.with(|e| e.replace(epoch)) != epoch {
        // First look since `start`: seed, and place this thread's first sample point.
        let seed = match SEED.load(Relaxed) {
            0 => crate::os::random_seed()[0] as u64,
            s => s ^ THREADS.fetch_add(1, Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        RNG.with(|r| r.set(seed | 1));
        let left = draw(interval).saturating_sub(size as isize);
        COUNTDOWN.with(|c| c.set(left));
        if left >= 0 {
            return;
        }
    }
    // Memoryless: the distance from this block's end to the next sample point is a fresh draw.
    COUNTDOWN.with(|c| c.set(draw(interval)));
    if p.is_null() {
        return;
    }
    let _busy = Busy::enter();
    let mut frames = [0usize; MAX_FRAMES];
    let mut depth = 0;
    // SAFETY: `trace_unsynchronized` is unsafe only because it skips the crate's lock, which
    // serialises Windows' dbghelp; here (Unix) the unwinder, `_Unwind_Backtrace`, is thread-safe.
    // The closure only stores frame addresses into the array on our stack.
    unsafe {
        backtrace::trace_unsynchronized(|f| {
            let ip = f.ip() as usize;
            if ip == 0 {
                return false; // the outermost frame's caller: none
            }
            frames[depth] = ip;
            depth += 1;
            depth < MAX_FRAMES
        })
    };
    if depth == 0 {
        frames[0] = 0;
        depth = 1;
    }
    // The probability a block of `size` bytes is sampled; its inverse is the block's weight.
    let weight = if interval == 0 {
        1.0
    } else {
        let p = -(-(size as f64) / interval as f64).exp_m1();
        1.0 / p
    };
    table::insert(p as usize, size, weight, &frames[..depth]);
}
