//! A chunk: a [`CHUNK_SIZE`]-aligned region of equal slots of one size class, with its header in the
//! last [`HEADER_SIZE`] bytes. Also where chunks come from (the chunk source) and where they go.
//!
//! ```text
//!  chunk base (aligned to 256 KiB)                                     base + CHUNK_SIZE
//!  | slot 0 | slot 1 | … | slot k-1 | never used …   | (unused tail) | header |
//!                                   ^ bump           ^ end
//! ```
//!
//! A slot's chunk is found from its address by masking (`of`), never by searching. Slots are handed
//! out first from the chunk's free list (slots returned to it), then by bumping into the never-used
//! part, a batch at a time: untouched pages stay out of RSS until a slot on them is handed out (the
//! lazy free-list extension of DESIGN.md; our batches are at most 32 KiB).
//!
//! All header fields are guarded by the lock of the pool of the chunk's class; only that pool (and
//! the chunk source, for chunks no pool holds) touches them.

use crate::lock::Lock;
use crate::os;
use crate::size_class;
use core::ptr;

/// log2 of [`CHUNK_SIZE`].
pub const CHUNK_SHIFT: usize = 18;
/// Size and alignment of every chunk: 256 KiB. Big enough for 7 slots of the largest class, small
/// enough that a chunk of a small class empties (and returns to the OS) in a reasonable time.
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;
/// Bytes at the end of every chunk for its header.
pub const HEADER_SIZE: usize = 128;

/// A free slot: its first word links to the next free slot (encoded with `hardened`).
#[repr(C)]
pub struct FreeSlot {
    link: *mut FreeSlot,
}

impl FreeSlot {
    /// The slot after `s` on its list.
    ///
    /// # Safety
    /// `s` must be a free slot on a list (its first word written by [`FreeSlot::set_next`]).
    #[inline(always)]
    pub unsafe fn next(s: *mut FreeSlot) -> *mut FreeSlot {
        // SAFETY: s is a free slot, at least a word long and pointer-aligned (caller).
        let raw = unsafe { (*s).link };
        #[cfg(feature = "hardened")]
        {
            let n = crate::hardened::decode(raw);
            crate::hardened::check_link(s, n);
            n
        }
        #[cfg(not(feature = "hardened"))]
        raw
    }

    /// Links free slot `s` to `next`.
    ///
    /// # Safety
    /// `s` must be a free slot nobody else uses.
    #[inline(always)]
    pub unsafe fn set_next(s: *mut FreeSlot, next: *mut FreeSlot) {
        #[cfg(feature = "hardened")]
        let next = crate::hardened::encode(next);
        // SAFETY: s is a free slot, at least a word long and pointer-aligned (caller).
        unsafe { s.write(FreeSlot { link: next }) }
    }
}

/// Which list of its pool a chunk is on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum ListKind {
    /// Every slot is handed out: on no list (the pool finds it again through a freed slot's address).
    Full,
    /// Has slots to hand out and at least one slot handed out: on the pool's partial list.
    Partial,
    /// No slot handed out: on the pool's list of retained empty chunks.
    Empty,
}

/// The header of a chunk.
#[repr(C)]
pub struct Chunk {
    /// Slots returned to this chunk and not handed out since. Every one lies in `[base, bump)`.
    free: *mut FreeSlot,
    /// The first never-used slot; `bump == end` once every slot has been handed out once.
    bump: *mut u8,
    /// One past the last slot: `base + capacity·slot_size`.
    end: *mut u8,
    /// Links of the pool's partial list (`list == Partial`) or empty list (`next` only).
    pub prev: *mut Chunk,
    pub next: *mut Chunk,
    /// Slots handed out (live, or cached by a thread). `used == 0` iff every slot is free.
    pub used: u32,
    /// Number of slots: `(CHUNK_SIZE - HEADER_SIZE) / slot_size`.
    pub capacity: u32,
    /// Size class of every slot.
    pub class: u32,
    /// Which pool list holds the chunk.
    pub list: ListKind,
    /// The never-used part `[bump, end)` is known to hold zeros (the chunk came fresh from the OS).
    pub bump_zeroed: bool,
    /// When the chunk last became empty (`pool::now_ms`), while it is on its pool's empty list.
    pub emptied_at: u32,
    /// [`LIVE`] while a pool holds the chunk; zero once it is released (purging zeroes it).
    magic: usize,
    /// `bump`, published for the checks of `hardened`, which run without the pool lock: every slot
    /// below it has been carved (its free-slot tag written), every slot at or above it never was.
    #[cfg(feature = "hardened")]
    pub carved: core::sync::atomic::AtomicUsize,
}

/// The header magic of a chunk held by a pool.
const LIVE: usize = 0x706f_6f6c_616c_6c63; // "poolallc"

const _: () = assert!(core::mem::size_of::<Chunk>() <= HEADER_SIZE);
const _: () = assert!(size_class::MAX_SMALL * 7 <= CHUNK_SIZE - HEADER_SIZE);

/// Slots of class `c` in one chunk.
pub const fn capacity_of(c: usize) -> usize {
    (CHUNK_SIZE - HEADER_SIZE) / size_class::CLASS_SIZE[c]
}

/// The header of the chunk that holds address `p`.
#[inline(always)]
pub fn of<T>(p: *mut T) -> *mut Chunk {
    p.cast::<u8>()
        .map_addr(|a| (a & !(CHUNK_SIZE - 1)) + (CHUNK_SIZE - HEADER_SIZE))
        .cast()
}

/// The base address of the chunk whose header is `c`.
#[inline]
pub fn base(c: *mut Chunk) -> *mut u8 {
    c.cast::<u8>().map_addr(|a| a & !(CHUNK_SIZE - 1))
}

/// A chain of free slots linked through their first word.
#[derive(Clone, Copy, Debug)]
pub struct Chain {
    pub head: *mut FreeSlot,
    pub count: u32,
}

impl Chain {
    pub const EMPTY: Chain = Chain {
        head: ptr::null_mut(),
        count: 0,
    };
}

impl Chunk {
    /// Writes a fresh header for class `class` into the chunk at `base`: no slot handed out.
    ///
    /// # Safety
    /// `base` must be [`CHUNK_SIZE`]-aligned, valid for reads and writes of `CHUNK_SIZE` bytes, and
    /// hold no slot anyone uses. `zeroed` may be true only if the whole slot area reads as zero.
    pub unsafe fn init(base: *mut u8, class: usize, zeroed: bool) -> *mut Chunk {
        debug_assert_eq!(base as usize % CHUNK_SIZE, 0);
        let cap = capacity_of(class);
        let c = of(base);
        // SAFETY: the header lies inside the chunk, which the caller gives us exclusively; its
        // address is aligned for Chunk (CHUNK_SIZE - HEADER_SIZE is a multiple of 64... and of 8).
        unsafe {
            c.write(Chunk {
                free: ptr::null_mut(),
                bump: base,
                end: base.add(cap * size_class::CLASS_SIZE[class]),
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                used: 0,
                capacity: cap as u32,
                class: class as u32,
                list: ListKind::Empty,
                bump_zeroed: zeroed,
                emptied_at: 0,
                magic: LIVE,
                #[cfg(feature = "hardened")]
                carved: core::sync::atomic::AtomicUsize::new(base as usize),
            });
        }
        c
    }

    /// True while a pool holds this chunk.
    #[cfg(feature = "hardened")]
    #[inline]
    pub fn is_live(&self) -> bool {
        self.magic == LIVE
    }

    /// True when the chunk has no slot left to hand out.
    #[inline]
    pub fn is_exhausted(&self) -> bool {
        self.free.is_null() && self.bump == self.end
    }

    /// Moves about `want` slots from this chunk onto the front of `out`: first from the free list,
    /// then from the never-used part (threading their links, the Om `enlarge()` pattern). Returns how
    /// many moved: at most `want`, or at most `2·want` when `out` was empty and the whole free list
    /// fits in that (it is then handed over without walking it).
    ///
    /// # Safety
    /// `self` must be a live chunk header and the caller must hold its pool's lock.
    pub unsafe fn take(&mut self, want: u32, out: &mut Chain) -> u32 {
        let mut n = 0;
        let size = size_class::CLASS_SIZE[self.class as usize];
        // Slots on the free list: those carved from the never-used part, less those handed out.
        let carved =
            (self.bump as usize - base(self as *const Chunk as *mut Chunk) as usize) / size;
        let free_len = carved as u32 - self.used;
        if out.head.is_null() && free_len > 0 && free_len <= want.saturating_mul(2) {
            // The whole free list, with no walk: splitting it means one cache miss per slot on
            // links nobody has touched lately, the cost that dominated refills of bulk phases.
            out.head = self.free;
            self.free = ptr::null_mut();
            n = free_len;
        } else if !self.free.is_null() && want > 0 {
            let first = self.free;
            let mut last = first;
            n = 1;
            // SAFETY: every slot on the free list is a free slot of this chunk whose first word is a
            // valid link (invariant of `free`).
            unsafe {
                let mut after = FreeSlot::next(last);
                while n < want && !after.is_null() {
                    last = after;
                    after = FreeSlot::next(last);
                    n += 1;
                }
                self.free = after;
                FreeSlot::set_next(last, out.head);
            }
            out.head = first;
        }
        // Then extend from the never-used part.
        let left = (self.end as usize - self.bump as usize) / size;
        let k = want.saturating_sub(n).min(left as u32) as usize;
        if k > 0 {
            // Link slot i to slot i+1, the last one to the chain so far.
            let first = self.bump;
            // SAFETY: [bump, bump + k·size) lies inside the slot area of this chunk and holds no
            // handed-out slot; every slot start is aligned for a pointer (sizes are multiples of 8).
            unsafe {
                let mut s = first.add((k - 1) * size);
                let mut next = out.head;
                loop {
                    #[cfg(feature = "hardened")]
                    crate::hardened::poison(s, size);
                    FreeSlot::set_next(s.cast(), next);
                    if s == first {
                        break;
                    }
                    next = s.cast();
                    s = s.sub(size);
                }
                self.bump = first.add(k * size);
                #[cfg(feature = "hardened")]
                self.carved
                    .store(self.bump as usize, core::sync::atomic::Ordering::Relaxed);
            }
            out.head = first.cast();
            n += k as u32;
        }
        self.used += n;
        out.count += n;
        n
    }

    /// Returns slot `s` to this chunk's free list.
    ///
    /// # Safety
    /// `s` must be a handed-out slot of this chunk, not used by anyone afterwards, and the caller
    /// must hold the pool's lock.
    #[inline]
    pub unsafe fn put(&mut self, s: *mut FreeSlot) {
        debug_assert!(self.used > 0);
        debug_assert!(self.owns_slot(s.cast()));
        // SAFETY: s is a slot of this chunk (caller) and at least a word long.
        unsafe { FreeSlot::set_next(s, self.free) };
        self.free = s;
        self.used -= 1;
    }

    /// True when `p` is the start of a slot of this chunk that was handed out at least once.
    pub fn owns_slot(&self, p: *mut u8) -> bool {
        let base = base(self as *const Chunk as *mut Chunk) as usize;
        let size = size_class::CLASS_SIZE[self.class as usize];
        let a = p as usize;
        a >= base && a < self.bump as usize && (a - base) % size == 0
    }

    /// Number of slots on the free list (walks it: for checks only).
    #[cfg(test)]
    pub fn free_list_len(&self) -> usize {
        let mut n = 0;
        let mut s = self.free;
        while !s.is_null() {
            n += 1;
            // SAFETY: invariant of `free`.
            s = unsafe { FreeSlot::next(s) };
        }
        n
    }

    /// Checks the header's invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let size = size_class::CLASS_SIZE[self.class as usize];
        let base = base(self as *const Chunk as *mut Chunk) as usize;
        let bumped = (self.bump as usize - base) / size;
        assert!(self.bump <= self.end);
        assert_eq!(self.capacity as usize, capacity_of(self.class as usize));
        assert_eq!(
            self.free_list_len() + self.used as usize,
            bumped,
            "slots lost or doubled"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// The chunk source: chunks are carved from 4 MiB regions mapped at once (one mmap per 16 chunks); a
// released chunk is purged (its pages go back to the OS) and kept, mapped but not resident, for the
// next request. Only above SPARE_MAX spare chunks is address space unmapped.

/// Chunks mapped together in one region.
const REGION_CHUNKS: usize = 16;
/// Purged chunks kept mapped for reuse.
const SPARE_MAX: usize = 1024;

struct Source {
    /// Next unused chunk of the current region, and how many are left there.
    cur: *mut u8,
    left: usize,
    /// Purged chunks ready for reuse (`spare[..nspare]`).
    spare: [*mut u8; SPARE_MAX],
    nspare: usize,
    /// Chunks handed to pools and not released.
    in_use: usize,
}

// SAFETY: the raw pointers name OS mappings owned by the source; access is serialised by the lock.
unsafe impl Send for Source {}

static SOURCE: Lock<Source> = Lock::new(Source {
    cur: ptr::null_mut(),
    left: 0,
    spare: [ptr::null_mut(); SPARE_MAX],
    nspare: 0,
    in_use: 0,
});

/// A zeroed chunk for a pool, or null when the OS has no memory.
pub fn acquire() -> *mut u8 {
    crate::pool::install_fork_handlers();
    #[cfg(feature = "hardened")]
    crate::hardened::init();
    let mut s = SOURCE.lock();
    let p = if s.nspare > 0 {
        s.nspare -= 1;
        s.spare[s.nspare]
    } else {
        if s.left == 0 {
            let r = os::map_aligned(REGION_CHUNKS * CHUNK_SIZE, CHUNK_SIZE);
            if r.is_null() {
                // Fall back to a single chunk: the OS may have room for less.
                drop(s);
                let one = os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
                if !one.is_null() {
                    let mut s = SOURCE.lock();
                    #[cfg(feature = "hardened")]
                    crate::hardened::register_chunks(one, CHUNK_SIZE);
                    s.in_use += 1;
                }
                return one;
            }
            #[cfg(feature = "hardened")]
            crate::hardened::register_chunks(r, REGION_CHUNKS * CHUNK_SIZE);
            s.cur = r;
            s.left = REGION_CHUNKS;
        }
        let p = s.cur;
        s.left -= 1;
        // SAFETY: p + CHUNK_SIZE stays within (or one past) the current region.
        s.cur = unsafe { p.add(CHUNK_SIZE) };
        p
    };
    s.in_use += 1;
    p
}

/// Gives a chunk back: its pages return to the OS at once.
///
/// # Safety
/// `base` must come from [`acquire`] and hold nothing anyone uses.
pub unsafe fn release(base: *mut u8) {
    // SAFETY: the chunk is ours and unused (caller); purging zeroes it.
    unsafe { os::purge(base, CHUNK_SIZE) };
    let mut s = SOURCE.lock();
    s.in_use -= 1;
    if s.nspare < SPARE_MAX {
        let n = s.nspare;
        s.spare[n] = base;
        s.nspare += 1;
    } else {
        drop(s);
        // SAFETY: as above; the chunk is a whole, CHUNK_SIZE-aligned part of a mapping of ours. (With
        // `hardened` its bit in the chunk map stays set; its header reads as not live, or faults.)
        unsafe { os::unmap(base, CHUNK_SIZE) };
    }
}

/// Chunks held by pools right now.
#[cfg(test)]
pub fn chunks_in_use() -> usize {
    SOURCE.lock().in_use
}

/// Takes the source's lock for `fork` (see `pool::install_fork_handlers`).
pub(crate) fn lock_for_fork() {
    core::mem::forget(SOURCE.lock());
}

/// Releases the lock taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], in the same (or the forked) process, by the thread that took it.
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: the lock is held by lock_for_fork and its guard was forgotten.
    unsafe { SOURCE.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{Layout, alloc_zeroed, dealloc};

    fn region() -> (*mut u8, Layout) {
        let l = Layout::from_size_align(CHUNK_SIZE, CHUNK_SIZE).unwrap();
        // SAFETY: l has non-zero size.
        let p = unsafe { alloc_zeroed(l) };
        assert!(!p.is_null());
        // Hardened link checks accept only chunks the allocator knows, as the chunk source's are.
        #[cfg(feature = "hardened")]
        crate::hardened::register_chunks(p, CHUNK_SIZE);
        (p, l)
    }

    #[test]
    fn header_is_found_from_every_slot() {
        let (p, l) = region();
        // SAFETY: p is a CHUNK_SIZE-aligned, zeroed, exclusively owned region.
        let c = unsafe { Chunk::init(p, 5, true) };
        let size = size_class::CLASS_SIZE[5];
        for i in [0, 1, 17, capacity_of(5) - 1] {
            // SAFETY: in bounds of the region.
            let s = unsafe { p.add(i * size + size - 1) };
            assert_eq!(of(s), c);
        }
        assert_eq!(base(c), p);
        // SAFETY: allocated above with l.
        unsafe { dealloc(p, l) };
    }

    #[test]
    fn the_free_list_gives_each_slot_exactly_once() {
        // Small and large classes; Miri runs the same code on fewer classes.
        let classes: &[usize] = if cfg!(miri) {
            &[28, 43]
        } else {
            &[0, 1, 7, 8, 20, 31, 43]
        };
        for &class in classes {
            let (p, l) = region();
            // SAFETY: as above.
            let c = unsafe { &mut *Chunk::init(p, class, true) };
            let cap = c.capacity;
            let mut seen = std::collections::HashSet::new();
            let mut chain = Chain::EMPTY;
            // Take everything in uneven batches.
            loop {
                // SAFETY: c is a live header; this test is its only user.
                let n = unsafe { c.take(7, &mut chain) };
                if n == 0 {
                    break;
                }
            }
            assert!(c.is_exhausted());
            assert_eq!(chain.count, cap);
            let mut s = chain.head;
            let mut order = Vec::new();
            while !s.is_null() {
                assert!(c.owns_slot(s.cast()));
                assert!(seen.insert(s as usize), "slot handed out twice");
                order.push(s);
                // SAFETY: s is a slot of the chain.
                s = unsafe { FreeSlot::next(s) };
            }
            assert_eq!(seen.len(), cap as usize);
            c.check();
            // Give half back, take again: the same slots come back, once each.
            for &s in order.iter().step_by(2) {
                // SAFETY: s was handed out above and is not used again.
                unsafe { c.put(s) };
            }
            c.check();
            let back = order.len().div_ceil(2) as u32;
            let mut again = Chain::EMPTY;
            // SAFETY: as above.
            let n = unsafe { c.take(u32::MAX, &mut again) };
            assert_eq!(n, back);
            let mut s = again.head;
            let mut seen2 = std::collections::HashSet::new();
            while !s.is_null() {
                assert!(seen2.insert(s as usize));
                // SAFETY: s is a slot of the chain.
                s = unsafe { FreeSlot::next(s) };
            }
            assert_eq!(seen2.len() as u32, back);
            assert_eq!(c.used, cap);
            c.check();
            // SAFETY: allocated above with l.
            unsafe { dealloc(p, l) };
        }
    }

    #[test]
    fn slots_are_aligned_to_their_class() {
        let (p, l) = region();
        let step = if cfg!(miri) { 5 } else { 1 };
        for class in (0..size_class::NUM_CLASSES).step_by(step) {
            // SAFETY: the region is reused for each class; nothing else uses it.
            let c = unsafe { &mut *Chunk::init(p, class, false) };
            let mut chain = Chain::EMPTY;
            // SAFETY: as above.
            unsafe { c.take(3, &mut chain) };
            let align = 1usize << size_class::CLASS_SIZE[class].trailing_zeros();
            let mut s = chain.head;
            while !s.is_null() {
                assert_eq!(s as usize % align, 0);
                // SAFETY: s is a slot of the chain.
                s = unsafe { FreeSlot::next(s) };
            }
        }
        // SAFETY: allocated above with l.
        unsafe { dealloc(p, l) };
    }
}
