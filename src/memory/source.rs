//! Where chunks come from, and where they go back for good: regions of units, the huge-page filler.
//!
//! - **Regions and units**: chunks are carved from 4 MiB regions mapped at once (one mmap per 16
//!   chunks), 2 MiB-aligned, each two *units* of 8 chunks, 2 MiB (where a region is one chunk,
//!   the unit is that chunk). A new chunk comes from the fullest unit that has a free one
//!   (TCMalloc Temeraire's filler), so free chunks gather and whole units empty. A chunk given
//!   back (purged) stays mapped in its unit. Regions mapped once the process has mapped the
//!   [`HugePages`](crate::HugePages) threshold of chunks are advised for transparent huge pages
//!   where a unit holds whole ones (a unit is one on x86-64 and on AArch64 with 4 KiB pages; with
//!   16 or 64 KiB pages a huge page is 32 or 512 MiB and nothing is advised); in such a unit a chunk given back keeps its pages (*dirty*, reused first) while another chunk
//!   of the unit is held, and the unit goes back whole, one purge of 2 MiB, when its last chunk
//!   does (as mimalloc v3 purges). The bound on dirty chunks: the larger of 8 MiB and an eighth
//!   of the chunks that exist; above it for longer than the purge delay, the purger purges them
//!   one by one (each splits its huge page), emptiest unit first, down to the bound; `trim`
//!   purges them all. Only above 1024 chunks' worth of free units is address space unmapped, a
//!   unit at a time.
//!
//! Chunks that exist but no heap owns (retained empty, abandoned) are `chunk_lists`' business;
//! a chunk comes here new ([`take_chunk`]) and goes back here for good ([`give_chunks`]).
//!
//! Locks: the region lock, taken after `chunk_lists`' class locks, never before. No system call
//! is made under it: a region is mapped (or cut from an arena) before the lock is taken to record
//! it, as is a larger table of units ([`record`]); what a chunk given back leaves to do (a unit's
//! purge, a unit going back) is done after it is released ([`After`]), as is each purge of a
//! dirty chunk (taken out of its unit meanwhile).

use crate::base::lock::{Lock, Rank};
use crate::checks::hardened;
use crate::chunks::addr_map::Kind;
use crate::chunks::chunk::{self, CHUNK_SIZE, Chunk};
use crate::memory::arena::{self, Origin};
use crate::{base::settings, os};
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Chunks mapped together in one region: 16 where part of a mapping can be unmapped, else 1 (on
/// Windows a reservation is released whole, so each chunk is a reservation of its own; on wasm32
/// memory grown is never returned, so it grows by one chunk at a time).
const REGION_CHUNKS: usize = if os::PARTIAL_UNMAP && os::RETURNS_MEMORY {
    16
} else {
    1
};
/// Chunks per *unit*, the span of chunks the source places and gives back together: 8 (2 MiB)
/// where regions hold 16, else the chunk itself. Fixed, not the OS's huge page (a unit's chunks
/// are the bits of a `u8`): 2 MiB is a transparent huge page on x86-64 and on AArch64 with 4 KiB
/// pages, and units are advised for huge pages only where they hold whole ones
/// ([`units_hold_huge_pages`]); where a huge page is larger (AArch64 with 16 or 64 KiB pages: 32
/// or 512 MiB) a unit is only where the filler places chunks and gives them back.
const UNIT_CHUNKS: usize = if REGION_CHUNKS == 16 { 8 } else { 1 };
const UNIT: usize = UNIT_CHUNKS * CHUNK_SIZE;
/// Every chunk of a unit free.
const ALL: u8 = (((1u16 << UNIT_CHUNKS) - 1) & 0xff) as u8;
const _: () = assert!(UNIT_CHUNKS <= 8 && (REGION_CHUNKS * CHUNK_SIZE) % UNIT == 0);
/// With `hardened` on 64-bit targets where regions hold 16 chunks, each region is a mapping of
/// its own with [`arena::GUARD`] (2 MiB) of address space made inaccessible just below it (mapped
/// with it, unmapped with its first unit: [`arena::Place::Guarded`]), so that a write below
/// the region's first chunk faults, up to 2 MiB below, where it would otherwise land in whatever
/// the OS mapped there (the address map, another region): the underflow of a program's first block
/// of a size, by a store or `memcpy`, or a megabyte below it (issue 41). No memory, no instruction
/// on the allocation path: one `mprotect` per region and a mapping of its own. Not on 32-bit
/// targets, whose address space is too small to give a third of it to guards, nor where the OS
/// has no guard ([`os::HAS_GUARD`]: a region would then not start at its reservation).
const GUARDED: bool = cfg!(feature = "hardened")
    && cfg!(target_pointer_width = "64")
    && REGION_CHUNKS == 16
    && os::HAS_GUARD;
const _: () = assert!(arena::GUARD % UNIT == 0);
/// Whole free units (purged) kept mapped for reuse, 256 MiB of address space; beyond, a unit that
/// becomes free is unmapped.
const FREE_UNITS_MAX: usize = 1024 / UNIT_CHUNKS;
/// The bound on free chunks kept resident in partly used huge units (so that their huge page stays
/// whole): the larger of 8 MiB and an eighth of the chunks that exist ([`HELD`]). Above it for
/// longer than the purge delay, the purger purges such chunks one by one, emptiest unit first,
/// splitting their huge pages, until back under it; `trim` purges them all.
const DIRTY_MIN_CHUNKS: usize = (8 << 20) / CHUNK_SIZE;
const DIRTY_SHARE: usize = 8;

// ---------------------------------------------------------------------------------------------------
// Regions and units.
//
// Regions are mapped UNIT-aligned; every unit of every region is recorded (sorted by address) until
// its address space goes back. A chunk of a unit is *held* (it exists: a heap, an empty list or the
// abandoned list has it) or *free* (the source's, for the next request). New chunks come from the
// fullest unit that has a free chunk (TCMalloc Temeraire's filler), so that free chunks gather in
// few units and whole units empty; a unit advised for huge pages keeps the pages of its free chunks
// (*dirty*) while some chunk of it is held, and goes back whole, one purge of 2 MiB, when its last
// chunk does (mimalloc v3 purges in such units too): purging one 256 KiB chunk of a huge page
// splits it into 512 small ones, which frag-drift paid 1.9x for (benches/results/faults.md).

#[derive(Clone, Copy)]
struct Unit {
    base: *mut u8,
    /// Bit i: chunk i is free (never handed out since mapped or purged, or given back). The others
    /// are held.
    free: u8,
    /// Free chunks whose pages are still resident (given back to a partly used huge unit without a
    /// purge); a subset of `free`, zero when `free == ALL` (a unit that empties is purged whole).
    dirty: u8,
    /// Advised `MADV_HUGEPAGE` when mapped.
    huge: bool,
    /// A chunk of it was purged alone since it was last purged whole (its huge page was split).
    split: bool,
    /// Where its region came from (an arena's run, or a mapping of its own; the first unit of a
    /// region with a guard below it ([`GUARDED`]) carries the guard), where it goes back ([`arena::give`]).
    origin: Origin,
    /// Its neighbours (their bases; null at an end) in its bucket's list, while it has a free
    /// chunk ([`bucket`]).
    next: *mut u8,
    prev: *mut u8,
}

/// Buckets of units with a free chunk: by held chunks (0 to `UNIT_CHUNKS - 1`), and whether one
/// is dirty.
const BUCKETS: usize = 2 * UNIT_CHUNKS;
const _: () = assert!(BUCKETS <= 16);

/// The bucket of unit `u` (its held chunks, twice, plus one when a free chunk is dirty), or None
/// when it has no free chunk. A higher bucket is a fuller unit, the dirty one first: the filler's
/// order, so the next chunk comes from the highest non-empty bucket and the purger's next dirty
/// chunk from the lowest odd one.
fn bucket(u: &Unit) -> Option<usize> {
    if u.free == 0 {
        return None;
    }
    let held = UNIT_CHUNKS - u.free.count_ones() as usize;
    Some(held * 2 + usize::from(u.dirty != 0))
}

struct Regions {
    /// `units[..n]`, sorted by base: every unit mapped and not yet unmapped (an OS mapping of its
    /// own, `cap` records, grown by doubling).
    units: *mut Unit,
    n: usize,
    cap: usize,
    /// Units whose chunks are all free.
    nfree: usize,
    /// Dirty chunks (the sum of `units[..n].dirty`'s bits).
    dirty: usize,
    /// Since when `dirty` has been above the bound (see [`DIRTY_MIN_CHUNKS`]), if it is.
    over_since: Option<u32>,
    /// The index of units with a free chunk: each bucket's first unit (its base; null: none),
    /// and a bit per non-empty bucket. A chunk is taken, and a dirty chunk purged, through it in
    /// a few steps whatever the number of units (no scan under the lock).
    heads: [*mut u8; BUCKETS],
    filled: u16,
}

// SAFETY: the raw pointers name OS mappings owned by the source; access is serialised by the lock.
unsafe impl Send for Regions {}

static REGIONS: Lock<Regions> = Lock::new(Rank::Regions, Regions::new());

/// What [`Regions::give`] leaves to its caller: a system call, made without the regions'
/// lock on memory nobody can reach meanwhile (no lock is held across a system call on the chunk
/// path).
#[must_use]
enum After {
    Nothing,
    /// Purge the unit based here, then put it back ([`Regions::purged_unit`]); it is out of its
    /// bucket until then.
    PurgeUnit(*mut u8),
    /// Give back a unit the regions no longer record: to its arena, or to the OS.
    Give(Unit),
}

impl After {
    /// Does it; `purged_unit` is called (with the lock) once a unit is purged.
    ///
    /// # Safety
    /// From [`Regions::give`], once, without the regions' lock.
    unsafe fn run(self, purged_unit: impl FnOnce(*mut u8)) {
        match self {
            After::Nothing => {}
            After::PurgeUnit(base) => {
                // SAFETY: every chunk of the unit is free and out of every bucket: nobody refers
                // to any of them; purging zeroes the headers, so they read as not live (magic 0).
                unsafe { os::purge(base, UNIT) };
                purged_unit(base);
            }
            // SAFETY: a whole, UNIT-aligned part of a region of ours (the whole region where a
            // region is one unit), which nobody refers to; one cut from an arena goes back to it
            // (purged there), its address space kept for the next region or span.
            After::Give(u) => unsafe { arena::give(u.base, UNIT, u.origin, Kind::Chunk, false) },
        }
    }
}

impl Regions {
    /// No unit yet (the table is mapped at the first region).
    const fn new() -> Regions {
        Regions {
            units: ptr::null_mut(),
            n: 0,
            cap: 0,
            nfree: 0,
            dirty: 0,
            over_since: None,
            heads: [ptr::null_mut(); BUCKETS],
            filled: 0,
        }
    }

    /// The index of the unit based at `base` (a unit recorded).
    fn at(&mut self, base: *mut u8) -> usize {
        let Ok(i) = self.find(base) else {
            unreachable!("a unit of the buckets is recorded")
        };
        i
    }

    /// Takes unit `i` out of its bucket (before its `free` or `dirty` change, or it goes).
    fn unlink(&mut self, i: usize) {
        let u = self.units()[i];
        let Some(b) = bucket(&u) else { return };
        if u.prev.is_null() {
            self.heads[b] = u.next;
            if u.next.is_null() {
                self.filled &= !(1 << b);
            }
        } else {
            let j = self.at(u.prev);
            self.units()[j].next = u.next;
        }
        if !u.next.is_null() {
            let j = self.at(u.next);
            self.units()[j].prev = u.prev;
        }
    }

    /// Puts unit `i` first in its bucket (after its `free` or `dirty` changed, or it came).
    fn link(&mut self, i: usize) {
        let u = self.units()[i];
        let Some(b) = bucket(&u) else { return };
        let head = self.heads[b];
        if !head.is_null() {
            let j = self.at(head);
            self.units()[j].prev = u.base;
        }
        let u = &mut self.units()[i];
        (u.next, u.prev) = (head, ptr::null_mut());
        self.heads[b] = u.base;
        self.filled |= 1 << b;
    }

    fn units(&mut self) -> &mut [Unit] {
        if self.n == 0 {
            return &mut [];
        }
        // SAFETY: units[..n] are initialised records in our own mapping, guarded by the lock.
        unsafe { core::slice::from_raw_parts_mut(self.units, self.n) }
    }

    /// The index of the unit that holds `base`, or where it would be inserted.
    fn find(&mut self, base: *mut u8) -> Result<usize, usize> {
        let key = base as usize & !(UNIT - 1);
        self.units()
            .binary_search_by(|u| (u.base as usize).cmp(&key))
    }

    /// The capacity the table needs for `k` more units, when it has less (twice what it has, at
    /// least 4096 records); None when they fit.
    fn room_for(&self, k: usize) -> Option<usize> {
        (self.n + k > self.cap).then(|| (self.cap * 2).max(4096).max(self.n + k))
    }

    /// Puts the table `t` of `cap` records (mapped by the caller, at least `n` of them) in place
    /// of the current one, its records copied over; returns the old one (null, 0 when none) for
    /// the caller to unmap once the lock is released.
    ///
    /// # Safety
    /// `t` is a fresh mapping of ours of `cap * size_of::<Unit>()` bytes, `cap >= self.n`.
    unsafe fn swap_table(&mut self, t: *mut Unit, cap: usize) -> (*mut Unit, usize) {
        debug_assert!(cap >= self.n);
        if self.n > 0 {
            // SAFETY: both tables are ours and distinct; the new one holds cap >= n records.
            unsafe { ptr::copy_nonoverlapping(self.units, t, self.n) };
        }
        let old = (self.units, self.cap);
        (self.units, self.cap) = (t, cap);
        old
    }

    /// Records the region `[m, m + len)`, whole units, in a table with room for them
    /// ([`room_for`](Self::room_for) is None).
    fn insert(&mut self, m: *mut u8, len: usize, huge: bool, origin: Origin) {
        let k = len / UNIT;
        assert!(
            self.n + k <= self.cap,
            "the units table has room (room_for)"
        );
        let Err(at) = self.find(m) else {
            unreachable!("a fresh region is not recorded yet")
        };
        // SAFETY: at <= n and n + k <= cap: the records move up within the table.
        unsafe {
            ptr::copy(self.units.add(at), self.units.add(at + k), self.n - at);
            for i in 0..k {
                self.units.add(at + i).write(Unit {
                    base: m.add(i * UNIT),
                    free: ALL,
                    dirty: 0,
                    huge,
                    split: false,
                    origin: if i == 0 { origin } else { origin.unguarded() },
                    next: ptr::null_mut(),
                    prev: ptr::null_mut(),
                });
            }
        }
        self.n += k;
        self.nfree += k;
        // Linked from the top, so the region's first unit is first in its bucket: chunks are
        // taken from its start up (with `hardened`, the first right above the guard).
        for i in (at..at + k).rev() {
            self.link(i);
        }
    }

    /// A free chunk of the fullest unit that has one (a dirty one first: its pages are resident),
    /// or null when every chunk is held.
    fn take(&mut self) -> *mut u8 {
        if self.filled == 0 {
            return ptr::null_mut();
        }
        let b = 15 - self.filled.leading_zeros() as usize;
        let i = self.at(self.heads[b]);
        self.unlink(i);
        let (mut nfree, mut dirty) = (self.nfree, self.dirty);
        let u = &mut self.units()[i];
        if u.free == ALL {
            nfree -= 1;
        }
        let pick = if u.dirty != 0 { u.dirty } else { u.free };
        let bit = pick & pick.wrapping_neg();
        if u.dirty & bit != 0 {
            dirty -= 1;
        }
        u.free &= !bit;
        u.dirty &= !bit;
        // SAFETY: chunk `bit`'s index lies inside the unit.
        let p = unsafe { u.base.add(bit.trailing_zeros() as usize * CHUNK_SIZE) };
        (self.nfree, self.dirty) = (nfree, dirty);
        self.link(i);
        p
    }

    /// Whether the unit of chunk `base` was advised for huge pages (fixed while it is recorded).
    fn is_huge(&mut self, base: *mut u8) -> bool {
        self.find(base).is_ok_and(|i| self.units()[i].huge)
    }

    /// Takes back a chunk nobody refers to, `purged` already (the caller purged it outside the
    /// lock: a unit not advised for huge pages) or not: then kept resident while its huge unit is
    /// partly used, else its unit is purged whole, one 2 MiB purge for its dirty chunks with it.
    /// A unit that becomes all free beyond [`FREE_UNITS_MAX`] such units is unmapped.
    ///
    /// The system call this leaves to its caller, to make once the lock is released ([`After`]).
    ///
    /// # Safety
    /// `base` must be a held chunk of ours that nobody refers to any more.
    unsafe fn give(&mut self, base: *mut u8, purged: bool) -> After {
        let Ok(i) = self.find(base) else {
            unreachable!("every chunk lies in a recorded unit")
        };
        let bit = 1u8 << ((base as usize & (UNIT - 1)) / CHUNK_SIZE);
        self.unlink(i);
        let u = self.units()[i];
        debug_assert_eq!(u.free & bit, 0);
        let free = u.free | bit;
        if free != ALL {
            if purged {
                // Its pages are gone (in a huge unit: purged alone, so its huge page is split).
                PURGED.fetch_add(1, Ordering::Relaxed);
                self.units()[i].split |= u.huge;
            } else {
                // The huge page stays whole: the chunk's pages stay resident until the unit
                // empties, or the purger's bound or `trim` purges them.
                // SAFETY: the chunk is ours and unused (caller): its header now reads as not live
                // to the hardened checks, as a purged one's does.
                unsafe { (*chunk::of(base)).magic = 0 };
                self.units()[i].dirty |= bit;
                self.dirty += 1;
            }
            self.units()[i].free = free;
            self.link(i);
            return After::Nothing;
        }
        // The unit is all free: this chunk (purged by the caller already, or with its unit below)
        // and the unit's dirty ones, counted here, once, whoever purges them.
        let was_dirty = u.dirty.count_ones() as usize;
        PURGED.fetch_add(1 + was_dirty, Ordering::Relaxed);
        self.dirty -= was_dirty;
        if self.nfree >= FREE_UNITS_MAX {
            // SAFETY: every chunk of the unit is free: nobody refers to any of them. (Out of its
            // bucket already.)
            return After::Give(unsafe { self.remove(i) });
        }
        let u = &mut self.units()[i];
        (u.free, u.dirty, u.split) = (ALL, 0, false);
        self.nfree += 1;
        if !purged || was_dirty > 0 {
            // Every chunk of the unit is free and nobody refers to any of them: one purge of the
            // whole unit (2 MiB), its dirty chunks with this one, by the caller without the lock.
            // Meanwhile the unit stays out of its bucket: no chunk of it is handed out.
            return After::PurgeUnit(self.units()[i].base);
        }
        self.link(i);
        After::Nothing
    }

    /// A dirty chunk of the emptiest unit that has one, taken out (held, for the caller to purge
    /// without the lock and give back purged), or None when no chunk is dirty.
    fn take_dirty(&mut self) -> Option<*mut u8> {
        // The emptiest unit with a dirty chunk: the lowest odd bucket.
        let dirty_buckets = self.filled & 0xaaaa;
        if dirty_buckets == 0 {
            return None;
        }
        let i = self.at(self.heads[dirty_buckets.trailing_zeros() as usize]);
        self.unlink(i);
        let u = &mut self.units()[i];
        let bit = u.dirty & u.dirty.wrapping_neg();
        u.dirty &= !bit;
        u.free &= !bit;
        // SAFETY: chunk `bit`'s index lies inside the unit.
        let p = unsafe { u.base.add(bit.trailing_zeros() as usize * CHUNK_SIZE) };
        self.dirty -= 1;
        self.link(i);
        Some(p)
    }

    /// A unit purged whole after [`Regions::give`] said so goes back into its bucket.
    fn purged_unit(&mut self, base: *mut u8) {
        let i = self.at(base);
        self.link(i);
    }

    /// Forgets unit `i`, whose chunks are all free, and returns it for its caller to give back
    /// ([`After::Give`]).
    ///
    /// # Safety
    /// Nobody refers to any chunk of the unit; it is out of its bucket ([`Regions::unlink`]).
    unsafe fn remove(&mut self, i: usize) -> Unit {
        let u = self.units()[i];
        // SAFETY: i < n: the records after it move down within the table.
        unsafe { ptr::copy(self.units.add(i + 1), self.units.add(i), self.n - i - 1) };
        self.n -= 1;
        u
    }

    /// Chunk bytes in huge pages by our own count: 2 MiB units advised `MADV_HUGEPAGE`, some chunk
    /// of which was handed out since the unit was last purged whole, and none purged alone since
    /// (which split the huge page).
    fn huge_bytes(&mut self) -> usize {
        let n = self
            .units()
            .iter()
            .filter(|u| u.huge && !u.split && u.free != ALL)
            .count();
        n * UNIT
    }
}

/// Whether a unit holds whole huge pages of `huge` bytes, so that advising it can get it huge pages
/// and purging it whole gives them back whole.
fn units_hold_huge_pages(huge: usize) -> bool {
    UNIT % huge == 0
}

/// The bound on dirty chunks (see [`DIRTY_MIN_CHUNKS`]).
fn dirty_bound() -> usize {
    DIRTY_MIN_CHUNKS.max(HELD.load(Ordering::Relaxed) / DIRTY_SHARE)
}

/// Records the region `[m, m + len)` in the shared table: when the table must grow, the larger
/// one is mapped without the lock, put in place under it, and the old one unmapped after (so no
/// system call is made under the region lock). False when the OS refuses the larger table.
fn record(m: *mut u8, len: usize, huge: bool, origin: Origin) -> bool {
    let k = len / UNIT;
    loop {
        let cap = {
            let mut r = REGIONS.lock();
            match r.room_for(k) {
                None => {
                    r.insert(m, len, huge, origin);
                    return true;
                }
                Some(cap) => cap,
            }
        };
        let t = os::map(cap * size_of::<Unit>()).cast::<Unit>();
        if t.is_null() {
            return false;
        }
        let (old, old_cap) = {
            let mut r = REGIONS.lock();
            if r.cap < cap && r.n <= cap {
                // SAFETY: t is our fresh mapping of cap records, cap >= n.
                unsafe { r.swap_table(t, cap) }
            } else {
                // Another thread grew it meanwhile: this one is not needed.
                (t, cap)
            }
        };
        if old_cap > 0 {
            // SAFETY: out of the table (or never in it) under the lock: nobody refers to it.
            unsafe { os::unmap(old.cast(), old_cap * size_of::<Unit>()) };
        }
    }
}

/// Takes a region of `len` bytes of chunks (UNIT-aligned; from an arena, no system call once the
/// arenas hold the heap, unless it needs a guard below it, which an arena's runs do not have),
/// marked ours in the address map, then records its units under the lock; false when the OS has
/// no memory.
fn map_region(len: usize) -> bool {
    // The setting first: with huge pages off (the default) the OS is not asked their size.
    let huge = match settings::huge_pages() {
        settings::HugePages::Off => false,
        // In chunks, without overflow (MAPPED counts since start; 32-bit usize is small).
        settings::HugePages::PastMiB(m) => {
            MAPPED.load(Ordering::Relaxed) >= m.saturating_mul((1 << 20) / CHUNK_SIZE)
        }
    } && units_hold_huge_pages(os::huge_page_size());
    let place = if GUARDED {
        arena::Place::Guarded
    } else {
        arena::Place::Any
    };
    let Some(arena::Piece {
        base: m, origin, ..
    }) = arena::take(len, UNIT, Kind::Chunk, place)
    else {
        return false;
    };
    // SAFETY: our own fresh memory, of whole units, UNIT-aligned: whole huge pages (when huge).
    let huge = huge && unsafe { os::advise_huge(m, len) };
    if !record(m, len, huge, origin) {
        // SAFETY: just taken as chunks, unused, writable.
        unsafe { arena::give(m, len, origin, Kind::Chunk, false) };
        return false;
    }
    hardened::init_link_keys();
    MAPPED.fetch_add(len / CHUNK_SIZE, Ordering::Relaxed);
    true
}

/// A chunk's base (zeroed unless it was dirty: `chunk::init` writes its whole header), or null
/// when the OS has no memory.
fn map_chunk() -> *mut u8 {
    loop {
        let p = REGIONS.lock().take();
        if !p.is_null() {
            return p;
        }
        // A new region, mapped without the lock (another thread may map one meanwhile, or take
        // this one's chunks first: then round again). Falls back to a single unit: the OS may
        // have room for less.
        if !map_region(REGION_CHUNKS * CHUNK_SIZE)
            && (UNIT == REGION_CHUNKS * CHUNK_SIZE || !map_region(UNIT))
        {
            settings::anomaly(format_args!(
                "the OS refused a chunk ({} KiB): an allocation returns null",
                UNIT >> 10
            ));
            return ptr::null_mut();
        }
    }
}

/// Purges dirty chunks, from the emptiest units first, until at most `bound` are left: each taken
/// out under the lock, purged without it, given back purged.
fn purge_dirty(bound: usize) {
    loop {
        let c = {
            let mut r = REGIONS.lock();
            if r.dirty <= bound {
                return;
            }
            match r.take_dirty() {
                Some(c) => c,
                None => return,
            }
        };
        // SAFETY: a free chunk of ours, held by us alone now: nobody refers to it.
        unsafe {
            os::purge(c, CHUNK_SIZE);
            let after = REGIONS.lock().give(c, true);
            after.run(|b| REGIONS.lock().purged_unit(b));
        }
    }
}

/// Chunk memory in huge pages by our own count (see `Regions::huge_bytes`), for `stats`.
pub fn huge_bytes() -> usize {
    REGIONS.lock().huge_bytes()
}

/// Chunks that exist (held by heaps or `chunk_lists`), the most that ever existed at once, chunks
/// mapped from the OS and chunks purged, since start: cumulative counters for `stats`, kept where
/// chunks come and go (never on a fast path).
static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK_HELD: AtomicUsize = AtomicUsize::new(0);
static MAPPED: AtomicUsize = AtomicUsize::new(0);
static PURGED: AtomicUsize = AtomicUsize::new(0);

/// (the most chunks held at once, chunks mapped, chunks purged) since start.
pub fn lifetime() -> (usize, usize, usize) {
    (
        PEAK_HELD.load(Ordering::Relaxed),
        MAPPED.load(Ordering::Relaxed),
        PURGED.load(Ordering::Relaxed),
    )
}

/// A new chunk from the units (the fullest with a free one; a new region when none has), zeroed
/// and aligned; null when the OS refuses memory.
pub(super) fn take_chunk() -> *mut u8 {
    let base = map_chunk();
    if !base.is_null() {
        let held = HELD.fetch_add(1, Ordering::Relaxed) + 1;
        PEAK_HELD.fetch_max(held, Ordering::Relaxed);
    }
    base
}

/// Gives back the chunks of a list linked through `next` (one, or many) to their units for good:
/// each purged, or kept resident inside a huge page (see `Regions::give`), with one purge per run
/// of adjacent chunks of one unit (the chunks of every class that
/// expired in one purge period are often neighbours, where those of one class seldom are:
/// frag-free-all at scale 4 made 2 437 purges of one chunk each).
///
/// # Safety
/// Every chunk on the list must be a chunk of ours that nobody refers to any more.
pub(super) unsafe fn give_chunks(mut c: *mut Chunk) {
    // Sorted in batches: enough to find a unit's neighbours among every class's expired chunks.
    const BATCH: usize = 256;
    while !c.is_null() {
        let mut bases = [ptr::null_mut::<u8>(); BATCH];
        let mut n = 0;
        while !c.is_null() && n < BATCH {
            // SAFETY: c is on the caller's list: ours, its header readable.
            c = unsafe {
                bases[n] = chunk::base(c);
                (*c).next
            };
            n += 1;
        }
        HELD.fetch_sub(n, Ordering::Relaxed);
        let bases = &mut bases[..n];
        bases.sort_unstable();
        let mut huge = [false; BATCH];
        {
            let mut r = REGIONS.lock();
            for (h, &b) in huge.iter_mut().zip(bases.iter()) {
                *h = r.is_huge(b);
            }
        }
        // Outside the lock: no chunk is free yet, so nobody else takes one meanwhile.
        let mut i = 0;
        while i < n {
            if huge[i] {
                i += 1;
                continue;
            }
            let unit = bases[i] as usize / UNIT;
            let mut j = i + 1;
            while j < n
                && !huge[j]
                && bases[j] as usize == bases[j - 1] as usize + CHUNK_SIZE
                && bases[j] as usize / UNIT == unit
            {
                j += 1;
            }
            // SAFETY: chunks i..j are ours and unused (caller), adjacent, in one unit (one
            // mapping); purging zeroes them, so their headers read as not live (magic 0).
            unsafe { os::purge(bases[i], (j - i) * CHUNK_SIZE) };
            i = j;
        }
        for (&b, &h) in bases.iter().zip(huge.iter()) {
            // SAFETY: forwarded; what is left to do is done without the lock.
            unsafe {
                let after = REGIONS.lock().give(b, !h);
                after.run(|u| REGIONS.lock().purged_unit(u));
            }
        }
    }
}

/// Every free chunk kept resident inside a partly used huge page purged (`trim`).
pub(super) fn purge_all_dirty() {
    purge_dirty(0);
    REGIONS.lock().over_since = None;
}

/// The purge period's part of the units: free chunks kept inside partly used huge pages above
/// their bound for `delay_ms` at `now` are purged down to it.
pub(super) fn purge_over_bound(now: u32, delay_ms: u32) {
    // The bound on free chunks kept inside partly used huge pages: held above it for the delay,
    // they are purged down to it.
    let bound = dirty_bound();
    let due = {
        let mut r = REGIONS.lock();
        if r.dirty <= bound {
            r.over_since = None;
            false
        } else {
            let since = *r.over_since.get_or_insert(now);
            now.wrapping_sub(since) >= delay_ms
        }
    };
    if due {
        purge_dirty(bound);
        REGIONS.lock().over_since = None;
    }
}

// ---------------------------------------------------------------------------------------------------
// fork (see `fork.rs`, which takes `chunk_lists`' locks first).

/// Takes the region lock for `fork`.
pub(super) fn lock_for_fork() {
    core::mem::forget(REGIONS.lock());
}

/// Releases the lock taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(super) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guard forgotten.
    unsafe { REGIONS.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> Regions {
        Regions::new()
    }

    /// [`record`] on a local table (no lock).
    fn insert(r: &mut Regions, m: *mut u8, len: usize, huge: bool) {
        if let Some(cap) = r.room_for(len / UNIT) {
            let t = os::map(cap * size_of::<Unit>()).cast::<Unit>();
            assert!(!t.is_null());
            // SAFETY: t is our fresh mapping of cap records; the old table is nobody's after.
            unsafe {
                let (old, old_cap) = r.swap_table(t, cap);
                if old_cap > 0 {
                    os::unmap(old.cast(), old_cap * size_of::<Unit>());
                }
            }
        }
        r.insert(m, len, huge, Origin::new_mapping());
    }

    /// [`Regions::give`], then what it leaves to do (no lock here: the table is local).
    ///
    /// # Safety
    /// As `Regions::give`.
    unsafe fn back(r: &mut Regions, base: *mut u8, purged: bool) {
        // SAFETY: forwarded.
        let after = unsafe { r.give(base, purged) };
        // SAFETY: once, and no lock to release.
        unsafe { after.run(|b| r.purged_unit(b)) };
    }

    fn unit_of(p: *mut u8) -> usize {
        p as usize & !(UNIT - 1)
    }

    /// 64 GiB of address space in units (32 768 of them, a sparse reservation nothing touches):
    /// the filler still takes the fullest unit's chunks first and a chunk given back is the next
    /// one taken, through the buckets (each step a few list operations, not a pass over the units,
    /// which this size would make slow under the lock).
    #[test]
    #[cfg_attr(miri, ignore = "64 GiB of address space")]
    fn the_filler_indexes_64_gib_of_units() {
        if UNIT_CHUNKS != 8 || cfg!(target_pointer_width = "32") {
            return;
        }
        let len = 64usize << 30;
        let raw = os::map_sparse(len + UNIT);
        if raw.is_null() {
            // Strict overcommit (vm.overcommit_memory = 2) refuses it: nothing to index.
            std::eprintln!("skipped: no 64 GiB of address space here");
            return;
        }
        let m = raw.wrapping_add(raw.align_offset(UNIT));
        let mut r = local();
        insert(&mut r, m, len, false);
        assert_eq!(r.nfree, len / UNIT);
        let taken: std::vec::Vec<*mut u8> = (0..20).map(|_| r.take()).collect();
        assert_eq!(
            taken[0], m,
            "the region's first chunk first (hardened's guard is below it)"
        );
        // Eight from one unit, eight from another, four from a third.
        for (k, group) in taken.chunks(8).enumerate() {
            assert!(
                group.iter().all(|&p| unit_of(p) == unit_of(group[0])),
                "group {k}"
            );
        }
        assert_ne!(unit_of(taken[0]), unit_of(taken[8]));
        assert_eq!(r.nfree, len / UNIT - 3);
        // One back (purged by its giver) into the second, full, unit: the fullest with a free
        // chunk now (7 held against the third's 4), so it is the next one taken.
        // SAFETY: a chunk of ours nobody refers to; nothing is read or written there.
        unsafe { back(&mut r, taken[9], true) };
        assert_eq!(r.take(), taken[9]);
        assert_eq!(unit_of(r.take()), unit_of(taken[16]));
        // SAFETY: the table's mapping and the reservation are ours; nothing refers to them now.
        unsafe {
            os::unmap(r.units.cast(), r.cap * size_of::<Unit>());
            os::unmap(raw, len + UNIT);
        }
    }

    /// A local table over a mapping of two units of our own (not the process's source): the
    /// filler's placement and the whole-unit purge, observed through the chunks' bytes.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri cannot unmap part of a mapping (os::map_aligned trims)"
    )]
    fn chunks_fill_the_fullest_unit_and_an_emptied_huge_unit_goes_back_whole() {
        if UNIT_CHUNKS != 8 {
            return; // a unit is one chunk here: nothing to place
        }
        let len = 2 * UNIT;
        let m = os::map_aligned(len, UNIT);
        assert!(!m.is_null());
        let mut r = local();
        insert(&mut r, m, len, true);
        assert_eq!((r.n, r.nfree), (2, 2));
        // Nine chunks: the first unit fills before the second is touched.
        let mut held: [*mut u8; 9] = [ptr::null_mut(); 9];
        for h in held.iter_mut() {
            *h = r.take();
            // SAFETY: a chunk of our mapping, handed to this test.
            unsafe { h.write(7) };
        }
        assert!(held[..8].iter().all(|&p| unit_of(p) == unit_of(held[0])));
        assert_ne!(unit_of(held[8]), unit_of(held[0]));
        assert_eq!(r.nfree, 0);
        // One back into the full unit: kept resident (dirty), and the next request takes it
        // again (its unit, 7 held, is fuller than the other, 1 held).
        // SAFETY: held[2] is a chunk of ours that nobody refers to now.
        unsafe { back(&mut r, held[2], false) };
        assert_eq!(r.dirty, 1);
        // SAFETY: still mapped; the dirty chunk kept its pages.
        assert_eq!(unsafe { held[2].read() }, 7);
        assert_eq!(r.take(), held[2]);
        assert_eq!(r.dirty, 0);
        // The first unit emptied: purged whole (its chunks read zero), one free unit.
        for &p in &held[..8] {
            // SAFETY: as above.
            unsafe { back(&mut r, p, false) };
        }
        assert_eq!((r.dirty, r.nfree), (0, 1));
        // SAFETY: mapped and purged: reads zero.
        assert!(held[..8].iter().all(|&p| unsafe { p.read() } == 0));
        // The bound: two dirty chunks in the partly used second unit, purged down to one.
        let (a, b) = (r.take(), r.take());
        assert_eq!(unit_of(a), unit_of(held[8]));
        assert_eq!(unit_of(b), unit_of(held[8]));
        // SAFETY: chunks of ours, handed to this test and back.
        unsafe {
            a.write(1);
            b.write(1);
            back(&mut r, a, false);
            back(&mut r, b, false);
        }
        assert_eq!(r.dirty, 2);
        assert_eq!(r.huge_bytes(), UNIT);
        // What `purge_dirty(1)` does on the process's table.
        while r.dirty > 1 {
            let c = r.take_dirty().expect("a dirty chunk");
            // SAFETY: a free chunk of our mapping, taken out: nobody refers to it.
            unsafe {
                os::purge(c, CHUNK_SIZE);
                back(&mut r, c, true);
            }
        }
        assert_eq!(r.dirty, 1);
        assert_eq!(
            r.huge_bytes(),
            0,
            "a chunk purged alone splits the huge page"
        );
        // SAFETY: as above.
        unsafe { back(&mut r, held[8], false) };
        assert_eq!((r.dirty, r.nfree), (0, 2));
        // SAFETY: the table's mapping and the region are ours; nothing refers to them now.
        unsafe {
            os::unmap(r.units.cast(), r.cap * size_of::<Unit>());
            os::unmap(m, len);
        }
    }

    /// Units are advised for huge pages only where they hold whole ones: the 2 MiB page of x86-64
    /// and 4 KiB-page AArch64 (or a smaller one), not the 32 or 512 MiB of 16 or 64 KiB-page
    /// AArch64 (issue 41: a 2 MiB constant stood for the huge page).
    #[test]
    fn units_are_advised_only_where_they_hold_whole_huge_pages() {
        let whole_units = UNIT_CHUNKS == 8;
        assert_eq!(units_hold_huge_pages(2 << 20), whole_units);
        assert_eq!(units_hold_huge_pages(1 << 20), whole_units);
        assert!(!units_hold_huge_pages(32 << 20));
        assert!(!units_hold_huge_pages(512 << 20));
    }

    /// Chunks of a unit not advised for huge pages come back purged (by the caller) and never wait.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri cannot unmap part of a mapping (os::map_aligned trims)"
    )]
    fn small_page_units_keep_no_dirty_chunk() {
        let len = REGION_CHUNKS * CHUNK_SIZE;
        let m = os::map_aligned(len, UNIT);
        assert!(!m.is_null());
        let mut r = local();
        insert(&mut r, m, len, false);
        let p = r.take();
        assert!(!r.is_huge(p));
        // SAFETY: a chunk of ours that nobody refers to; purged first, as `purge` does.
        unsafe {
            os::purge(p, CHUNK_SIZE);
            back(&mut r, p, true);
        }
        assert_eq!((r.dirty, r.nfree), (0, len / UNIT));
        // SAFETY: the table's mapping and the region are ours; nothing refers to them now.
        unsafe {
            os::unmap(r.units.cast(), r.cap * size_of::<Unit>());
            os::unmap(m, len);
        }
    }
}
