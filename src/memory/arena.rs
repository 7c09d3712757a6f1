//! Arenas: address space reserved in large ranges, from which runs of up to [`MAX_RUN`] are cut,
//! so that a large block costs no system call in the steady state (issue 42; mimalloc v3's arenas,
//! jemalloc's extents).
//!
//! - **The one way in and out.** Memory for blocks (regions of chunks, spans) is taken by [`take`]
//!   (length, alignment, kind in the address map, [`Place`]) and given back by [`give`]: each
//!   piece carries its [`Origin`] (an arena's run, or a mapping of its own, with or without a
//!   guard below it), so marking, commit, roll-back and the way back are done here once, whatever
//!   took it. [`extend`] grows a piece in place.
//! - **Ranges.** The first range is 64 MiB, each next one twice the last, up to 1 GiB (32-bit
//!   targets: 16 to 64 MiB), aligned to the huge page; one mapping each, kept while the process
//!   uses it (only address space: what is not in use is purged). Where the OS refuses a range, a
//!   smaller one is tried, down to the request; where it refuses that too, the span maps its own
//!   memory, and no range is asked for during [`REFUSED_PAUSE_MS`].
//! - **The index.** A free run of granules ([`CHUNK_SIZE`]) is recorded at both ends (its length at
//!   its first and at its last granule, so a run given back joins its neighbours in O(1)) and sits
//!   in one of 33 bins: bin `k < 32` holds runs of exactly `k + 1` granules, bin 32 the longer ones.
//!   A request of `n` granules takes the first run of the first non-empty bin from `n - 1` on, read
//!   off one bitmap word: no scan of runs, ranges or spans under the lock, whatever the heap's size.
//! - **Ranges go back whole past four idle ones.** A range all of whose runs are free again stays
//!   while at most [`IDLE_RANGES`] such are kept (so a heap built and freed in a loop maps
//!   nothing); one more is unmapped, its slot taking the next range.
//! - **Dirty and clean runs, apart; the delay here.** A freed span's run comes back through
//!   [`give`] *dirty* when the purger runs: resident, with the time it came back, on an age list
//!   (mimalloc v3 keeps a purge expiry inside its arenas; jemalloc keeps dirty extents apart from
//!   clean ones). A span is cut from a dirty run first (no fault; its [`Piece`] says it is not
//!   zero); a region of chunks only from clean ones (`source` counts a new region's chunks
//!   purged). The purger's period purges the runs that waited the purge delay, oldest first
//!   ([`purge_expired`], from `span::expire`): decommitted outside the lock, then *clean*
//!   (reading as zero, costing no memory) and joined with the clean runs around them. Dirty and
//!   clean runs never join, so a run's state is one bit, at both its ends. Without the purger
//!   (a delay of zero) a run is decommitted as it comes back. A dirty run stays marked a span in
//!   the address map (a double free of its block is caught as when it waited in the span cache);
//!   a clean run is foreign. With `hardened-full` a dirty run is read-only while it waits; a cut
//!   makes writable what its granules' records say is not. With `hardened` on 64-bit targets a
//!   span cut from an arena has guards below and above it ([`SPAN_GUARDS`]); freed, its whole
//!   footprint waits dirty and kept apart, joining no neighbour until cut or purged, so the next
//!   span of its length lands where it was, guards and all ([`Arenas::keep`]).
//!
//! - **Through `os::`'s reservations.** A range is [`os::reserve_aligned`]; a run is
//!   [`os::commit`]ted when cut and [`os::decommit`]ted when given back. On Unix that is a mapping,
//!   nothing, and a purge; on Windows, which cannot unmap part of a mapping, it is a reservation,
//!   a commit and a decommit, so the arenas serve there too and a freed span costs no commit
//!   charge.
//!
//! Where memory goes back to the OS ([`ENABLED`]: Unix and Windows, 64- and 32-bit). On 32-bit
//! targets the ranges are smaller and one idle range is kept, not four: with ranges of up to
//! 256 MiB and four idle, qemu-arm's guest ran out of address space (`mmap` and `munmap` failed
//! with ENOMEM). On wasm32, where memory never goes back, a span keeps a mapping of its own,
//! which `os::` takes from the runtime's allocator (dlmalloc): its free lists already hold the
//! mappings given back for reuse, and an arena would only add a second index over the same
//! never-shrinking memory (and a purge there zeroes by hand).
//!
//! Locks: the arena's lock is taken alone (never with the span cache's), and never across a
//! system call: a new range is mapped before the lock is taken to record it, a run is decommitted
//! before it is indexed clean, and a dirty run purged is out of the index meanwhile.

use crate::base::lock::{Lock, Rank};
use crate::checks::hardened;
use crate::chunks::addr_map::{self, Kind};
use crate::chunks::chunk::CHUNK_SIZE;
use crate::os;
use core::ptr;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// Until when (`os::now_ms`) no new range is asked for ([`REFUSED_PAUSE_MS`]); 0: none refused.
static REFUSED_UNTIL: AtomicU32 = AtomicU32::new(0);

/// Runs cut from the arenas where memory goes back to the OS ([`os::RETURNS_MEMORY`]).
pub const ENABLED: bool = os::RETURNS_MEMORY;
/// The longest run cut from an arena at once (a region of chunks, the longest span); longer
/// memory is a mapping of its own.
pub const MAX_RUN: usize = 4 << 20;
/// The largest alignment of a run cut from an arena (the huge page of x86-64 and of AArch64 with
/// 4 KiB pages); a span aligned more maps its own memory.
pub const MAX_ALIGN: usize = 2 << 20;

const GRANULE: usize = CHUNK_SIZE;
const WIDE: bool = cfg!(target_pointer_width = "64");
/// The first range, and the largest (each next one twice the last). On 32-bit targets a quarter
/// and a sixteenth of 64-bit's: the whole address space is 2 to 4 GiB there.
const FIRST_RANGE: usize = if WIDE { 64 << 20 } else { 16 << 20 };
const LARGEST_RANGE: usize = if WIDE { 1 << 30 } else { 64 << 20 };
/// Ranges, at most (64-bit: some 60 GiB of spans; past it spans map their own memory).
const MAX_RANGES: usize = 64;
/// Ranges all free that are kept; one more goes back to the OS (32-bit: one, 64 MiB at most).
const IDLE_RANGES: usize = if WIDE { 4 } else { 1 };
/// After the OS refused a range of the least size a request needed, no new range is asked for
/// during this long (ms): a process at the end of its address space makes one failed call a
/// second, not one per large block (each then maps its own span, or is refused).
const REFUSED_PAUSE_MS: u32 = 1000;
/// Bins of exact run lengths (1 to 32 granules), then one of longer runs.
const EXACT_BINS: usize = 32;
/// Runs [`Arenas::aligned_fit`] looks at in each bin.
const FIT_PROBES: usize = 4;
const BINS: usize = EXACT_BINS + 1;
/// No run (the end of a bin's list).
const NIL: u32 = u32::MAX;
/// Bits of a run's id that name its first granule in its range (a range has at most 2^16).
const GRANULE_BITS: u32 = 16;
const _: () = assert!(LARGEST_RANGE / GRANULE <= 1 << GRANULE_BITS);
const _: () = assert!(MAX_RUN + MAX_ALIGN <= FIRST_RANGE);
const _: () = assert!(FIRST_RANGE <= LARGEST_RANGE && LARGEST_RANGE % MAX_ALIGN == 0);
// Every request (with its alignment's slack and its guards) fits the exact bins: a run of a bin at
// or above the request's holds it.
const _: () =
    assert!((MAX_RUN + MAX_ALIGN) / GRANULE - 1 + GUARD_BELOW + GUARD_ABOVE <= EXACT_BINS);

/// The per-granule records of one range, in a mapping of their own (zeroed: no run).
#[repr(C)]
#[derive(Clone, Copy)]
struct Granule {
    /// The length in granules of the free run that starts here; 0 if none does.
    head: u32,
    /// The length in granules of the free run that ends here; 0 if none does.
    tail: u32,
    /// A run's neighbours in its bin (run ids), when `head` is non-zero.
    next: u32,
    prev: u32,
    /// A dirty run's neighbours in the age list (run ids: older, newer), and when it was given
    /// back (`os::now_ms`), at its first granule.
    older: u32,
    newer: u32,
    at: u32,
    /// Whether the free run that starts or ends here is dirty (resident), at both ends.
    dirty: bool,
    /// Whether that run is a guarded span's whole footprint given back dirty, at both ends: it
    /// joins no neighbour, and no neighbour joins it, until it is cut or purged ([`Arenas::keep`]).
    kept: bool,
    /// What this granule's pages allow ([`RW`], [`READ`], [`NONE`], or [`UNKNOWN`]), whether it
    /// is free or in use: kept so that a cut changes protection only where it must
    /// ([`Arenas::protect_cut`]).
    prot: u8,
}

/// A granule's protection: read-write (every clean run's, where the OS allowed), read-only (a
/// dirty run's body while it waits, `hardened-full`), inaccessible (a span's guard, `hardened`).
const RW: u8 = 0;
const READ: u8 = 1;
const NONE: u8 = 2;
/// Not known (the OS refused to change it): a cut makes it what it needs.
const UNKNOWN: u8 = 3;

#[derive(Clone, Copy)]
struct Range {
    base: *mut u8,
    granules: usize,
    meta: *mut Granule,
}

/// The free runs of one state (dirty, clean): the first run of each bin (a run id: range <<
/// GRANULE_BITS | granule, or NIL), and a bit per non-empty bin.
#[derive(Clone, Copy)]
struct Bins {
    first: [u32; BINS],
    nonempty: u64,
}

const NO_BINS: Bins = Bins {
    first: [NIL; BINS],
    nonempty: 0,
};

struct Arenas {
    /// `ranges[..n]`; a slot whose range went back has a null base (taken by the next range).
    ranges: [Range; MAX_RANGES],
    n: usize,
    /// Ranges mapped now (the next one's size doubles with them), and those all free and clean.
    live: usize,
    idle: usize,
    /// [`IDLE_RANGES`] (a field, so that the unit test sets its own).
    idle_max: usize,
    /// Clean runs (`[0]`: decommitted, reading as zero) and dirty ones (`[1]`: resident, given
    /// back within the purge delay), apart: runs of the two states never join.
    bins: [Bins; 2],
    /// The dirty runs, oldest first (run ids, or NIL): the purge takes them from this end.
    oldest: u32,
    newest: u32,
    /// Granules in free runs, in dirty ones, and in all ranges (for statistics and tests).
    free: usize,
    dirty: usize,
    total: usize,
}

// SAFETY: the raw pointers name mappings owned by the arenas; access is serialised by the lock.
unsafe impl Send for Arenas {}

const NO_RANGE: Range = Range {
    base: ptr::null_mut(),
    granules: 0,
    meta: ptr::null_mut(),
};

static ARENAS: Lock<Arenas> = Lock::new(
    Rank::Arena,
    Arenas {
        ranges: [NO_RANGE; MAX_RANGES],
        n: 0,
        live: 0,
        idle: 0,
        idle_max: IDLE_RANGES,
        bins: [NO_BINS; 2],
        oldest: NIL,
        newest: NIL,
        free: 0,
        dirty: 0,
        total: 0,
    },
);

/// Where a piece of memory came from, carried with it (a unit's record, a span's header, a waiting
/// piece) so that one [`give`] returns it whatever took it: a run of an arena's range, or a
/// mapping of its own (numbered: pieces of one mapping join only with each other, so a span never
/// spans two of the kernel's mappings), with or without a guard below it (mimalloc's `memid`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct Origin(usize);

/// [`Origin`]'s bits: a run (the rest is the range's index), and a guard: a mapping's [`GUARD`]
/// below it, or a run's guard granules each side ([`SPAN_GUARDS`]).
const RUN: usize = 1 << (usize::BITS - 1);
const GUARDED: usize = 1 << (usize::BITS - 2);

impl Origin {
    /// No memory (an empty record's).
    pub const NONE: Origin = Origin(0);

    /// Mapping number `n` (unit tests' pieces).
    #[cfg(test)]
    pub fn numbered(n: usize) -> Origin {
        Origin(n & !(RUN | GUARDED))
    }

    /// A run of range `r`, with its guard granules each side where `guarded`.
    fn run(r: usize, guarded: bool) -> Origin {
        Origin(RUN | r | if guarded { GUARDED } else { 0 })
    }

    /// A new mapping of its own: its number is never a run's or a guarded one's (on a 32-bit
    /// target the count could reach those bits after 2^30 mappings, and wraps below them).
    pub fn new_mapping() -> Origin {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        Origin(NEXT.fetch_add(1, Relaxed) & !(RUN | GUARDED))
    }

    /// Whether it is a run of an arena (its address space stays the arena's when given back).
    #[inline]
    pub fn is_run(self) -> bool {
        self.0 & RUN != 0
    }

    /// Whether a part of it can be given back alone, and its pieces cut and joined: a run of an
    /// arena everywhere, a mapping where the OS unmaps part of one ([`os::PARTIAL_UNMAP`]; Windows
    /// releases whole reservations only).
    #[inline]
    pub fn cuttable(self) -> bool {
        os::PARTIAL_UNMAP || self.is_run()
    }

    /// The same memory past its first unit: its guard goes back with the first (a region's later
    /// units).
    pub fn unguarded(self) -> Origin {
        Origin(self.0 & !GUARDED)
    }

    fn guarded(self) -> bool {
        self.0 & GUARDED != 0
    }

    fn range(self) -> usize {
        debug_assert!(self.is_run());
        self.0 & !(RUN | GUARDED)
    }
}

/// Where [`take`] may find memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A run of an arena where one holds the request ([`MAX_RUN`], [`MAX_ALIGN`]), else a mapping
    /// of its own.
    Any,
    /// A mapping of its own (a block that grows out of its span grows again: see
    /// `span::alloc_grown`).
    Mapping,
    /// A mapping of its own with [`GUARD`] bytes below it made inaccessible where the OS can
    /// (`hardened`'s regions of chunks); where it refuses, the mapping goes unguarded.
    Guarded,
}

/// The inaccessible space below a [`Place::Guarded`] mapping: a write up to 2 MiB below its
/// start faults.
pub const GUARD: usize = 2 << 20;

/// Whether a span cut from an arena has guards (granules any access to faults) just below and just
/// above it (`hardened` on 64-bit targets, where the OS makes guards), so that an underflow or an
/// overflow running off the block faults, as it would off a mapping of its own with nothing
/// mapped around it: one granule below ([`GUARD_BELOW`]; the 64 bytes just below the block are
/// its header, which the canary below it seals), and 1 MiB above ([`GUARD_ABOVE`]: an overflow of
/// up to a megabyte past a span faults). The guards are the span's, taken and given back with it
/// (its origin says so), and cost address space only. Each granule's protection is recorded, so a
/// span cut again where one of the same length was (the steady state) makes no system call; a
/// cut elsewhere makes one to three `mprotect` calls ([`Arenas::protect_cut`]). Each range starts
/// with [`RANGE_GUARD`] of guard too, so the first span's underflow by a megabyte faults as well.
/// Not on 32-bit targets: guards take more than their ranges of 16 MiB can spare (16 live blocks
/// of up to 1 MiB with their guards needed a new range 25 times in 10,000 blocks), as `source`
/// gives its regions none there either.
pub const SPAN_GUARDS: bool = cfg!(feature = "hardened") && os::HAS_GUARD && WIDE;
/// Guard granules below and above a span with guards.
const GUARD_BELOW: usize = 1;
const GUARD_ABOVE: usize = (1 << 20) / GRANULE;
/// Bytes of guard a span with guards has around it.
#[cfg(test)]
pub const SPAN_GUARD_BYTES: usize = if SPAN_GUARDS {
    (GUARD_BELOW + GUARD_ABOVE) * GRANULE
} else {
    0
};
/// Bytes of guard at the start of each range, with span guards (address space only; aligned, so
/// the runs after it keep the range's alignment).
const RANGE_GUARD: usize = if SPAN_GUARDS { MAX_ALIGN } else { 0 };

/// Granules from `base` (a granule's address) to the first start from which `lead` granules on
/// are at a multiple of `align`.
fn aligned_from(base: usize, align: usize, lead: usize) -> usize {
    ((base + lead * GRANULE).next_multiple_of(align) - base) / GRANULE - lead
}

fn bin_of(granules: usize) -> usize {
    (granules - 1).min(EXACT_BINS)
}

/// A free run taken out of the index: its range, first granule, and whether it is dirty.
type Cut = (usize, usize, bool);

impl Arenas {
    /// The record of granule `g` of range `r`.
    fn at(&mut self, r: usize, g: usize) -> &mut Granule {
        debug_assert!(r < self.n && g < self.ranges[r].granules);
        // SAFETY: meta holds `granules` records, in our own mapping; the lock is held (&mut self).
        unsafe { &mut *self.ranges[r].meta.add(g) }
    }

    fn id(r: usize, g: usize) -> u32 {
        ((r << GRANULE_BITS) | g) as u32
    }

    fn split_id(id: u32) -> (usize, usize) {
        (
            (id >> GRANULE_BITS) as usize,
            (id & ((1 << GRANULE_BITS) - 1)) as usize,
        )
    }

    /// Records the free run `[g, g + len)` of range `r`, first in its bin; a dirty one (given back
    /// at `at`) also newest in the age list.
    fn insert(&mut self, r: usize, g: usize, len: usize, dirty: bool, at: u32) {
        let bins = &mut self.bins[dirty as usize];
        let b = bin_of(len);
        let first = bins.first[b];
        let id = Self::id(r, g);
        bins.first[b] = id;
        bins.nonempty |= 1 << b;
        let newest = self.newest;
        let prot = self.at(r, g).prot;
        *self.at(r, g) = Granule {
            head: len as u32,
            tail: 0,
            next: first,
            prev: NIL,
            older: if dirty { newest } else { NIL },
            newer: NIL,
            at,
            dirty,
            kept: false,
            prot,
        };
        let last = self.at(r, g + len - 1);
        last.tail = len as u32;
        last.dirty = dirty;
        last.kept = false;
        if first != NIL {
            let (fr, fg) = Self::split_id(first);
            self.at(fr, fg).prev = id;
        }
        if dirty {
            match Self::split_id(newest) {
                _ if newest == NIL => self.oldest = id,
                (nr, ng) => self.at(nr, ng).newer = id,
            }
            self.newest = id;
            self.dirty += len;
        }
        self.free += len;
    }

    /// Takes the free run that starts at granule `g` of range `r` out of its bin, the age list
    /// and the ends' records; returns its length, whether it was dirty, and when it was given.
    fn remove(&mut self, r: usize, g: usize) -> (usize, bool, u32) {
        let Granule {
            head: len,
            next,
            prev,
            older,
            newer,
            at,
            dirty,
            ..
        } = *self.at(r, g);
        let len = len as usize;
        debug_assert!(len > 0);
        if prev != NIL {
            let (pr, pg) = Self::split_id(prev);
            self.at(pr, pg).next = next;
        } else {
            let bins = &mut self.bins[dirty as usize];
            let b = bin_of(len);
            bins.first[b] = next;
            if next == NIL {
                bins.nonempty &= !(1 << b);
            }
        }
        if next != NIL {
            let (nr, ng) = Self::split_id(next);
            self.at(nr, ng).prev = prev;
        }
        if dirty {
            match Self::split_id(older) {
                _ if older == NIL => self.oldest = newer,
                (or, og) => self.at(or, og).newer = newer,
            }
            match Self::split_id(newer) {
                _ if newer == NIL => self.newest = older,
                (nr, ng) => self.at(nr, ng).older = older,
            }
            self.dirty -= len;
        }
        self.at(r, g).head = 0;
        self.at(r, g + len - 1).tail = 0;
        self.free -= len;
        (len, dirty, at)
    }

    /// `len` granules at a multiple of `align` bytes, from a dirty run if one holds them and
    /// `dirty_ok` (its pages are resident: nothing faults), else a clean one: the range, first
    /// granule and whether it is dirty; the rest of the run they came from stays in the index, as
    /// it was. `lead`: granules before the aligned point (a guard below a span). None when no run
    /// holds them.
    fn take(&mut self, len: usize, align: usize, lead: usize, dirty_ok: bool) -> Option<Cut> {
        let dirty_fit = if dirty_ok {
            self.find(len, align, lead, true)
        } else {
            None
        };
        let (r, g, dirty) = match dirty_fit {
            Some((r, g)) => (r, g, true),
            None => self
                .find(len, align, lead, false)
                .map(|(r, g)| (r, g, false))?,
        };
        let (run, _, at) = self.remove(r, g);
        if !dirty && run == self.ranges[r].granules {
            self.idle -= 1;
        }
        let base = self.ranges[r].base as usize + g * GRANULE;
        let start = aligned_from(base, align, lead) + g;
        let end = g + run;
        if start > g {
            self.insert(r, g, start - g, dirty, at);
        }
        if start + len < end {
            self.insert(r, start + len, end - start - len, dirty, at);
        }
        Some((r, start, dirty))
    }

    /// The first run of `len` granules at a multiple of `align` among the dirty runs or the clean
    /// ones: an exact aligned fit ([`Arenas::aligned_fit`]), else the first run of the first
    /// non-empty bin that holds the request with its alignment's slack.
    fn find(
        &mut self,
        len: usize,
        align: usize,
        lead: usize,
        dirty: bool,
    ) -> Option<(usize, usize)> {
        // Granules a run may need before an aligned start (ranges start at MAX_ALIGN).
        let slack = align.max(GRANULE) / GRANULE - 1;
        let need = len + slack;
        let from = bin_of(need);
        if let Some(at) = self.aligned_fit(len, align, lead, from, dirty) {
            return Some(at);
        }
        let bins = &self.bins[dirty as usize];
        let nonempty = bins.nonempty & (u64::MAX << from);
        if nonempty == 0 {
            return None;
        }
        let (r, g) = Self::split_id(bins.first[nonempty.trailing_zeros() as usize]);
        // Only a request longer than the exact bins (none of the spans' own) can meet a run too
        // short: it is refused, not searched for.
        ((self.at(r, g).head as usize) >= need).then_some((r, g))
    }

    /// A free run shorter than `len` plus the alignment slack that still holds `len` granules at
    /// a multiple of `align` (jemalloc's `eset_fit_alignment` looks the same way): the first
    /// [`FIT_PROBES`] runs of each bin from `len`'s up to (not including) bin `below`, where
    /// [`Arenas::find`] looks for a run that fits whatever its alignment. Without it, an exactly
    /// aligned run of the right length is passed over for a longer one (a 2 MiB-aligned span of
    /// 8 granules asked for 15). Constant time: at most `slack` bins, a few runs each.
    fn aligned_fit(
        &mut self,
        len: usize,
        align: usize,
        lead: usize,
        below: usize,
        dirty: bool,
    ) -> Option<(usize, usize)> {
        if align <= GRANULE {
            return None;
        }
        let bins = self.bins[dirty as usize];
        let mut nonempty = bins.nonempty & (u64::MAX << bin_of(len)) & !(u64::MAX << below);
        while nonempty != 0 {
            let mut id = bins.first[nonempty.trailing_zeros() as usize];
            nonempty &= nonempty - 1;
            for _ in 0..FIT_PROBES {
                if id == NIL {
                    break;
                }
                let (r, g) = Self::split_id(id);
                let run = self.at(r, g).head as usize;
                let base = self.ranges[r].base as usize + g * GRANULE;
                if aligned_from(base, align, lead) + len <= run {
                    return Some((r, g));
                }
                id = self.at(r, g).next;
            }
        }
        None
    }

    /// Takes `len` granules from the free run that starts at granule `g` of range `r`, if one
    /// starts there and holds them (the rest of it stays free): a span that ends at `g` grows into
    /// them in place. Some(whether they are dirty), or None.
    fn take_at(&mut self, r: usize, g: usize, len: usize) -> Option<bool> {
        if g >= self.ranges[r].granules || (self.at(r, g).head as usize) < len {
            return None;
        }
        let (run, dirty, at) = self.remove(r, g);
        if !dirty && run == self.ranges[r].granules {
            self.idle -= 1;
        }
        if run > len {
            self.insert(r, g + len, run - len, dirty, at);
        }
        Some(dirty)
    }

    /// Gives the run `[g, g + len)` of range `r` back, dirty (at `now`) or clean, joined with the
    /// free runs of its state it touches (a dirty run joined is as new as the newest part). When
    /// that frees the whole range, clean, and as many as are kept are idle already, the range
    /// leaves the arenas: its mapping and records are returned, for the caller to unmap without
    /// the lock.
    fn give(
        &mut self,
        r: usize,
        mut g: usize,
        mut len: usize,
        dirty: bool,
        now: u32,
    ) -> Option<(Range, usize)> {
        if g > 0 {
            let left = *self.at(r, g - 1);
            if left.tail > 0 && left.dirty == dirty && !left.kept {
                let n = left.tail as usize;
                self.remove(r, g - n);
                g -= n;
                len += n;
            }
        }
        if g + len < self.ranges[r].granules {
            let right = *self.at(r, g + len);
            if right.head > 0 && right.dirty == dirty && !right.kept {
                len += self.remove(r, g + len).0;
            }
        }
        if dirty || len < self.ranges[r].granules {
            self.insert(r, g, len, dirty, now);
            return None;
        }
        if self.idle < self.idle_max {
            self.idle += 1;
            self.insert(r, g, len, false, now);
            return None;
        }
        let range = core::mem::replace(&mut self.ranges[r], NO_RANGE);
        self.live -= 1;
        self.total -= range.granules;
        let meta_len = (range.granules * size_of::<Granule>()).next_multiple_of(os::page_size());
        Some((range, meta_len))
    }

    /// Gives back a guarded span's whole footprint (its guard below, block and guard above: `len`
    /// granules at `g` of range `r`) dirty, kept apart: it joins no neighbouring run, so the next
    /// span of its length is cut where it was (the smallest run that holds it), its records
    /// already what it needs: no system call. Joined, spans of other lengths cut from the
    /// merged run moved the guards each time (a program whose tables grow through 1-, 4- and
    /// 7-granule spans, round after round: 298 `mprotect` calls, and 26.0 MiB of peak RSS
    /// against 19.7 without guards: granules that held tables became guards, resident, and old
    /// guards became tables, faulting; benches/results/hardened-c.md). jemalloc keeps its
    /// guarded extents apart the same way. A kept run cut for a shorter span leaves plain dirty
    /// runs; purged, it goes back clean and joins as any run.
    fn keep(&mut self, r: usize, g: usize, len: usize, now: u32) {
        self.insert(r, g, len, true, now);
        self.at(r, g).kept = true;
        self.at(r, g + len - 1).kept = true;
    }

    /// Records what the run of `n` granules at `g` of range `r`, just cut (ours alone), is to
    /// allow: read and write where a block lies, nothing at its guards (its first `below` and its
    /// last `above` granules); and says which system calls make it so: only where a record
    /// differs, so a span cut where one of the same length was makes none. Without `hardened`
    /// nothing is ever protected: no call.
    fn protect_cut(
        &mut self,
        r: usize,
        g: usize,
        n: usize,
        below: usize,
        above: usize,
    ) -> Reprotect {
        let mut plan = Reprotect {
            r,
            base: self.ranges[r].base,
            rw: None,
            guards: [None; 2],
        };
        if !cfg!(feature = "hardened") {
            return plan;
        }
        plan.rw = self.set_prot(r, g + below, g + n - above, RW);
        plan.guards = [
            self.set_prot(r, g, g + below, NONE),
            self.set_prot(r, g + n - above, g + n, NONE),
        ];
        plan
    }

    /// The granules of range `r` from `from` to `to` that are not recorded `prot`, as one span
    /// `[first, last + 1)` (one system call covers them), recorded `prot` from now on; None if
    /// every one is already.
    fn set_prot(&mut self, r: usize, from: usize, to: usize, prot: u8) -> Option<(usize, usize)> {
        let first = (from..to).find(|&i| self.at(r, i).prot != prot)?;
        let last = (first..to).rev().find(|&i| self.at(r, i).prot != prot)?;
        (first..=last).for_each(|i| self.at(r, i).prot = prot);
        Some((first, last + 1))
    }

    /// The oldest dirty run, taken out, when it was given back `delay_ms` or longer before `now`
    /// (across a wrap of the clock too): its range, first granule and length.
    fn take_expired(&mut self, now: u32, delay_ms: u32) -> Option<(usize, usize, usize)> {
        if self.oldest == NIL {
            return None;
        }
        let (r, g) = Self::split_id(self.oldest);
        if now.wrapping_sub(self.at(r, g).at) < delay_ms {
            return None;
        }
        Some((r, g, self.remove(r, g).0))
    }

    /// The size of the next range: twice the last, from [`FIRST_RANGE`] to [`LARGEST_RANGE`].
    fn next_size(&self) -> usize {
        FIRST_RANGE
            .checked_shl(self.live as u32)
            .unwrap_or(LARGEST_RANGE)
            .min(LARGEST_RANGE)
    }

    /// A slot for a new range: one whose range went back, else the next; None when all are used.
    fn free_slot(&self) -> Option<usize> {
        (0..self.n)
            .find(|&r| self.ranges[r].base.is_null())
            .or((self.n < MAX_RANGES).then_some(self.n))
    }
}

/// Memory [`take`] had: where it is, where it came from, and whether it reads as zero (a fresh
/// mapping, a clean run) or may hold what it held when given back (a dirty run).
#[derive(Clone, Copy, Debug)]
pub struct Piece {
    pub base: *mut u8,
    pub origin: Origin,
    pub zero: bool,
}

/// Takes `len` bytes (whole granules) at a multiple of `align` (a power of two, at least a
/// granule) for memory of `kind`: a run of an arena (a dirty one first: resident, nothing faults),
/// or a mapping of its own, as `place` allows; committed, writable, and marked `kind` in the
/// address map. The one way memory for blocks is taken (regions of chunks, spans); [`give`]
/// returns it. With `hardened` a span cut from an arena has guards below and above it
/// ([`SPAN_GUARDS`]). None when the OS has no memory, or the address map
/// cannot mark it (then nothing is kept).
pub fn take(len: usize, align: usize, kind: Kind, place: Place) -> Option<Piece> {
    debug_assert!(len % GRANULE == 0 && len > 0 && align.is_power_of_two());
    let fits = place == Place::Any && len <= MAX_RUN && align <= MAX_ALIGN;
    // A region's chunks are counted purged by `source` until handed out: regions take clean runs.
    let dirty_ok = kind == Kind::Span;
    let guard = SPAN_GUARDS && kind == Kind::Span;
    let piece = match fits
        .then(|| take_run(len, align, dirty_ok, guard))
        .flatten()
    {
        Some(piece) => piece,
        None => map_own(len, align, place == Place::Guarded)?,
    };
    if addr_map::set(kind, piece.base, len, true) {
        return Some(piece);
    }
    // (A dirty run was marked already: the map covers it and cannot refuse; unmarked all the same.)
    addr_map::set(kind, piece.base, len, false);
    // SAFETY: just taken, unused, writable, and not marked.
    unsafe { release(piece.base, len, piece.origin) };
    None
}

/// Gives back for good the memory `[base, base + len)` of `origin`, which [`take`] marked `kind`
/// (all of it, or a part where `origin` is [`Origin::cuttable`]), with its guards. A span's run
/// with `wait` (the purger runs: it purges it after the delay, [`purge_expired`]) waits in its
/// arena dirty, resident, still marked a span in the address map (so a second free of its block
/// is told from a foreign pointer, as when it waited in the span cache; read-only with
/// `hardened-full`). Else it leaves the address map first (once given back, another thread may
/// take it and mark it): a run goes to its arena decommitted (outside the lock), a mapping's part
/// to the OS (with the guard below it, given with its first unit). A span's tail goes back by
/// [`give_tail`].
///
/// # Safety
/// Taken by [`take`] as `kind` (or pieces of such, joined only within their origin), whole
/// granules; nothing refers to it any more, and it is writable (not protected).
pub unsafe fn give(base: *mut u8, len: usize, origin: Origin, kind: Kind, wait: bool) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if wait && origin.is_run() && kind == Kind::Span {
            let read_only = hardened::on_span_cached(base, len);
            let (run, run_len) = with_guards(base, len, origin);
            return index_run(run, run_len, origin, true, read_only);
        }
        addr_map::set(kind, base, len, false);
        release(base, len, origin)
    }
}

/// Gives back `[tail, tail + len)`, the end of a span of `origin` that keeps the rest (a shrink,
/// or a growth undone), as [`give`] does. Where the span has guards, the tail's first granules
/// become its guard above, and what goes back is the rest of the tail with the old guard.
///
/// # Safety
/// As [`give`]'s, for the span's last `len` bytes: the span keeps `[.., tail)`.
pub unsafe fn give_tail(tail: *mut u8, len: usize, origin: Origin, kind: Kind, wait: bool) {
    if !(origin.is_run() && origin.guarded()) {
        // SAFETY: forwarded.
        return unsafe { give(tail, len, origin, kind, wait) };
    }
    let r = origin.range();
    let above = GUARD_ABOVE * GRANULE;
    // The new guard: the tail's first granules, and the old guard's where the tail is shorter.
    addr_map::set(kind, tail, above.min(len), false);
    let plan = {
        let mut a = ARENAS.lock();
        let g = (tail as usize - a.ranges[r].base as usize) / GRANULE;
        a.protect_cut(r, g, GUARD_ABOVE, 0, GUARD_ABOVE)
    };
    // SAFETY: the new guard is the span's own (no longer its block's, or its old guard); the rest
    // of the tail and of the old guard after it is unused (caller), a run of the same range.
    unsafe {
        plan.apply();
        let rest = tail.add(above);
        let body = len.saturating_sub(above);
        if wait && kind == Kind::Span {
            let read_only = body > 0 && hardened::on_span_cached(rest, body);
            return index_run(rest, len, origin.unguarded(), true, read_only);
        }
        if body > 0 {
            addr_map::set(kind, rest, body, false);
        }
        release(rest, len, origin.unguarded())
    }
}

/// The run a piece of `origin` at `[base, base + len)` occupies: with its guard granules where it
/// has them.
fn with_guards(base: *mut u8, len: usize, origin: Origin) -> (*mut u8, usize) {
    if origin.is_run() && origin.guarded() {
        (
            base.wrapping_sub(GUARD_BELOW * GRANULE),
            len + (GUARD_BELOW + GUARD_ABOVE) * GRANULE,
        )
    } else {
        (base, len)
    }
}

/// Purges the dirty runs given back `delay_ms` or longer before `now` (every one when `delay_ms`
/// is 0), oldest first: each taken out under the lock, decommitted without it, indexed clean
/// (joined with the clean runs around it; a range all clean may then go back to the OS). A run
/// cut from a dirty one keeps its time, so it may wait a little longer than the delay, until the
/// runs given back before it are purged.
pub fn purge_expired(now: u32, delay_ms: u32) {
    if !ENABLED {
        return;
    }
    loop {
        let (p, len, r) = {
            let mut a = ARENAS.lock();
            let Some((r, g, n)) = a.take_expired(now, delay_ms) else {
                return;
            };
            // SAFETY: g < granules of range r, inside its mapping.
            (unsafe { a.ranges[r].base.add(g * GRANULE) }, n * GRANULE, r)
        };
        // Out of the address map (a dirty run is a freed span's, marked as one): clean runs are
        // foreign, as what another thread may take and mark next.
        addr_map::set(Kind::Span, p, len, false);
        // SAFETY: a free run taken out of the index: ours alone, unused.
        unsafe {
            writable_again(p, len, r);
            os::decommit(p, len);
            index_run(p, len, Origin::run(r, false), false, false);
        }
    }
}

/// Takes the `more` bytes (whole granules) just after `[base, base + len)`, memory of `origin`
/// marked `kind`, where they are free: the run after it in its arena (a clean one faults in only
/// what is touched; a dirty one holds old contents; with guards, the run after the guard above,
/// which moves up), or the pages after a mapping of its own where the OS grows it in place
/// (`mremap`, when the address space after it is free: zero). Writable and marked; false,
/// nothing changed, otherwise.
///
/// # Safety
/// `[base, base + len)` is ours, of `origin`, marked `kind`; for a mapping, it ends its mapping
/// (else the OS refuses and nothing changes).
pub unsafe fn extend(base: *mut u8, len: usize, more: usize, origin: Origin, kind: Kind) -> bool {
    debug_assert!(more % GRANULE == 0 && (origin.is_run() || !origin.guarded()));
    // SAFETY: base + len is the address just past our memory (no overflow: a mapping ends there).
    let end = unsafe { base.add(len) };
    // SAFETY: a mapping of its own, which [base, base + len) ends (caller).
    let had = if origin.is_run() {
        take_after(end, more, origin)
    } else {
        unsafe { os::grow_in_place(base, len, len + more) }
    };
    if !had || addr_map::set(kind, end, more, true) {
        return had;
    }
    // Cannot mark it: the growth goes back (a run to its arena, the guard back where it was; a
    // mapping's tail, which only a remap made, to the OS).
    // SAFETY: [end, end + more) was just had, unused, writable, not marked.
    unsafe {
        if origin.is_run() {
            give_tail(end, more, origin, kind, false)
        } else {
            os::unmap_part(end, more)
        }
    }
    false
}

/// A run of `len` bytes (whole granules, at most [`MAX_RUN`]) at a multiple of `align` (at most
/// [`MAX_ALIGN`]) cut from an arena (`dirty_ok` as [`Arenas::take`]'s; `guard`: with
/// guards below and above it, [`SPAN_GUARDS`]), committed and writable. None when no arena holds it
/// and no new range can be mapped, or the OS refuses to commit it.
fn take_run(len: usize, align: usize, dirty_ok: bool, guard: bool) -> Option<Piece> {
    if !ENABLED {
        return None;
    }
    let (below, above) = if guard {
        (GUARD_BELOW, GUARD_ABOVE)
    } else {
        (0, 0)
    };
    let n = len / GRANULE + below + above;
    loop {
        let want = {
            let mut a = ARENAS.lock();
            if let Some((r, g, dirty)) = a.take(n, align, below, dirty_ok) {
                let plan = a.protect_cut(r, g, n, below, above);
                // SAFETY: g < granules of range r, inside its mapping.
                let p = unsafe { a.ranges[r].base.add(g * GRANULE) };
                drop(a);
                let origin = Origin::run(r, guard);
                // SAFETY: a run just taken, ours alone: dirty (committed) or decommitted.
                return unsafe { usable(p, n * GRANULE, origin, dirty, plan) }.then(|| Piece {
                    base: p.wrapping_add(below * GRANULE),
                    origin,
                    zero: !dirty,
                });
            }
            a.free_slot()?;
            a.next_size()
        };
        let until = REFUSED_UNTIL.load(Relaxed);
        if until != 0 && (until.wrapping_sub(os::now_ms()) as i32) > 0 {
            return None;
        }
        // Mapped without the lock; another thread may map one meanwhile (then both are kept).
        if !grow(want, n * GRANULE + align) {
            return None;
        }
    }
}

/// Makes the run `[p, p + len)` just taken usable: committed where it is clean, and protected as
/// `plan` says (writable where it was not, its guards inaccessible). False where the OS refuses:
/// a clean run goes back to the index; one that cannot be made writable is given up, its address
/// space lost to the arena (its range then never goes back whole).
///
/// # Safety
/// A run of `origin` just taken out of the index, ours alone; decommitted unless `dirty`; `plan`
/// made for it (and, for a growth in place, for the span's guard above that it moves,
/// [`take_after`]).
unsafe fn usable(p: *mut u8, len: usize, origin: Origin, dirty: bool, plan: Reprotect) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if !dirty && !os::commit(p, len) {
            index_run(p, len, origin, false, false);
            return false;
        }
        if !plan.apply() {
            // A dirty run is marked a span still: out of the map before its memory goes.
            addr_map::set(Kind::Span, p, len, false);
            os::unmap_part(p, len);
            return false;
        }
    }
    true
}

/// The system calls that make a run just cut what [`Arenas::protect_cut`] recorded for it.
#[must_use]
struct Reprotect {
    r: usize,
    base: *mut u8,
    /// Granules to make read-write, `[from, to)`.
    rw: Option<(usize, usize)>,
    /// Guards to make inaccessible, `[from, to)`.
    guards: [Option<(usize, usize)>; 2],
}

impl Reprotect {
    /// Makes the calls. False when the OS refused to make the body writable (the run is then of
    /// no use; its records say [`UNKNOWN`]); a guard it refused is recorded [`UNKNOWN`], and the
    /// span goes without it.
    ///
    /// # Safety
    /// The granules named are ours alone: a run just cut, or a span's guard.
    unsafe fn apply(self) -> bool {
        // SAFETY: granules of range r, inside its mapping, ours alone (caller).
        unsafe {
            if let Some((a, b)) = self.rw {
                if !os::protect(self.base.add(a * GRANULE), (b - a) * GRANULE, true) {
                    ARENAS.lock().set_prot(self.r, a, b, UNKNOWN);
                    return false;
                }
            }
            for (a, b) in self.guards.into_iter().flatten() {
                if !os::guard(self.base.add(a * GRANULE), (b - a) * GRANULE) {
                    ARENAS.lock().set_prot(self.r, a, b, UNKNOWN);
                }
            }
        }
        true
    }
}

/// Makes the free run `[p, p + len)` of range `r`, out of the index and ours alone, writable
/// where its records say otherwise (old guards, a read-only body), before it is decommitted:
/// clean runs are all writable, so a clean cut makes no call but its guards' and the records
/// hold whatever a decommit does to protection on the OS. Where the OS refuses, the records say
/// [`UNKNOWN`]. Nothing to do without `hardened` (nothing is ever protected).
///
/// # Safety
/// As said: a free run of range `r`, out of the index.
unsafe fn writable_again(p: *mut u8, len: usize, r: usize) {
    if !cfg!(feature = "hardened") {
        return;
    }
    let (base, not_rw) = {
        let mut a = ARENAS.lock();
        let base = a.ranges[r].base;
        let g = (p as usize - base as usize) / GRANULE;
        (base, a.set_prot(r, g, g + len / GRANULE, RW))
    };
    if let Some((from, to)) = not_rw {
        // SAFETY: granules of that run (caller), inside range r's mapping.
        if unsafe { !os::protect(base.add(from * GRANULE), (to - from) * GRANULE, true) } {
            ARENAS.lock().set_prot(r, from, to, UNKNOWN);
        }
    }
}

/// A mapping of its own of `len` bytes at a multiple of `align`, with [`GUARD`] inaccessible
/// below it when `guard` and the OS makes one ([`os::HAS_GUARD`]; where it refuses, too many
/// mappings, the mapping goes unguarded). None when the OS has no memory.
fn map_own(len: usize, align: usize, guard: bool) -> Option<Piece> {
    let below = if guard && os::HAS_GUARD { GUARD } else { 0 };
    debug_assert!(below % align == 0 || align > GUARD);
    let g = os::map_aligned(len + below, align);
    if g.is_null() {
        return None;
    }
    // SAFETY: [g, g + below) is the start of our own fresh mapping, unused; the memory is the
    // rest of it (aligned: below is a multiple of align).
    unsafe {
        let guarded = below != 0
            && (os::guard(g, below) || {
                os::unmap_part(g, below);
                false
            });
        let origin = Origin::new_mapping();
        let origin = if guarded {
            Origin(origin.0 | GUARDED)
        } else {
            origin
        };
        Some(Piece {
            base: g.add(below),
            origin,
            zero: true,
        })
    }
}

/// Takes the `len` bytes (whole granules) at `at` of the arena `origin` when they are all free
/// there (one run, clean or dirty), usable ([`usable`]). False when any of them is in use, or `at`
/// is the range's end.
fn take_after(at: *mut u8, len: usize, origin: Origin) -> bool {
    let r = origin.range();
    // With guards, `at` starts the span's guard above: the run after it is taken, and the guard
    // moves up to its end.
    let above = if origin.guarded() { GUARD_ABOVE } else { 0 };
    let n = len / GRANULE;
    let taken = {
        let mut a = ARENAS.lock();
        let g = (at as usize - a.ranges[r].base as usize) / GRANULE;
        a.take_at(r, g + above, n)
            .map(|dirty| (dirty, a.protect_cut(r, g, n + above, 0, above)))
    };
    // SAFETY: a run just taken, ours alone: dirty (committed) or decommitted; the plan covers it
    // and the span's own guard before it.
    taken.is_some_and(|(dirty, plan)| unsafe {
        usable(at.add(above * GRANULE), len, origin, dirty, plan)
    })
}

/// Maps a range of `want` bytes (or less, down to `least`) and adds it, all one free run; false
/// when the OS refuses even `least` or no more ranges fit.
fn grow(want: usize, least: usize) -> bool {
    let least = (least + RANGE_GUARD).next_multiple_of(MAX_ALIGN);
    let mut size = want;
    let base = loop {
        let b = os::reserve_aligned(size, MAX_ALIGN);
        if !b.is_null() {
            break b;
        }
        if size <= least {
            // Never 0 (that is "no pause").
            REFUSED_UNTIL.store(os::now_ms().wrapping_add(REFUSED_PAUSE_MS) | 1, Relaxed);
            return false;
        }
        size = (size / 2).max(least);
    };
    // With span guards, the range's first RANGE_GUARD bytes are one (where the OS refuses, the
    // range goes without).
    // SAFETY: the start of our own fresh mapping, unused.
    let _ = SPAN_GUARDS && unsafe { os::guard(base, RANGE_GUARD) };
    let granules = (size - RANGE_GUARD) / GRANULE;
    let meta_len = (granules * size_of::<Granule>()).next_multiple_of(os::page_size());
    let meta = os::map(meta_len).cast::<Granule>();
    if meta.is_null() {
        // SAFETY: our own fresh mapping, unknown to anyone.
        unsafe { os::unmap(base, size) };
        return false;
    }
    let mut a = ARENAS.lock();
    let Some(r) = a.free_slot() else {
        drop(a);
        // SAFETY: both our own fresh mappings, unknown to anyone.
        unsafe {
            os::unmap(base, size);
            os::unmap(meta.cast(), meta_len);
        }
        return false;
    };
    a.ranges[r] = Range {
        // SAFETY: inside the mapping (size > RANGE_GUARD: it holds at least `least`).
        base: unsafe { base.add(RANGE_GUARD) },
        granules,
        meta,
    };
    a.n = a.n.max(r + 1);
    a.live += 1;
    a.idle += 1; // all free until the take it was mapped for
    a.total += granules;
    a.insert(r, 0, granules, false, 0);
    true
}

/// What [`take`] had, unmarked, back where it came from at once (see [`give`]).
///
/// # Safety
/// As [`give`]'s, and out of the address map.
unsafe fn release(base: *mut u8, len: usize, origin: Origin) {
    // SAFETY: ours and unused (caller). A mapping's part can go back alone where the OS unmaps
    // parts (elsewhere a mapping is never cut: this is all of it); its guard goes with its first
    // unit, which starts where the guard ends.
    unsafe {
        if origin.is_run() {
            let (base, len) = with_guards(base, len, origin);
            writable_again(base, len, origin.range());
            os::decommit(base, len);
            return index_run(base, len, origin, false, false);
        }
        if os::PARTIAL_UNMAP {
            os::unmap_part(base, len)
        } else {
            os::unmap(base, len)
        }
        if origin.guarded() {
            os::unmap_part(base.sub(GUARD), GUARD)
        }
    }
}

/// The run `[base, base + len)` of `origin` back in the index, dirty or clean (decommitted), and
/// its range back to the OS when that frees it and enough are idle. A dirty run of a guarded
/// span is kept apart ([`Arenas::keep`]).
///
/// # Safety
/// A run of that arena, whole granules, out of the index; nothing refers to it; decommitted
/// unless `dirty`. `read_only`: its writable granules were made read-only (`hardened-full`).
unsafe fn index_run(base: *mut u8, len: usize, origin: Origin, dirty: bool, read_only: bool) {
    let r = origin.range();
    let now = if dirty { os::now_ms() } else { 0 };
    let gone = {
        let mut a = ARENAS.lock();
        let g = (base as usize - a.ranges[r].base as usize) / GRANULE;
        debug_assert!(g + len / GRANULE <= a.ranges[r].granules);
        if read_only {
            for i in g..g + len / GRANULE {
                let m = a.at(r, i);
                if m.prot == RW {
                    m.prot = READ;
                }
            }
        }
        if dirty && origin.guarded() {
            a.keep(r, g, len / GRANULE, now);
            None
        } else {
            a.give(r, g, len / GRANULE, dirty, now)
        }
    };
    if let Some((range, meta_len)) = gone {
        // SAFETY: the range left the arenas under the lock: all of it free, nobody's; its records
        // are read by nobody either.
        unsafe {
            os::unmap(
                range.base.sub(RANGE_GUARD),
                RANGE_GUARD + range.granules * GRANULE,
            );
            os::unmap(range.meta.cast(), meta_len);
        }
    }
}

/// Bytes in the arenas' dirty runs (freed spans waiting resident).
#[cfg(test)]
pub fn dirty_bytes() -> usize {
    ARENAS.lock().dirty * GRANULE
}

/// Bytes free in the arenas and bytes of all their ranges (address space, not memory).
#[cfg(test)]
pub fn bytes() -> (usize, usize) {
    let a = ARENAS.lock();
    (a.free * GRANULE, a.total * GRANULE)
}

/// Takes the arenas' lock for `fork` (`thread/fork.rs` takes every lock in the lock order).
pub(crate) fn lock_for_fork() {
    core::mem::forget(ARENAS.lock());
}

/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guard forgotten.
    unsafe { ARENAS.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLANK: Granule = Granule {
        head: 0,
        tail: 0,
        next: 0,
        prev: 0,
        older: 0,
        newer: 0,
        at: 0,
        dirty: false,
        kept: false,
        prot: RW,
    };

    /// The index on a range of its own (not the process's arenas): runs cut, aligned, given back
    /// and joined, found by bin whatever their number.
    #[test]
    fn runs_are_cut_aligned_joined_and_found_by_bin() {
        let granules = 256;
        let mut meta = std::vec![BLANK; granules];
        let mut a = one_range(&mut meta);
        let base = a.ranges[0].base;
        // All free: the range counts as idle.
        a.idle = 1;
        a.insert(0, 0, granules, false, 0);
        // One granule at a time: consecutive, from the start.
        let got: std::vec::Vec<_> = (0..10)
            .map(|_| a.take(1, GRANULE, 0, true).unwrap())
            .collect();
        assert_eq!(
            got,
            (0..10).map(|g| (0, g, false)).collect::<std::vec::Vec<_>>()
        );
        assert_eq!(a.free, granules - 10);
        // Aligned to 2 MiB (8 granules): the first such start after them.
        assert_eq!(a.take(4, 2 << 20, 0, true), Some((0, 16, false)));
        // The gap [10, 16) is a run of 6: an exact request takes it.
        assert_eq!(a.take(6, GRANULE, 0, true), Some((0, 10, false)));
        // A span ending at granule 20 grows into the free run after it, in place; not into a
        // granule in use, nor from inside a run.
        assert_eq!(a.take_at(0, 20, 3), Some(false));
        assert_eq!(a.at(0, 23).head as usize, granules - 23);
        assert_eq!(a.take_at(0, 19, 1), None, "in use");
        assert_eq!(a.take_at(0, 24, 1), None, "inside a free run");
        assert!(a.give(0, 20, 3, false, 0).is_none());
        // Give back every other single granule: none joins; a request of 2 cannot use them.
        for g in (0..10).step_by(2) {
            a.give(0, g, 1, false, 0);
        }
        assert_eq!(
            a.bins[0].nonempty & 1,
            1,
            "runs of one granule wait in bin 0"
        );
        assert_eq!(a.take(2, GRANULE, 0, true), Some((0, 20, false)));
        // Give back the odd ones: all of [0, 10) joins into one run, then with [10, 16) and
        // [16, 20) into [0, 22): one run.
        for g in (1..10).step_by(2) {
            a.give(0, g, 1, false, 0);
        }
        a.give(0, 10, 6, false, 0);
        a.give(0, 16, 4, false, 0);
        a.give(0, 20, 2, false, 0);
        assert_eq!(a.free, granules, "everything back");
        assert_eq!(a.at(0, 0).head as usize, granules, "one run again");
        assert_eq!(a.bins[0].nonempty, 1 << EXACT_BINS);
        // Too long for any run.
        assert_eq!(a.take(granules + 1, GRANULE, 0, true), None);
        assert_eq!(a.take(granules, GRANULE, 0, true), Some((0, 0, false)));
        assert_eq!(a.bins[0].nonempty, 0);
        assert_eq!(a.idle, 0);
        // A second range: while the first is in use, the second, freed whole, stays (idle);
        // then the first, freed whole too, leaves (one idle range is enough).
        let mut meta2 = meta.clone();
        a.ranges[1] = Range {
            base: (2usize << 30) as *mut u8,
            granules,
            meta: meta2.as_mut_ptr(),
        };
        (a.n, a.live, a.idle) = (2, 2, 1);
        a.insert(1, 0, granules, false, 0);
        assert_eq!(a.take(3, GRANULE, 0, true), Some((1, 0, false)));
        assert_eq!(a.idle, 0);
        assert!(
            a.give(1, 0, 3, false, 0).is_none(),
            "the only idle range stays"
        );
        assert_eq!(a.idle, 1);
        let gone = a
            .give(0, 0, granules, false, 0)
            .expect("a second idle range leaves");
        assert_eq!((gone.0.base, a.live, a.idle), (base, 1, 1));
        assert_eq!(a.free_slot(), Some(0), "its slot takes the next range");
        assert_eq!(a.take(granules, GRANULE, 0, true), Some((1, 0, false)));
    }

    /// With `hardened`, a cut records its guards inaccessible and the rest writable, and asks
    /// only for the calls that change something: none for a span cut again where one of the same
    /// length was (the steady state); for a longer one over two freed spans, one call making
    /// the old guards inside it writable, and one for its new guard above.
    #[test]
    #[cfg(feature = "hardened")]
    fn a_cut_changes_protection_only_where_its_records_differ() {
        let mut meta = std::vec![BLANK; 64];
        let mut a = one_range(&mut meta);
        a.idle = 1;
        a.insert(0, 0, 64, false, 0);
        let prot = |a: &mut Arenas, n: usize| {
            (0..n)
                .map(|i| a.at(0, i).prot)
                .collect::<std::vec::Vec<_>>()
        };
        // Two spans of 2 granules, each with its guards: [0, 4) and [4, 8).
        for g in [0, 4] {
            assert_eq!(a.take(4, GRANULE, 1, true), Some((0, g, false)));
            let plan = a.protect_cut(0, g, 4, 1, 1);
            assert_eq!(plan.rw, None, "fresh granules are writable");
            assert_eq!(plan.guards, [Some((g, g + 1)), Some((g + 3, g + 4))]);
        }
        assert_eq!(prot(&mut a, 8), [NONE, RW, RW, NONE, NONE, RW, RW, NONE]);
        // The first given back dirty and cut again at the same length: nothing to do.
        assert!(a.give(0, 0, 4, true, 10).is_none());
        assert_eq!(a.take(4, GRANULE, 1, true), Some((0, 0, true)));
        let plan = a.protect_cut(0, 0, 4, 1, 1);
        assert_eq!((plan.rw, plan.guards), (None, [None, None]));
        // Both given back (one dirty run of 8), then a span of 4 cut from it: the old guards at 3
        // and 4 made writable in one call, a guard made at 5; the one at 0 is there already.
        assert!(a.give(0, 0, 4, true, 20).is_none());
        assert!(a.give(0, 4, 4, true, 20).is_none());
        assert_eq!(a.take(6, GRANULE, 1, true), Some((0, 0, true)));
        let plan = a.protect_cut(0, 0, 6, 1, 1);
        assert_eq!((plan.rw, plan.guards), (Some((3, 5)), [None, Some((5, 6))]));
        assert_eq!(prot(&mut a, 8), [NONE, RW, RW, RW, RW, NONE, RW, NONE]);
        // A free run's old guards are what a purge makes writable before it decommits.
        assert_eq!(a.set_prot(0, 6, 8, RW), Some((7, 8)));
        assert_eq!(a.set_prot(0, 1, 5, RW), None);
        assert_eq!(prot(&mut a, 8), [NONE, RW, RW, RW, RW, NONE, RW, RW]);
    }

    /// An index over one range of `granules` at 64 MiB (2 MiB-aligned, never dereferenced), with
    /// no free run yet: its records in `meta`.
    fn one_range(meta: &mut std::vec::Vec<Granule>) -> Arenas {
        let granules = meta.len();
        let mut a = Arenas {
            ranges: [NO_RANGE; MAX_RANGES],
            n: 1,
            live: 1,
            idle: 0,
            idle_max: 1,
            bins: [NO_BINS; 2],
            oldest: NIL,
            newest: NIL,
            free: 0,
            dirty: 0,
            total: granules,
        };
        a.ranges[0] = Range {
            base: (64usize << 20) as *mut u8,
            granules,
            meta: meta.as_mut_ptr(),
        };
        a
    }

    /// A run that holds an aligned request exactly (or with a little to spare) is used, not
    /// passed over for a longer one because it is shorter than the request plus the alignment
    /// slack (issue 47); a run whose aligned start leaves too little is not.
    #[test]
    fn an_aligned_request_takes_a_run_that_fits_it_exactly() {
        let blank = BLANK;
        let align = 2 << 20; // 8 granules
        assert_eq!(align / GRANULE, 8);
        // An exactly aligned run of 8, and a long run: the 8 is taken whole, the long run kept.
        let mut meta = std::vec![blank; 256];
        let mut a = one_range(&mut meta);
        a.insert(0, 8, 8, false, 0);
        a.insert(0, 20, 100, false, 0);
        assert_eq!(a.take(8, align, 0, true), Some((0, 8, false)));
        assert_eq!(a.at(0, 20).head, 100, "the long run is not cut");
        assert_eq!(a.free, 100);
        // A run of 10 from granule 7: aligned at 8 it holds 8, leaving one granule each side.
        let mut meta = std::vec![blank; 256];
        let mut a = one_range(&mut meta);
        a.insert(0, 7, 10, false, 0);
        a.insert(0, 20, 100, false, 0);
        assert_eq!(a.take(8, align, 0, true), Some((0, 8, false)));
        assert_eq!((a.at(0, 7).head, a.at(0, 16).head), (1, 1));
        assert_eq!(a.at(0, 20).head, 100);
        // A run of 8 from granule 9 holds no aligned 8: the long run gives them, at 24.
        let mut meta = std::vec![blank; 256];
        let mut a = one_range(&mut meta);
        a.insert(0, 9, 8, false, 0);
        a.insert(0, 20, 100, false, 0);
        assert_eq!(a.take(8, align, 0, true), Some((0, 24, false)));
        assert_eq!(a.at(0, 9).head, 8, "the misaligned run stays free");
        // Without alignment nothing changes: the exact bin first.
        assert_eq!(a.take(8, GRANULE, 0, true), Some((0, 9, false)));
    }

    /// A guarded span's footprint given back dirty is kept apart ([`Arenas::keep`]): a dirty run
    /// given back beside it does not join it, a request of its length takes it whole (its guards
    /// where they were), and purged it goes back clean and joins as any run.
    #[test]
    fn a_kept_run_joins_nothing_until_purged() {
        let mut meta = std::vec![BLANK; 64];
        let mut a = one_range(&mut meta);
        a.idle = 1;
        a.insert(0, 0, 64, false, 0);
        let x = a.take(6, GRANULE, 0, true);
        let y = a.take(9, GRANULE, 0, true);
        assert_eq!((x, y), (Some((0, 0, false)), Some((0, 6, false))));
        a.keep(0, 0, 6, 10);
        assert!(a.give(0, 6, 9, true, 20).is_none());
        assert_eq!(
            (a.at(0, 0).head, a.at(0, 6).head, a.dirty),
            (6, 9, 15),
            "the dirty run at 6 did not join the kept one"
        );
        // Each length takes its own run, the kept one whole.
        assert_eq!(a.take(6, GRANULE, 0, true), Some((0, 0, true)));
        assert_eq!(a.take(9, GRANULE, 0, true), Some((0, 6, true)));
        assert_eq!(a.dirty, 0);
        // Kept again beside a clean run: still apart; purged, it joins the clean rest.
        assert!(a.give(0, 6, 9, false, 0).is_none());
        a.keep(0, 0, 6, 30);
        assert_eq!((a.at(0, 0).head, a.at(0, 6).head), (6, 58));
        let (r, g, n) = a.take_expired(40, 10).expect("expired");
        assert_eq!((r, g, n), (0, 0, 6));
        assert!(a.give(r, g, n, false, 0).is_none());
        assert_eq!((a.at(0, 0).head, a.free, a.dirty), (64, 64, 0));
    }

    /// Dirty runs (given back resident) are taken before clean ones, never join clean neighbours,
    /// and are purged oldest first once they waited the delay, joining the clean runs then.
    #[test]
    fn dirty_runs_are_reused_first_kept_apart_and_purged_oldest_first() {
        let mut meta = std::vec![BLANK; 64];
        let mut a = one_range(&mut meta);
        a.idle = 1;
        a.insert(0, 0, 64, false, 0);
        // Three spans taken, then given back dirty at 10, 20 and 30 ms.
        let spans: std::vec::Vec<_> = (0..3)
            .map(|_| a.take(4, GRANULE, 0, true).unwrap())
            .collect();
        assert_eq!(spans, [(0, 0, false), (0, 4, false), (0, 8, false)]);
        assert!(a.give(0, 8, 4, true, 10).is_none());
        assert!(a.give(0, 0, 4, true, 20).is_none());
        assert_eq!(
            a.at(0, 12).head,
            52,
            "the dirty run at 8 did not join the clean one after it"
        );
        assert_eq!((a.dirty, a.free), (8, 60));
        // A request of 4 takes a dirty run, the newest of its bin first.
        assert_eq!(a.take(4, GRANULE, 0, true), Some((0, 0, true)));
        assert!(a.give(0, 0, 4, true, 20).is_none());
        // The middle span back dirty: the three join, as new as the newest part.
        assert!(a.give(0, 4, 4, true, 30).is_none());
        assert_eq!((a.at(0, 0).head, a.at(0, 0).at, a.dirty), (12, 30, 12));
        // A cut from a dirty run starts at its start; the rest stays dirty.
        assert_eq!(a.take(2, GRANULE, 0, true), Some((0, 0, true)));
        assert_eq!((a.at(0, 2).head, a.dirty), (10, 10));
        assert!(a.give(0, 0, 2, true, 30).is_none());
        // Not expired at 35 with a delay of 10; expired at 40: taken out whole, then back clean,
        // one run again with the clean rest.
        assert_eq!(a.take_expired(35, 10), None);
        let (r, g, n) = a.take_expired(40, 10).expect("expired");
        assert_eq!((r, g, n, a.dirty), (0, 0, 12, 0));
        assert_eq!(a.take_expired(40, 0), None, "no dirty run left");
        assert!(a.give(r, g, n, false, 0).is_none());
        assert_eq!((a.at(0, 0).head, a.free), (64, 64));
        // Ages are read across the clock's wrap.
        assert!(a.take(4, GRANULE, 0, true).is_some());
        assert!(a.give(0, 0, 4, true, u32::MAX - 5).is_none());
        assert_eq!(a.take_expired(3, 10), None);
        assert_eq!(a.take_expired(5, 10), Some((0, 0, 4)));
    }
}
