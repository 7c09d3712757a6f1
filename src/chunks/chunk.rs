//! A chunk: [`CHUNK_SIZE`] bytes aligned to their size, holding equal slots of one size class,
//! owned by one thread's heap at a time, with its header in the last [`HEADER_SIZE`] (192) bytes.
//!
//! ```text
//!  chunk base (aligned to 256 KiB)                                      base + CHUNK_SIZE
//!  | slot 0 | slot 1 | … | slot k-1 | never carved …  | (unused tail) | header |
//!                                   ^ bump           ^ end
//! ```
//!
//! A slot's chunk is found from its address by masking ([`of`]), never by searching.
//!
//! The invariants are written once, on the fields of [`Chunk`] they govern, and checked by
//! [`debug_check`] in debug builds (compiled out of release builds) and by `check` in the tests.
//! In short: every carved slot is on exactly one of `free`, `local_free`, `remote`, or handed out;
//! `used` counts the handed-out ones and those on `remote`; other threads write only `remote` and
//! `remote_requested`.
//!
//! # Chunk size
//!
//! 256 KiB: big enough for 3 slots of the largest class (64 KiB), small enough that a chunk of a
//! busy class empties (and goes back to the OS) in reasonable time. The tail a large class leaves
//! unused (64 KiB of the 64 KiB class's chunk) is address space only: slots are carved as they are
//! first needed, so it is never touched. Thread ownership multiplies chunks by threads, but what a
//! chunk costs in RSS is only the pages carved so far plus the header's OS page: a thread that
//! touches a class costs two OS pages of RSS (one holding the first 4 KiB carved, one the header),
//! whatever the chunk size. The chunk size sets the address space per (thread, class) and the
//! granularity at which memory returns to the OS.
//!
//! Why the classes go to 64 KiB (they stopped at 32 KiB until 2026-11-28): a block above the
//! largest class is a span of whole 256 KiB granules, and a program whose buffers pass through
//! 32–64 KiB (pulldown-cmark's output strings and parse trees: 1,203 of markdown-html's 1,252
//! spans) kept a 256 KiB span per block that reuse by other sizes touched all over: 590 more
//! faults than jemalloc and 1.19x its peak RSS. As slots of 40–64 KiB classes, both fell to
//! jemalloc's (benches/results/medium-classes.md).

use crate::base::contention;
use crate::base::size_class;
use crate::chunks::link;
use crate::chunks::{message, remote_list};
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// log2 of [`CHUNK_SIZE`].
pub const CHUNK_SHIFT: usize = 18;
/// Size and alignment of every chunk: 256 KiB (see the module docs).
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;
/// Bytes at the end of every chunk for its header.
pub const HEADER_SIZE: usize = 192;
/// Bytes of never-used slots carved onto the free list at a time (at least one slot): a fixed
/// count, not the OS page (which may be 64 KiB), the `enlarge()` step of Om's `object_pool`.
const EXTEND_BYTES: usize = 4096;

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
        link::decode(unsafe { (*s).link })
    }

    /// Links free slot `s` to `next`.
    ///
    /// # Safety
    /// `s` must be a free slot nobody else uses.
    #[inline(always)]
    pub unsafe fn set_next(s: *mut FreeSlot, next: *mut FreeSlot) {
        // SAFETY: s is a free slot, at least a word long and pointer-aligned (caller).
        unsafe {
            s.write(FreeSlot {
                link: link::encode(next),
            })
        }
    }
}

/// The header of a chunk, three cache lines: fields every free reads (and nobody writes while
/// slots are live), the owner's working fields, and `remote`, which other threads write. So a
/// remote free reads the first line and writes the third, and never takes the owner's line away
/// from it (a producer thread allocating while a consumer frees its blocks would otherwise bounce
/// that line between their cores on every pair).
///
/// Each field states its invariants: this is the one place they are written. Who may touch the
/// header: the owner (the heap in `owner`, on its thread) reads and writes every field but
/// `remote` and `remote_requested` without synchronisation; other threads read `owner`, `class`,
/// `capacity` and (hardened) `magic` and `carved`, and write only `remote` and
/// `remote_requested`. A chunk with no owner is touched only by the holder of the lock of the
/// source list that holds it (its class's empty or abandoned list), or by the one thread handing
/// it over.
#[repr(C)]
pub struct Chunk {
    /// The owning heap (opaque here), or null while no heap owns the chunk. A heap owns each of
    /// its chunks in exactly one place: its bin's `current`, avail list or full list. An unowned
    /// chunk is on exactly one source list (empty or abandoned) or being handed over. Written only
    /// by the thread taking or giving up ownership, so a thread that reads its own heap here wrote
    /// it itself: that compare is the owner test of the free path.
    pub owner: AtomicPtr<u8>,
    /// Size class of every slot; changes only while the source holds the chunk (re-initialised for
    /// another class when empty).
    pub class: u32,
    /// Number of slots: `(CHUNK_SIZE - HEADER_SIZE) / slot_size`.
    pub capacity: u32,
    /// [`LIVE`] while the chunk holds slots of its class; zero once released.
    pub magic: usize,
    /// `bump`, published for the `hardened` checks, which run on any thread: every slot below it
    /// has been carved, every slot at or above it never was.
    pub carved: AtomicUsize,
    /// When the chunk last became empty (`os::now_ms`), while the source holds it (so no heap
    /// writes this line while it owns the chunk).
    pub emptied_at: u32,
    _pad0: [u8; PAD0],

    /// Free slots the owner hands out next (popped with no lock and no atomic). With
    /// `local_free`, `remote` and the handed-out slots, it partitions `[base, bump)`: every carved
    /// slot is in exactly one of the four.
    pub free: *mut FreeSlot,
    /// Free slots the owner returned since `free` was last refilled. The slow path moves the
    /// whole list to `free` only when `free` runs dry, so the owner visits its slow path, and
    /// collects remote frees, regularly.
    pub local_free: *mut FreeSlot,
    /// The first never-carved slot: `base <= bump <= end`, on a slot boundary. Slots in
    /// `[bump, end)` were never handed out and never touched; they are carved onto `free` at most
    /// [`EXTEND_BYTES`] at a time ([`extend`]), so untouched pages stay out of RSS.
    pub bump: *mut u8,
    /// One past the last slot: `base + capacity × slot size`.
    pub end: *mut u8,
    /// Links of the list that holds the chunk (a heap's avail or full list, or a source list);
    /// both null on no list (the current chunk).
    pub prev: *mut Chunk,
    pub next: *mut Chunk,
    /// `used - notify_at` (wrapping), where `used` ([`used`]) is the slots handed out plus the
    /// slots on `remote`: a remote free is subtracted when the owner collects it, so `used == 0`
    /// means every carved slot is on `free` or `local_free` (the chunk is empty), and `used <=
    /// carved slots <= capacity`. Kept as the distance to `notify_at` so that the owner's free
    /// finds its slow path from the decrement itself (`room` reaching 0), with no compare
    /// ([`free_one`]). Written only by the owner (a load and a store, which compile to one
    /// `inc` on the alloc path); an atomic so that `stats` may read it while the owner works: the
    /// live slots are summed from here at snapshot time, with `notify_at`, which changes only
    /// under the heap's `lists` lock `stats` holds ([`set_notify_at`], which keeps `used`).
    room: AtomicU32,
    /// The owner's free path takes its slow path when `used` drops to this value, so one test
    /// covers both events that need it: 0 for a chunk on the avail list (it became empty: give it
    /// back, unless the class has no current chunk), `capacity - 1` for a full one (the first slot
    /// came back: to avail), [`NEVER`] for the current chunk.
    notify_at: u32,
    /// Requested bytes the owner handed out minus those it freed or resized away (wrapping), read
    /// by `stats` like `used`. The chunk's live requested bytes are `requested - remote_requested`
    /// (wrapping `u32`: the true figure is below `CHUNK_SIZE`, so the difference is exact).
    pub requested: AtomicU32,
    /// In a class that carries messages: the first of the messages taken from `remote` and not
    /// yet expanded, as its slot's index ([`NO_MESSAGE`]: none). The owner expands a few at a
    /// time ([`collect_remote_some`]), so that a long list is not written out slot by slot before
    /// any of it is needed (it would evict the lines the thread is using). Its slots are counted
    /// in `used`, like the slots on `remote`; `remote` is taken again only once it is empty.
    pending: u16,
    /// On the owner's full list (then `notify_at == capacity - 1`).
    pub in_full: bool,
    _pad1: [u8; PAD1],

    /// The remote-free list: frees by other threads, a list of slots linked like `free`, pushed
    /// with one CAS and taken whole by the owner with one swap (no ABA: nothing is popped singly).
    /// Bit 0 is [`FULL`](remote_list::FULL): set only by the owner, only while the list is empty
    /// and the chunk has nothing left (`free` and `local_free` empty, `bump == end`), as it moves
    /// the chunk to its full list. A remote push always clears it, and the push that cleared it
    /// sets the owner heap's hint bit for the class, so a full chunk with a remote free is always
    /// found again by its owner.
    pub remote: AtomicUsize,
    /// Requested bytes freed (or resized away) by other threads (wrapping), added before the slot
    /// is pushed onto `remote` (while it is still live, so the chunk cannot change hands).
    pub remote_requested: AtomicU32,
    _pad2: [u8; PAD2],
}

// The padding that ends each of the header's cache lines, for 8-byte words (28, 1 and 52 bytes)
// and 4-byte ones (40, 25 and 56): each line's fields are pointer-sized words and `u32`s.
const WORD: usize = size_of::<usize>();
const PAD0: usize = 64 - (3 * WORD + 3 * 4);
const PAD1: usize = 64 - (6 * WORD + 3 * 4 + 2 + 1);
const PAD2: usize = 64 - (WORD + 4);

/// [`Chunk::pending`] when no message waits.
const NO_MESSAGE: u16 = u16::MAX;

/// `notify_at` of a chunk whose frees never need the slow path (the current chunk).
pub const NEVER: u32 = u32::MAX;

/// The header magic of a chunk in use: "poolallc", or its last four letters in a 32-bit word.
pub const LIVE: usize = 0x706f_6f6c_616c_6c63_u64 as usize;

const _: () = assert!(core::mem::size_of::<Chunk>() == HEADER_SIZE);
const _: () = assert!(core::mem::offset_of!(Chunk, free) == 64);
const _: () = assert!(core::mem::offset_of!(Chunk, remote) == 128);
const _: () = assert!((CHUNK_SIZE - HEADER_SIZE) % 64 == 0);
const _: () = assert!(size_class::MAX_SMALL * 3 <= CHUNK_SIZE - HEADER_SIZE);

/// Slots of class `c` in one chunk.
pub const fn capacity_of(c: usize) -> usize {
    (CHUNK_SIZE - HEADER_SIZE) / size_class::CLASS_SIZE[c]
}

/// The header of the chunk that holds address `p`.
#[inline(always)]
pub fn of<T>(p: *mut T) -> *mut Chunk {
    // Through the address: a mask, the header's fields then at constant displacements (as an
    // offset from `p`, the compiler computes the offset and its negation: three more
    // instructions on the free path). `p`'s provenance, which covers the whole chunk (one
    // mapping of ours), is exposed here and taken up again by the header pointer.
    let a = p.expose_provenance();
    ptr::with_exposed_provenance_mut::<u8>(a & !(CHUNK_SIZE - 1))
        .wrapping_add(CHUNK_SIZE - HEADER_SIZE)
        .cast()
}

/// The base address of the chunk whose header is `c`.
#[inline]
pub fn base(c: *mut Chunk) -> *mut u8 {
    c.cast::<u8>().map_addr(|a| a & !(CHUNK_SIZE - 1))
}

/// A stand-in header with nothing to hand out: an empty heap's classes point here, so the fast
/// path needs no null check (it finds `free` null and takes the slow path). Never written.
#[repr(C, align(64))]
pub struct Dummy([usize; HEADER_SIZE / WORD]);
pub static DUMMY: Dummy = Dummy([0; HEADER_SIZE / WORD]);

/// The dummy header as a chunk pointer (only its null `free` is ever read).
#[inline(always)]
pub const fn dummy() -> *mut Chunk {
    (&raw const DUMMY).cast_mut().cast()
}

/// `used` of chunk `c` (see [`Chunk::room`]): by its owner, or by `stats` under the owner
/// heap's `lists` lock (or the source's lock of an unowned chunk).
///
/// # Safety
/// `c` must be a live header.
#[inline(always)]
pub unsafe fn used(c: *mut Chunk) -> u32 {
    // SAFETY: c is a live header (caller); `room` is an atomic, `notify_at` changes only under
    // the locks the readers other than the owner hold.
    unsafe {
        (*c).room
            .load(Ordering::Relaxed)
            .wrapping_add((*c).notify_at)
    }
}

/// Sets `used` of chunk `c`: a plain store (only the owner writes it).
///
/// # Safety
/// `c` must be a live header the caller owns.
#[inline(always)]
pub unsafe fn set_used(c: *mut Chunk, n: u32) {
    // SAFETY: c is a live header the caller owns; `room` is an atomic.
    unsafe {
        (*c).room
            .store(n.wrapping_sub((*c).notify_at), Ordering::Relaxed)
    }
}

/// One more slot of chunk `c` handed out: `used + 1` (the alloc fast path's one `inc`).
///
/// # Safety
/// `c` must be a live header the caller owns.
#[inline(always)]
pub unsafe fn hand_out_one(c: *mut Chunk) {
    // SAFETY: c is a live header the caller owns; `room` is an atomic only the owner writes.
    unsafe {
        let r = &(*c).room;
        r.store(r.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
}

/// One slot of chunk `c` freed by its owner: `used - 1`. True when `used` reached `notify_at`
/// (the owner's slow free must run): the decrement's own zero flag, no compare.
///
/// # Safety
/// `c` must be a live header the caller owns.
#[inline(always)]
pub unsafe fn free_one(c: *mut Chunk) -> bool {
    // A relaxed load and store cannot become one `dec` whose flags drive the branch (the
    // compiler folds a load-modify-store into memory only for plain accesses): four
    // instructions. Where `asm!` takes labels, x86-64 says it in two.
    #[cfg(all(target_arch = "x86_64", poolalloc_asm_goto, not(miri)))]
    // SAFETY: c is a live header the caller owns, so `room` is a live, aligned `u32` that only
    // this thread writes: an unlocked `dec` is its relaxed load and store (others only load it,
    // and an aligned 4-byte store is single-copy atomic on x86-64). The address is the chunk's
    // base (the mask the caller computed already) plus the header's offset and the field's.
    unsafe {
        core::arch::asm!(
            "dec dword ptr [{base} + {off}]",
            "jz {zero}",
            base = in(reg) base(c),
            off = const CHUNK_SIZE - HEADER_SIZE + core::mem::offset_of!(Chunk, room),
            zero = label { return true; },
            options(nostack),
        );
        false
    }
    #[cfg(not(all(target_arch = "x86_64", poolalloc_asm_goto, not(miri))))]
    // SAFETY: c is a live header the caller owns; `room` is an atomic only the owner writes.
    unsafe {
        let r = &(*c).room;
        let n = r.load(Ordering::Relaxed).wrapping_sub(1);
        r.store(n, Ordering::Relaxed);
        n == 0
    }
}

/// Sets `notify_at` of chunk `c` to `n`, keeping `used`.
///
/// # Safety
/// `c` must be a live header the caller owns; while a heap owns it, the caller holds that heap's
/// `lists` lock (so `stats` never reads `room` and `notify_at` of two different settings).
#[inline(always)]
pub unsafe fn set_notify_at(c: *mut Chunk, n: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        let u = used(c);
        (*c).notify_at = n;
        set_used(c, u);
    }
}

/// Live requested bytes of chunk `c` (see [`Chunk::requested`]).
///
/// # Safety
/// `c` must be a live header.
#[inline]
pub unsafe fn requested(c: *mut Chunk) -> u32 {
    // SAFETY: c is a live header (caller); both fields are atomics.
    unsafe {
        (*c).requested
            .load(Ordering::Relaxed)
            .wrapping_sub((*c).remote_requested.load(Ordering::Relaxed))
    }
}

/// Writes a fresh header for class `class` into the chunk at `base`: no slot carved, no owner.
///
/// # Safety
/// `base` must be [`CHUNK_SIZE`]-aligned, valid for reads and writes of `CHUNK_SIZE` bytes, and
/// hold no slot anyone uses; no other thread may read the header until the chunk is published.
pub unsafe fn init(base: *mut u8, class: usize) -> *mut Chunk {
    debug_assert_eq!(base as usize % CHUNK_SIZE, 0);
    let cap = capacity_of(class);
    let c = of(base);
    // SAFETY: the header lies inside the chunk, which the caller gives us exclusively; its address
    // is 64-aligned (CHUNK_SIZE - HEADER_SIZE is a multiple of 64, asserted above).
    unsafe {
        c.write(Chunk {
            owner: AtomicPtr::new(ptr::null_mut()),
            class: class as u32,
            capacity: cap as u32,
            magic: LIVE,
            carved: AtomicUsize::new(base as usize),
            emptied_at: 0,
            _pad0: [0; PAD0],
            free: ptr::null_mut(),
            local_free: ptr::null_mut(),
            bump: base,
            end: base.add(cap * size_class::CLASS_SIZE[class]),
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
            room: AtomicU32::new(0u32.wrapping_sub(NEVER)),
            notify_at: NEVER,
            requested: AtomicU32::new(0),
            pending: NO_MESSAGE,
            in_full: false,
            _pad1: [0; PAD1],
            remote: AtomicUsize::new(0),
            remote_requested: AtomicU32::new(0),
            _pad2: [0; PAD2],
        });
    }
    c
}

/// Carves up to [`EXTEND_BYTES`] of never-used slots onto `free`, linking slot i to slot i+1 and the last
/// to the old `free`. Returns how many.
///
/// # Safety
/// `c` must be a live header the caller owns (see the module docs).
pub unsafe fn extend(c: *mut Chunk) -> u32 {
    // SAFETY: the caller owns the header.
    unsafe {
        debug_check(c);
        let size = size_class::CLASS_SIZE[(*c).class as usize];
        let left = ((*c).end as usize - (*c).bump as usize) / size;
        let k = (EXTEND_BYTES / size).max(1).min(left);
        if k == 0 {
            return 0;
        }
        let first = (*c).bump;
        // [first, first + k·size) lies inside the slot area and holds no handed-out slot; every
        // slot start is 8-aligned (sizes are multiples of 8).
        let mut s = first.add((k - 1) * size);
        let mut next = (*c).free;
        loop {
            link::mark_free(s, size);
            FreeSlot::set_next(s.cast(), next);
            if s == first {
                break;
            }
            next = s.cast();
            s = s.sub(size);
        }
        (*c).free = first.cast();
        (*c).bump = first.add(k * size);
        if link::HARDENED {
            (*c).carved.store((*c).bump as usize, Ordering::Release);
        }
        k as u32
    }
}

/// Takes the remote-free list (clearing [`FULL`](remote_list::FULL)) and puts its slots on `free`. Returns how many.
///
/// In a class that carries messages ([`message`]), each message (those [`Chunk::pending`] first)
/// is expanded into a run of linked slots (one dependent load a message, to its next; independent
/// stores into the slots), and the whole is joined to `free`. Otherwise, where the list word counts its slots (64-bit targets)
/// and `free` is empty, the list becomes `free` whole: no link is followed, so no line the
/// freeing threads wrote is read here (issue 45, step 2); else the list is walked for its tail and
/// length, and joined to `free`.
///
/// # Safety
/// `c` must be a live header the caller owns.
pub unsafe fn collect_remote(c: *mut Chunk) -> u32 {
    // SAFETY: the caller owns the header; `remote` is only ever swapped whole by the owner.
    unsafe {
        debug_check(c);
        if message::carries((*c).class as usize) {
            let mut n = 0;
            loop {
                let k = collect_messages(c, u32::MAX);
                if k == 0 {
                    return n;
                }
                n += k;
            }
        }
        let (head, counted) = remote_list::take(&(*c).remote);
        let head = head as *mut FreeSlot;
        if head.is_null() {
            return 0;
        }
        contention::collection();
        if remote_list::COUNTED && (*c).free.is_null() {
            debug_assert_eq!(counted, list_len(head), "a remote list's count");
            (*c).free = head;
            let n = counted as u32;
            set_used(c, used(c) - n);
            return n;
        }
        let mut tail = head;
        let mut n = 1;
        loop {
            let next = FreeSlot::next(tail);
            if next.is_null() {
                break;
            }
            tail = next;
            n += 1;
        }
        contention::links_walked(n as u64);
        FreeSlot::set_next(tail, (*c).free);
        (*c).free = head;
        set_used(c, used(c) - n);
        n
    }
}

/// [`collect_remote`] for the owner's refill: in a class that carries messages, only enough
/// messages to put about [`message::MAX_SLOTS`] slots on `free` (the rest wait in
/// [`Chunk::pending`]); in the others, the whole list.
///
/// # Safety
/// As [`collect_remote`].
pub unsafe fn collect_remote_some(c: *mut Chunk) -> u32 {
    // SAFETY: forwarded.
    unsafe {
        if message::carries((*c).class as usize) {
            collect_messages(c, message::MAX_SLOTS as u32)
        } else {
            collect_remote(c)
        }
    }
}

/// Expands messages onto `free` until at least `budget` slots (or none is left): those pending
/// first, else the list taken from `remote`. Returns how many slots.
///
/// # Safety
/// `c` must be a live header the caller owns, of a class that carries messages.
unsafe fn collect_messages(c: *mut Chunk, budget: u32) -> u32 {
    // SAFETY: the caller owns the header; `pending` names a message the owner took from `remote`.
    unsafe {
        debug_check(c);
        let m = if (*c).pending != NO_MESSAGE {
            message::slot_at(base(c), (*c).pending).cast::<FreeSlot>()
        } else {
            let (head, _) = remote_list::take(&(*c).remote);
            if head == 0 {
                return 0;
            }
            contention::collection();
            head as *mut FreeSlot
        };
        let (tail, n, rest) = expand(c, m, budget);
        (*c).pending = if rest.is_null() {
            NO_MESSAGE
        } else {
            message::index_of(base(c), rest.cast())
        };
        FreeSlot::set_next(tail, (*c).free);
        (*c).free = m;
        set_used(c, used(c) - n);
        n
    }
}

/// Expands the messages `m`, … (a list taken from chunk `c`'s `remote`) into one list of their
/// slots, each message's own slot before its indices' slots, until at least `budget` slots.
/// Returns the last slot (its link not written), the number of slots, and the first message not
/// expanded (null: none). With `hardened`, every index is checked before it is
/// linked: it names a carved slot of the class that carries the free tag (so a corrupted or
/// forged message aborts here, naming the chunk, instead of handing out a live block).
///
/// # Safety
/// `c` is a live header the caller owns, of a class that carries messages; `m` heads a list it
/// took from `remote`.
unsafe fn expand(
    c: *mut Chunk,
    mut m: *mut FreeSlot,
    budget: u32,
) -> (*mut FreeSlot, u32, *mut FreeSlot) {
    // SAFETY: every message on the list is a free slot of c, sealed by its freer before the
    // release CAS that published it (the take's acquire makes its words visible); its indices
    // name slots of c that its freer freed (checked with `hardened`), which nobody else uses.
    unsafe {
        let class = (*c).class as usize;
        let size = size_class::CLASS_SIZE[class];
        let b = base(c);
        let carved = (*c).bump as usize - b as usize;
        let most = message::INDICES[class] as usize;
        let mut n = 0u32;
        let mut messages = 0u64;
        loop {
            let next = FreeSlot::next(m);
            let k = message::count(m.cast());
            if link::HARDENED && k > most {
                bad_message(c, m.cast(), k, usize::MAX);
            }
            debug_assert!(k <= most, "a message's count");
            let mut prev = m;
            for i in 0..k {
                let ix = message::get(m.cast(), i);
                let s = message::slot_at(b, ix);
                let off = (ix as usize) << 3;
                if link::HARDENED {
                    if off >= carved || off % size != 0 || !link::looks_free(s, size) {
                        bad_message(c, m.cast(), k, i);
                    }
                } else {
                    debug_assert!(off < carved && off % size == 0, "a message's index");
                }
                FreeSlot::set_next(prev, s.cast());
                prev = s.cast();
            }
            // The count and the indices overwrote part of the free mark `hardened-full` checks
            // when the slot is handed out: it is written again (the tag, which they left, too).
            link::mark_free(m.cast(), size);
            n += k as u32 + 1;
            messages += 1;
            if next.is_null() || n >= budget {
                contention::links_walked(messages);
                return (prev, n, next);
            }
            FreeSlot::set_next(prev, next);
            m = next;
        }
    }
}

/// A message failed `hardened`'s check (`i == usize::MAX`: its count): abort, naming it.
#[cfg(feature = "hardened")]
#[cold]
#[inline(never)]
fn bad_message(c: *mut Chunk, m: *mut u8, k: usize, i: usize) -> ! {
    if i == usize::MAX {
        crate::base::fatal::fatal(format_args!(
            "a corrupted remote-free message {m:p} in chunk {c:p}: it counts {k} slots, more than its class holds"
        ))
    }
    crate::base::fatal::fatal(format_args!(
        "a corrupted remote-free message {m:p} in chunk {c:p}: its index {i} of {k} names no freed slot (a double free, or a write after free into a freed block)"
    ))
}

/// Without `hardened` nothing is checked (debug builds assert): never called.
#[cfg(not(feature = "hardened"))]
#[inline(always)]
fn bad_message(_c: *mut Chunk, _m: *mut u8, _k: usize, _i: usize) {
    debug_assert!(false, "a corrupted remote-free message");
}

/// Moves `local_free` onto `free` (which must be empty).
///
/// # Safety
/// `c` must be a live header the caller owns.
#[inline]
pub unsafe fn take_local(c: *mut Chunk) -> bool {
    // SAFETY: the caller owns the header.
    unsafe {
        debug_check(c);
        debug_assert!((*c).free.is_null());
        if (*c).local_free.is_null() {
            return false;
        }
        (*c).free = (*c).local_free;
        (*c).local_free = ptr::null_mut();
        true
    }
}

/// Pushes the `n` slots `head` … `tail` (linked by [`FreeSlot::set_next`], `tail`'s link to be
/// written here; in a class that carries messages, `head == tail` is a sealed message of `n`
/// slots) onto the remote-free list of their chunk `c`, with one CAS: frees by a thread that does
/// not own `c`. Returns true when this push cleared [`FULL`](remote_list::FULL):
/// the caller must tell the owner.
///
/// # Safety
/// Every slot of the list must be a handed-out slot of `c` that nobody uses any more.
#[inline]
pub unsafe fn push_remote(c: *mut Chunk, head: *mut FreeSlot, tail: *mut FreeSlot, n: u32) -> bool {
    // SAFETY: c is a live header (its slots are handed out); `remote` is an atomic any thread may
    // push onto; the slots are ours to write until the CAS publishes them.
    unsafe {
        // Attempts, for the `testing` contention count (compiled out without it).
        let mut attempts = 0u64;
        let cleared = remote_list::push(&(*c).remote, head as usize, n as usize, |old| {
            attempts += 1;
            FreeSlot::set_next(tail, old as *mut FreeSlot)
        });
        contention::remote_push(attempts);
        cleared
    }
}

/// Pushes slot `s` alone onto the remote-free list of its chunk `c` (in a class that carries
/// messages, as a message of no index). Returns as [`push_remote`].
///
/// # Safety
/// `s` must be a handed-out slot of `c` that nobody uses any more.
#[inline]
pub unsafe fn push_one(c: *mut Chunk, s: *mut FreeSlot) -> bool {
    // SAFETY: forwarded; the slot is ours to write until the push.
    unsafe {
        if message::carries((*c).class as usize) {
            message::seal(s.cast(), 0);
        }
        push_remote(c, s, s, 1)
    }
}

/// Marks a chunk that has nothing left to hand out as full. Fails (returns false) when remote
/// frees are waiting: the caller collects them instead.
///
/// # Safety
/// `c` must be a live header the caller owns.
pub unsafe fn try_mark_full(c: *mut Chunk) -> bool {
    // SAFETY: the caller owns the header.
    unsafe { remote_list::try_mark_full(&(*c).remote) }
}

/// True when the chunk has no slot to hand out without collecting: `free` empty and nothing left
/// to carve.
///
/// # Safety
/// `c` must be a live header the caller owns.
#[cfg(test)]
pub unsafe fn is_exhausted(c: *mut Chunk) -> bool {
    // SAFETY: the caller owns the header.
    unsafe { (*c).free.is_null() && (*c).local_free.is_null() && (*c).bump == (*c).end }
}

// Doubly linked lists of chunks through `prev`/`next` (a heap's avail and full lists, the
// source's abandoned lists).

/// Pushes `ch` at the front of the list `head`.
///
/// # Safety
/// `ch` is on no list; the caller owns it and the list `head` (or holds the list's lock).
pub unsafe fn push(head: *mut *mut Chunk, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        (*ch).prev = ptr::null_mut();
        (*ch).next = *head;
        if !(*head).is_null() {
            (**head).prev = ch;
        }
        *head = ch;
    }
}

/// Takes `ch` out of the list `head`.
///
/// # Safety
/// `ch` is on the list `head`, which the caller owns (or whose lock it holds).
pub unsafe fn unlink(head: *mut *mut Chunk, ch: *mut Chunk) {
    // SAFETY: forwarded.
    unsafe {
        let (p, n) = ((*ch).prev, (*ch).next);
        if p.is_null() {
            *head = n;
        } else {
            (*p).next = n;
        }
        if !n.is_null() {
            (*n).prev = p;
        }
        (*ch).prev = ptr::null_mut();
        (*ch).next = ptr::null_mut();
    }
}

/// Checks the header's invariants that cost a few compares (the fields' docs state them): a no-op
/// in release builds. Called by the owner's slow paths here (carve, collect, take `local_free`).
///
/// # Safety
/// `c` must be a live header the caller owns.
#[inline]
pub unsafe fn debug_check(c: *mut Chunk) {
    if !cfg!(debug_assertions) {
        return;
    }
    // SAFETY: the caller owns the header.
    unsafe {
        let class = (*c).class as usize;
        debug_assert!(class < size_class::NUM_CLASSES);
        debug_assert_eq!((*c).magic, LIVE);
        let size = size_class::CLASS_SIZE[class];
        let cap = (*c).capacity;
        debug_assert_eq!(cap as usize, capacity_of(class));
        let (b, bump, end) = (base(c) as usize, (*c).bump as usize, (*c).end as usize);
        debug_assert_eq!(end, b + cap as usize * size);
        debug_assert!(b <= bump && bump <= end && (bump - b) % size == 0);
        debug_assert!(
            used(c) as usize <= (bump - b) / size,
            "more slots used than carved"
        );
        let n = (*c).notify_at;
        debug_assert!(n == 0 || n == cap - 1 || n == NEVER);
        debug_assert!(!(*c).in_full || n == cap - 1);
    }
}

/// Number of slots on a list (walks it: for checks only).
///
/// # Safety
/// `s` must head a list of free slots.
pub unsafe fn list_len(mut s: *mut FreeSlot) -> usize {
    let mut n = 0;
    while !s.is_null() {
        n += 1;
        // SAFETY: s is on the list (caller).
        s = unsafe { FreeSlot::next(s) };
    }
    n
}

/// Checks the header's invariants that need the lists walked (tests): every carved slot is free
/// or counted in `used`.
///
/// # Safety
/// `c` must be a live header the caller owns, with no remote free in flight.
#[cfg(test)]
pub unsafe fn check(c: *mut Chunk) {
    // SAFETY: the caller owns the header.
    unsafe {
        let size = size_class::CLASS_SIZE[(*c).class as usize];
        let carved = ((*c).bump as usize - base(c) as usize) / size;
        assert!((*c).bump <= (*c).end);
        assert_eq!((*c).capacity as usize, capacity_of((*c).class as usize));
        let remote = remote_list::peek(&(*c).remote) as *mut FreeSlot;
        assert_eq!(
            list_len((*c).free) + list_len((*c).local_free) + used(c) as usize,
            carved,
            "slots lost or doubled"
        );
        assert!(list_len(remote) <= used(c) as usize);
    }
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
        link::init();
        (p, l)
    }

    /// Pops one slot the way the heap's fast path does.
    unsafe fn pop(c: *mut Chunk) -> *mut FreeSlot {
        // SAFETY: the test owns c.
        unsafe {
            let p = (*c).free;
            if !p.is_null() {
                (*c).free = FreeSlot::next(p);
                set_used(c, used(c) + 1);
            }
            p
        }
    }

    /// Pops every slot on `free`, in order.
    unsafe fn pop_all(c: *mut Chunk) -> Vec<*mut FreeSlot> {
        let mut out = Vec::new();
        loop {
            // SAFETY: the test owns c (caller).
            let s = unsafe { pop(c) };
            if s.is_null() {
                return out;
            }
            out.push(s);
        }
    }

    #[test]
    fn header_is_found_from_every_slot() {
        let (p, l) = region();
        // SAFETY: p is a CHUNK_SIZE-aligned, zeroed, exclusively owned region.
        let c = unsafe { init(p, 5) };
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
    fn every_slot_is_handed_out_once_through_all_three_lists() {
        let classes: &[usize] = if cfg!(miri) {
            &[28, 43]
        } else {
            &[0, 1, 7, 8, 20, 31, 43]
        };
        for &class in classes {
            let (p, l) = region();
            // SAFETY: as above; this test owns the chunk.
            unsafe {
                let c = init(p, class);
                let cap = (*c).capacity as usize;
                let mut seen = std::collections::HashSet::new();
                let mut out = Vec::new();
                loop {
                    let s = pop(c);
                    if !s.is_null() {
                        assert!(seen.insert(s as usize), "slot handed out twice");
                        out.push(s);
                        continue;
                    }
                    if extend(c) == 0 {
                        break;
                    }
                }
                assert_eq!(out.len(), cap);
                assert!(is_exhausted(c));
                check(c);
                assert!(try_mark_full(c));
                // A third back locally, a third remotely (the first remote free clears FULL).
                for (i, &s) in out.iter().enumerate() {
                    match i % 3 {
                        0 => {
                            FreeSlot::set_next(s, (*c).local_free);
                            (*c).local_free = s;
                            set_used(c, used(c) - 1);
                        }
                        1 => assert_eq!(push_one(c, s), i == 1, "FULL cleared once"),
                        _ => {}
                    }
                }
                check(c);
                let back_local = cap.div_ceil(3);
                let back_remote = (cap + 1) / 3;
                assert!(take_local(c));
                assert_eq!(collect_remote(c) as usize, back_remote);
                assert_eq!(used(c) as usize, cap - back_local - back_remote);
                check(c);
                let mut again = std::collections::HashSet::new();
                for s in pop_all(c) {
                    assert!(again.insert(s as usize));
                }
                assert_eq!(again.len(), back_local + back_remote);
                assert_eq!(used(c) as usize, cap);
                check(c);
                dealloc(p, l);
            }
        }
    }

    #[test]
    fn messages_are_expanded_a_batch_at_a_time_and_lose_no_slot() {
        // 64 bytes: a message holds its own slot and 27 indices (Miri: 640 bytes, 409 slots).
        let class = if cfg!(miri) { 20 } else { 7 };
        let k = message::INDICES[class] as usize;
        assert!(k > 3);
        let (p, l) = region();
        // SAFETY: this test owns the chunk; each slot is handed out once and freed once.
        unsafe {
            let c = init(p, class);
            while extend(c) > 0 {}
            let out = pop_all(c);
            let cap = out.len();
            // Every slot back as messages of k + 1 slots (the last one shorter), as a freeing
            // thread's batches would send them.
            for run in out.chunks(k + 1) {
                let m = run[0].cast::<u8>();
                for (i, &s) in run[1..].iter().enumerate() {
                    message::set(m, i, message::index_of(base(c), s.cast()));
                }
                message::seal(m, run.len() - 1);
                push_remote(c, run[0], run[0], run.len() as u32);
            }
            assert_eq!(used(c) as usize, cap);
            // A refill expands about a batch's worth; the rest waits, still counted as used.
            let first = collect_remote_some(c) as usize;
            assert!((message::MAX_SLOTS..message::MAX_SLOTS + k + 1).contains(&first));
            assert_eq!(used(c) as usize, cap - first);
            assert_ne!((*c).pending, NO_MESSAGE);
            check(c);
            // Another refill goes on with the pending messages.
            let again = collect_remote_some(c) as usize;
            assert!(again >= message::MAX_SLOTS);
            // A full collection takes everything.
            let rest = collect_remote(c) as usize;
            assert_eq!(first + again + rest, cap);
            assert_eq!(used(c), 0);
            assert_eq!((*c).pending, NO_MESSAGE);
            check(c);
            let mut seen = std::collections::HashSet::new();
            for s in pop_all(c) {
                assert!(seen.insert(s as usize), "a slot handed out twice");
            }
            assert_eq!(seen.len(), cap);
            dealloc(p, l);
        }
    }

    #[test]
    fn remote_frees_from_threads_are_all_collected() {
        let (p, l) = region();
        let class = 3;
        // SAFETY: as above.
        let c = unsafe { init(p, class) };
        let mut slots = Vec::new();
        // SAFETY: this test owns c until it hands slots to the threads below.
        unsafe {
            while extend(c) > 0 {}
            loop {
                let s = pop(c);
                if s.is_null() {
                    break;
                }
                slots.push(s as usize);
            }
        }
        let n = slots.len();
        let per = if cfg!(miri) { 20 } else { n / 4 };
        let cc = c as usize;
        let hs: Vec<_> = slots
            .chunks(per)
            .take(4)
            .map(|part| {
                let part = part.to_vec();
                std::thread::spawn(move || {
                    for s in part {
                        // SAFETY: each slot is handed out once and freed once, here.
                        unsafe { push_one(cc as *mut Chunk, s as *mut FreeSlot) };
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // SAFETY: the threads are done; this test owns c again.
        unsafe {
            assert_eq!(collect_remote(c) as usize, 4 * per);
            check(c);
            dealloc(p, l);
        }
    }

    #[test]
    fn free_one_reports_notify_at_and_used_survives_its_changes() {
        let (p, l) = region();
        // SAFETY: the test owns the chunk; frees of never-handed-out slots only move counts.
        unsafe {
            let c = init(p, 3);
            assert_eq!(used(c), 0);
            extend(c);
            for _ in 0..5 {
                assert!(!pop(c).is_null());
            }
            hand_out_one(c);
            assert_eq!(used(c), 6);
            // The current chunk (NEVER): no free reports.
            assert!(!free_one(c));
            assert_eq!(used(c), 5);
            // On the avail list (0): the last free reports, and only it.
            set_notify_at(c, 0);
            assert_eq!(used(c), 5);
            for left in (0..5).rev() {
                assert_eq!(free_one(c), left == 0, "used {left}");
                assert_eq!(used(c), left);
            }
            // On the full list (capacity - 1 here: used 4): the first free reports.
            set_used(c, 4);
            set_notify_at(c, 3);
            assert_eq!(used(c), 4);
            assert!(free_one(c));
            assert_eq!(used(c), 3);
            set_notify_at(c, NEVER);
            assert_eq!(used(c), 3);
        }
        // SAFETY: allocated above with l.
        unsafe { dealloc(p, l) };
    }

    #[test]
    fn slots_are_aligned_to_their_class() {
        let (p, l) = region();
        let step = if cfg!(miri) { 5 } else { 1 };
        for class in (0..size_class::NUM_CLASSES).step_by(step) {
            // SAFETY: the region is reused for each class; nothing else uses it.
            unsafe {
                let c = init(p, class);
                extend(c);
                let align = 1usize << size_class::CLASS_SIZE[class].trailing_zeros();
                let mut s = (*c).free;
                while !s.is_null() {
                    assert_eq!(s as usize % align, 0);
                    s = FreeSlot::next(s);
                }
            }
        }
        // SAFETY: allocated above with l.
        unsafe { dealloc(p, l) };
    }
}
