//! Freed spans of their own mappings waiting for reuse (`span.rs`'s cache: blocks above the arenas'
//! longest run, and blocks grown out of the size classes, which `mremap` grows; a span cut from
//! an arena waits in its arena instead, dirty: `arena::give`), kept by address and size: a request takes
//! the smallest waiting span that holds it, cut to its size (the rest waits on), and a span freed
//! next to a waiting piece of the same mapping joins it; a block that grows takes the waiting piece
//! just after its span, in place. So a program that frees a 4 MiB buffer and builds the next one
//! by doubling from 64 KiB reuses the same resident pages all the way up, with no system call and
//! no fault (jemalloc's extents: best fit, split and coalesce; mimalloc's purge delay).
//!
//! Pieces join only when they come from one mapping (the same `origin`): a span never spans two
//! of the kernel's mappings, so it can always be moved or grown by one `mremap`. Where the OS
//! cannot unmap part of a mapping (Windows releases whole reservations only: `os::PARTIAL_UNMAP`
//! is false) a span of its own mapping is never cut or joined: a request takes a whole waiting
//! span of nearly its size ([`Origin::cuttable`]).
//!
//! What waits is bounded twice: in bytes, by a budget that follows the live spans' bytes (at
//! least `MIN_BYTES`, so a small program keeps a few spans; a big one as much as it has live, so
//! a server cycling large buffers keeps its working set), the spans that waited longest going
//! first; and in time, by the purge delay: the purger unmaps what waited longer ([`expire`]), so
//! RSS falls within a second of the program going idle.

use crate::base::lock::{Lock, Rank};
use crate::chunks::addr_map::Kind;
use crate::memory::arena::{self, Origin};
use crate::{checks::hardened, os};
use core::mem::MaybeUninit;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Waiting spans (pieces), at most.
const ENTRIES: usize = 128;
/// Bytes of freed spans that may always wait: they are resident while they wait (64 MiB made
/// python3's peak RSS 1.17x the best peer's; with 8 MiB a redis MSET of ten 50 KB values, which
/// cycles ~20 spans plus its query buffer per request, fell to 0.66x the best peer's rate).
const MIN_BYTES: usize = 16 << 20;
/// Bytes that may wait, at most, however much is live.
const MAX_BYTES: usize = 1 << 30;

/// The bytes of live spans (their whole lengths): the budget follows them.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Counts `grown` bytes more, `shrunk` bytes fewer, of live spans.
#[inline]
pub fn live_change(grown: usize, shrunk: usize) {
    if grown >= shrunk {
        LIVE.fetch_add(grown - shrunk, Relaxed);
    } else {
        LIVE.fetch_sub(shrunk - grown, Relaxed);
    }
}

/// What may wait once `freeing` more bytes were given back: as much as was live before they were
/// (a program that keeps 64 MiB of buffers live may keep as much waiting for its next ones), at
/// least [`MIN_BYTES`].
fn budget(freeing: usize) -> usize {
    LIVE.load(Relaxed)
        .saturating_add(freeing)
        .clamp(MIN_BYTES, MAX_BYTES)
}

/// A freed span (or a piece of one) waiting for reuse.
#[derive(Clone, Copy)]
struct Waiting {
    base: *mut u8,
    len: usize,
    /// The mapping or arena it is part of.
    origin: Origin,
    /// When it was freed ([`os::now_ms`]). The clock wraps (every 49.7 days): times are compared
    /// only as ages, `now.wrapping_sub(at)` ([`Waiting::age`]), never as they read.
    at: u32,
}

impl Waiting {
    fn end(&self) -> usize {
        self.base as usize + self.len
    }

    /// Where `len` bytes at a multiple of `align` start in it, if it holds them: `cut`, the first
    /// such bytes; else only the whole span, based at a multiple of `align` and at most a quarter
    /// longer than `len`. Every address sum
    /// checked: a span near the top of a 32-bit address space (qemu-arm maps there) rounded up to
    /// a 2 MiB alignment passes 2^32 (issue 50: a panic under the cache lock, whose hook's large
    /// allocation then waited for that lock for ever; wrapped, a cut below the span).
    fn fit(&self, len: usize, align: usize, cut: bool) -> Option<usize> {
        let base = self.base as usize;
        let end = base.checked_add(self.len)?;
        if !cut {
            let whole = base % align == 0 && self.len >= len && self.len - len <= len / 4;
            return whole.then_some(base);
        }
        let ends_inside = |at: usize| at.checked_add(len).is_some_and(|e| e <= end);
        base.checked_next_multiple_of(align)
            .filter(|&at| ends_inside(at))
    }

    /// How long it has waited at `now`, across a wrap of the clock too.
    fn age(&self, now: u32) -> u32 {
        now.wrapping_sub(self.at)
    }
}

const NONE: Waiting = Waiting {
    base: ptr::null_mut(),
    len: 0,
    origin: Origin::NONE,
    at: 0,
};

/// `entries[..n]`, `bytes` in all. No two entries of one origin touch (a freed span joins its
/// neighbours).
struct Cache {
    entries: [Waiting; ENTRIES],
    n: usize,
    bytes: usize,
}

// SAFETY: the pointers name mappings only the cache's holder touches.
unsafe impl Send for Cache {}

static CACHE: Lock<Cache> = Lock::new(
    Rank::SpanCache,
    Cache {
        entries: [NONE; ENTRIES],
        n: 0,
        bytes: 0,
    },
);

/// Spans to unmap once the lock is released: `spans[..n]` are written, the rest never read. Not
/// zeroed when made: each `take` and `put` makes one, and zeroing its 130 entries (4 KiB) was a
/// third of the instructions under the allocator in frag-free-all (benches/results/behind-2026-11-28.md).
struct Out {
    spans: [MaybeUninit<Waiting>; ENTRIES + 2],
    n: usize,
}

impl Out {
    const fn new() -> Self {
        Out {
            spans: [const { MaybeUninit::uninit() }; ENTRIES + 2],
            n: 0,
        }
    }

    fn push(&mut self, s: Waiting) {
        self.spans[self.n].write(s);
        self.n += 1;
    }

    /// Releases them (call without the lock).
    fn give(self) {
        for s in &self.spans[..self.n] {
            // SAFETY: `spans[..n]` were written by `push`; each was taken off the cache (or
            // refused by it): ours, whole, unused.
            unsafe {
                let s = s.assume_init_ref();
                give(s.base, s.len, s.origin)
            };
        }
    }
}

impl Cache {
    /// Takes entry `i` (< n) off; the last entry moves into its place.
    fn remove(&mut self, i: usize) -> Waiting {
        let s = self.entries[i];
        self.n -= 1;
        self.entries[i] = self.entries[self.n];
        self.bytes -= s.len;
        s
    }

    /// Adds `s`, joined with the waiting pieces of its mapping it touches (the joined span keeps
    /// the newest time), first moving the spans that waited longest at `now` to `out` until it
    /// fits within `ENTRIES` and `max_bytes`; `s` itself goes to `out` when it alone is larger.
    fn insert(&mut self, mut s: Waiting, max_bytes: usize, now: u32, out: &mut Out) {
        let mut i = 0;
        while i < self.n {
            let e = self.entries[i];
            if s.origin.cuttable()
                && e.origin == s.origin
                && (e.end() == s.base as usize || s.end() == e.base as usize)
            {
                self.remove(i);
                s.base = s.base.min(e.base);
                s.len += e.len;
                if e.age(now) < s.age(now) {
                    s.at = e.at;
                }
                i = 0;
            } else {
                i += 1;
            }
        }
        if s.len > max_bytes {
            return out.push(s);
        }
        while self.n == ENTRIES || self.n > 0 && self.bytes + s.len > max_bytes {
            let oldest = (0..self.n)
                .max_by_key(|&i| self.entries[i].age(now))
                .expect("a full cache holds a span");
            out.push(self.remove(oldest));
        }
        self.entries[self.n] = s;
        self.n += 1;
        self.bytes += s.len;
    }

    /// Cuts `[at, at + len)` out of waiting span `s` (taken off already): what lies before and
    /// after it waits on, with `s`'s time.
    fn cut(&mut self, s: Waiting, at: usize, len: usize, out: &mut Out) {
        // Only to choose which span leaves if the cache is full (a piece of `s` joins nothing).
        let now = os::now_ms();
        let front = at - s.base as usize;
        if front > 0 {
            self.insert(Waiting { len: front, ..s }, usize::MAX, now, out);
        }
        let back = s.end() - (at + len);
        if back > 0 {
            let base = (at + len) as *mut u8;
            self.insert(
                Waiting {
                    base,
                    len: back,
                    ..s
                },
                usize::MAX,
                now,
                out,
            );
        }
    }
}

/// `len` bytes at a multiple of `align` from the smallest waiting span that holds them (the rest
/// of it waits on), its first such bytes, with their length and origin; None when none holds them. Where
/// nothing can be cut, a whole waiting span based at a multiple of `align`, of `len` to
/// `len + len / 4` bytes.
pub fn take(len: usize, align: usize) -> Option<(*mut u8, usize, Origin)> {
    let mut out = Out::new();
    let got = {
        let mut c = CACHE.lock();
        let mut best: Option<(usize, usize)> = None;
        for i in 0..c.n {
            let s = c.entries[i];
            let Some(at) = s.fit(len, align, s.origin.cuttable()) else {
                continue;
            };
            if best.is_none_or(|(b, _)| c.entries[b].len > s.len) {
                best = Some((i, at));
            }
        }
        best.map(|(i, at)| {
            let s = c.remove(i);
            if !s.origin.cuttable() {
                return (s.base, s.len, s.origin);
            }
            c.cut(s, at, len, &mut out);
            (at as *mut u8, len, s.origin)
        })
    };
    out.give();
    let (p, len, origin) = got?;
    reused(p, len, origin).then_some((p, len, origin))
}

/// The `len` bytes at `at`, when a waiting piece of mapping `origin` starts there and holds them
/// (the rest of it waits on): a span ending at `at` grows into them in place.
pub fn take_after(at: *mut u8, origin: Origin, len: usize) -> bool {
    if !origin.cuttable() {
        return false;
    }
    let mut out = Out::new();
    let got = {
        let mut c = CACHE.lock();
        let i = (0..c.n).find(|&i| {
            let s = c.entries[i];
            s.base == at && s.origin == origin && s.len >= len
        });
        i.map(|i| {
            let s = c.remove(i);
            c.cut(s, at as usize, len, &mut out);
        })
    };
    out.give();
    got.is_some() && reused(at, len, origin)
}

/// The largest waiting span of at least `min` bytes, whole, with its origin (to be grown by
/// a remap: its resident pages come along).
pub fn take_largest(min: usize) -> Option<(*mut u8, usize, Origin)> {
    let s = {
        let mut c = CACHE.lock();
        let i = (0..c.n)
            .filter(|&i| c.entries[i].len >= min)
            .max_by_key(|&i| c.entries[i].len)?;
        c.remove(i)
    };
    reused(s.base, s.len, s.origin).then_some((s.base, s.len, s.origin))
}

/// A piece taken off the cache becomes writable again (`hardened-full` protects waiting spans);
/// false, and the piece released, when the OS refused.
fn reused(p: *mut u8, len: usize, origin: Origin) -> bool {
    if hardened::on_span_reused(p, len) {
        return true;
    }
    // SAFETY: taken off the cache: ours and unused.
    unsafe { give(p, len, origin) };
    false
}

/// Releases the span (or the piece of one) `[base, base + len)` of `origin`: it waits
/// for reuse, or is unmapped when it does not fit the budget (or the spans that waited longest
/// are). `may_wait`: the purger runs (it will unmap it after the purge delay); without it only
/// spans up to `small` bytes wait.
///
/// # Safety
/// The span is ours, whole granules, and unused.
pub unsafe fn release(base: *mut u8, len: usize, origin: Origin, may_wait: bool, small: usize) {
    debug_assert!(!origin.is_run(), "a run waits in its arena");
    let mut out = Out::new();
    let s = Waiting {
        base,
        len,
        origin,
        at: os::now_ms(),
    };
    if len > small && !may_wait {
        out.push(s);
    } else {
        // Read-only while it waits (hardened-full): a write after free faults. Before it is
        // visible to other threads, so none takes it and finds it protected afterwards.
        hardened::on_span_cached(base, len);
        CACHE.lock().insert(s, budget(len), s.at, &mut out);
    }
    out.give();
}

/// Gives the span (or piece) `[base, base + len)` of `origin` back for good, to the OS
/// ([`arena::give`]).
///
/// # Safety
/// The span is ours, whole granules, and unused.
unsafe fn give(base: *mut u8, len: usize, origin: Origin) {
    // SAFETY: taken as a span (pieces join only within their origin), unused; a mapping goes to
    // the OS whatever its protection.
    unsafe { arena::give(base, len, origin, Kind::Span, false) }
}

/// Unmaps the waiting spans that waited `delay_ms` or longer (all of them when `delay_ms` is 0).
pub fn expire(now: u32, delay_ms: u32) {
    loop {
        let victim = {
            let mut c = CACHE.lock();
            let i = (0..c.n).find(|&i| c.entries[i].age(now) >= delay_ms);
            match i {
                Some(i) => c.remove(i),
                None => return,
            }
        };
        // SAFETY: taken off the cache: ours and unused.
        unsafe { give(victim.base, victim.len, victim.origin) };
    }
}

/// How many spans wait, and their bytes (for tests).
#[cfg(test)]
pub fn waiting() -> (usize, usize) {
    let c = CACHE.lock();
    (c.n, c.bytes)
}

/// Takes the cache lock for `fork` (`thread/fork.rs` takes every lock in the lock order).
pub(crate) fn lock_for_fork() {
    core::mem::forget(CACHE.lock());
}

/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guard forgotten.
    unsafe { CACHE.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(base: usize, len: usize, origin: usize, at: u32) -> Waiting {
        Waiting {
            base: base as *mut u8,
            len,
            origin: Origin::numbered(origin),
            at,
        }
    }

    /// A waiting span near the top of the address space (a 32-bit one's, where qemu-arm maps
    /// spans just below 4 GiB) asked for a block at an alignment it cannot hold: no fit, and no
    /// sum past the top (issue 50: a base rounded up to 2 MiB passed 2^32 under the cache
    /// lock; the panic's hook then waited for that lock for ever). Where it holds the block, the
    /// fit is inside it.
    #[test]
    fn spans_near_the_top_of_the_address_space_fit_without_overflow() {
        let g = 1 << 18;
        // The last granule below the top stays unmapped (Linux keeps the last page of a 32-bit
        // process's space); the span ends there, 7 granules past a 2 MiB boundary.
        let top = usize::MAX - g + 1;
        let s = piece(top - 5 * g, 5 * g, 1, 0);
        for (len, align) in [(9 * g, 2 << 20), (g, 2 << 20), (g, 1 << 30), (2 * g, g)] {
            for cut in [false, true] {
                if let Some(at) = s.fit(len, align, cut) {
                    assert!(at >= s.base as usize && at % align == 0, "{len} at {align}");
                    assert!(at + len <= s.end(), "{len} at {align}: past the span");
                }
            }
        }
        // Held: the first granule.
        let at = s.fit(g, g, true).expect("the span holds one granule");
        assert_eq!(at, s.base as usize);
        assert_eq!(s.fit(g, 2 << 20, true), None, "no 2 MiB boundary inside it");
        // A span whose end would pass the top is no fit at all.
        assert_eq!(piece(usize::MAX - g + 1, 2 * g, 1, 0).fit(g, g, true), None);
    }

    /// The clock (`os::now_ms`, u32 milliseconds) wraps every 49.7 days: a span freed just before
    /// the wrap waited longer than one freed after it, though its time reads larger. Joined pieces
    /// keep the newer time, and a full cache lets the one that waited longest go (issue 41: both
    /// compared the raw times, so across the wrap they kept the older and evicted the newer).
    #[test]
    fn ages_are_read_across_the_clock_wrap() {
        let (before_wrap, after_wrap, now) = (u32::MAX - 999, 500, 1000);
        let g = 1 << 18;
        let mut c = Cache {
            entries: [NONE; ENTRIES],
            n: 0,
            bytes: 0,
        };
        let mut out = Out::new();
        if os::PARTIAL_UNMAP {
            c.insert(piece(64 * g, g, 1, before_wrap), usize::MAX, now, &mut out);
            c.insert(piece(65 * g, g, 1, after_wrap), usize::MAX, now, &mut out);
            assert_eq!((c.n, c.entries[0].len), (1, 2 * g), "joined");
            assert_eq!(c.entries[0].at, after_wrap, "the newer time kept");
            c.remove(0);
        }
        // Full: every entry freed after the wrap but one, freed before it.
        c.insert(
            piece(1000 * g, g, 2, before_wrap),
            usize::MAX,
            now,
            &mut out,
        );
        for i in 1..ENTRIES {
            c.insert(
                piece((1000 + 2 * i) * g, g, 2 + i, after_wrap),
                usize::MAX,
                now,
                &mut out,
            );
        }
        assert_eq!((c.n, out.n), (ENTRIES, 0));
        c.insert(piece(10 * g, g, 9999, now), usize::MAX, now, &mut out);
        assert_eq!(out.n, 1);
        // SAFETY: `spans[..n]` were written by `push`.
        let gone = unsafe { out.spans[0].assume_init() };
        assert_eq!(
            (gone.base as usize, gone.at),
            (1000 * g, before_wrap),
            "the span that waited longest goes first"
        );
    }
}
