//! Checks compiled in with the `hardened` feature. Each detects a misuse or a corruption and aborts
//! the process with a message that names it (never a panic: the allocator must not unwind).
//!
//! | misuse | how it is caught |
//! |---|---|
//! | double free, realloc of a freed block | free slots of 16 B and more carry a keyed tag of their address in their second word; an 8-byte slot counts as free while its link word decodes to a link a free slot could hold (handing it out overwrites the word) and, on 32-bit targets, where the link is half the slot, while the other half holds a 32-bit keyed tag; large blocks: a table of live blocks |
//! | free of an interior, unaligned, wild, foreign or never-allocated pointer | the address map of our chunks (`addr_map`); the slot grid of the chunk (a multiply, not a division); the chunk's carved watermark; the live-large-block table |
//! | size-mismatched dealloc | the layout's class against the chunk header's class (a smaller class is accepted where `realloc` may have shrunk the block in place: at least half the slot, `size_class::stays`) |
//! | corrupted free-list links | links stored as `rotl(p ^ k1, k0) + k0` with per-process keys; a decoded link must be a free slot of the same chunk: in its slot area and carrying its own tag (8-byte slots: a carved slot's start) |
//! | write after free | freed slots carry their tag (checked when handed out again); with `hardened-full` also zeros in the rest of the slot (up to 4 KiB; beyond, its first 4 KiB and last 1 KiB), freed large spans of the C library wait for reuse read-only (a write faults), and the C library's freed blocks wait in a quarantine, zeroed, checked when they leave and (the last 4 freed) at each allocation |
//! | overflow of a small block (C library, `hardened-full`) | a keyed canary after the request (a request takes the class of its size + 2), checked at free, realloc and usable size, and for the last 4 blocks handed out at each allocation |
//! | free of a pointer on the stack or in static data (C library) | a pointer outside our mappings is checked against the thread's stack and the loaded objects' images |
//! | overflow or underflow by a few bytes of a large block (C library) | keyed canaries in the last word of the span header and just after the block (its usable size is then the request rounded to 16 bytes, not to the page), checked at every lookup of the block |
//!
//! Not caught: a double free after the slot was handed out again (it is then a valid free of the new
//! block), writes after free past the first 16 bytes of a freed slot without `hardened-full` (and
//! with it, writes of zeros, or into the unchecked middle of a slot above 4 KiB), and overflows
//! into a live neighbour past the canary. A
//! live block whose second word happens to equal its own secret tag would be taken for free (a
//! 2^-64 chance for data that does not know the key); for an 8-byte block the chance is that its
//! word decodes to an 8-aligned address inside one of our chunks of its class (for a 1 GiB heap
//! about 2^-37; on 32-bit targets, an 8-aligned address in its own chunk, 2^-17, and its last 4
//! bytes its 32-bit tag, 2^-32: 2^-49 together).

//! Every function here has a no-op twin when the feature is off. The hand-out and free points
//! (`global` for `PoolAlloc`, `raw` for the size-less interface, `own_heap` for `Heap`) reach them
//! through the facade in `checks/mod.rs`; the memory layer (`large`, `span`, `source`) calls them
//! directly for large blocks, spans and the link keys. Free-slot marks and link encoding are written by [`crate::chunks::link`].

pub use imp::*;

#[cfg(feature = "hardened")]
mod imp {
    use crate::base::block_table::BlockTable;
    use crate::base::lock::{Lock, Rank};
    use crate::chunks::chunk::{self, FreeSlot};
    use crate::chunks::link::{self, POISON, POISON_BYTES, decode, tag};
    use crate::{base::size_class, chunks::addr_map, os};
    use core::sync::atomic::AtomicUsize;
    use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

    pub use crate::base::fatal::fatal;

    /// Checks a decoded link read from slot `from`, a slot of `size` bytes: null, or a free slot
    /// of the same chunk (every list of free slots is a chunk's own). For slots of 16 bytes and
    /// more the link must lie in the chunk's slot area, 8-aligned: a range test, no load. That it
    /// is a free slot's start is checked when it is handed out in turn, before anything reads
    /// more than its link word: its second word must be its keyed tag ([`on_hand_out`]), so a link
    /// to a live block, or to the middle of a slot, aborts then (reading the tag here as well cost
    /// 8 instructions per allocation for a report one allocation earlier). 8-byte slots carry no
    /// tag: there the link must be the start of a carved slot (a multiply by the class's
    /// reciprocal).
    #[inline(always)]
    fn check_link(from: *mut FreeSlot, next: *mut FreeSlot, size: usize) {
        if next.is_null() {
            return;
        }
        let base = from as usize & !(chunk::CHUNK_SIZE - 1);
        let off = (next as usize).wrapping_sub(base);
        let ok = if size >= 16 {
            // Its link word, the next pop's read, and its tag, the hand-out's, stay in the chunk's
            // slot area (never the header, which other threads write).
            off <= chunk::CHUNK_SIZE - chunk::HEADER_SIZE - 16 && off % 8 == 0
        } else {
            let c = chunk::of(from);
            // SAFETY: `from` is a free slot of one of our chunks, so its header is readable; the
            // caller is the chunk's owner, the only writer of `bump`.
            let (class, bump) = unsafe { ((*c).class as usize, (*c).bump) };
            off < chunk::CHUNK_SIZE
                && slot_index(off, class) * slot_size(class) == off
                && (next as usize) < bump as usize
        };
        if !ok {
            fatal(format_args!(
                "corrupted free list: slot {from:p} links to {next:p} (heap overflow or write after free?)"
            ));
        }
    }

    // --- which chunks are ours: the address map ------------------------------------------------------

    /// Called by the chunk source before the first chunk of a region is used: fixes the link keys
    /// (no link may be stored in a chunk before they are).
    pub fn init_link_keys() {
        link::init();
    }

    /// True when `p` lies in a chunk this allocator mapped (and has not unmapped).
    #[inline]
    pub fn is_ours(p: *mut u8) -> bool {
        addr_map::is_chunk(p)
    }

    // --- per-slot state: free-slot tags, and links for the 8-byte class --------------------------------

    /// An 8-byte slot has room only for its link on 64-bit targets, so its state is read from that
    /// word: free while it decodes to a link a free slot could hold (null, or an 8-aligned address
    /// in the slot's own chunk; every free slot's word is such a link, written by `set_next`).
    /// Handing the slot out zeroes the word, which decodes to no such link (see `link::init`). A
    /// per-slot bitmap did the same with two atomic read-modify-writes per pair on a word that
    /// threads sharing a chunk fought over (cache-scratch ran 4.4–4.8x slower hardened than
    /// default). On 32-bit targets the link is 4 bytes and the rest of the slot holds a 32-bit tag
    /// ([`link::TAG8`]), required too: a 4-byte link alone would take a live block for free with a
    /// chance of 2^-17 (1/8 for the alignment, 2^-14 for the chunk).
    ///
    /// # Safety
    /// `p` is the start of a carved 8-byte slot of one of our chunks (`slot_of`).
    #[inline(always)]
    unsafe fn looks_free_8(p: *mut u8) -> bool {
        // SAFETY: p is a carved slot, 8 bytes long and 8-aligned (caller).
        let n = decode(unsafe { p.cast::<*mut FreeSlot>().read() });
        let linked = n.is_null() || (n as usize & 7 == 0 && chunk::of(n) == chunk::of(p));
        // SAFETY: as above: bytes 4..8 of the slot (where TAG8, the link is 4 bytes).
        linked && (!link::TAG8 || unsafe { p.add(4).cast::<u32>().read() } == link::tag8(p))
    }

    /// `ceil(2^40 / size)` for every class: `(off · RECIP[c]) >> 40 == off / size` for every offset
    /// in a chunk (off < 2^18, size ≤ 2^15, so the rounding error off·(RECIP·size − 2^40) < 2^33
    /// stays below 2^40 / size), without a division on the free path.
    static RECIP: [u64; size_class::NUM_CLASSES] = {
        let mut r = [0u64; size_class::NUM_CLASSES];
        let mut c = 0;
        while c < size_class::NUM_CLASSES {
            let d = size_class::CLASS_SIZE[c] as u64;
            r[c] = (1u64 << 40).div_ceil(d);
            c += 1;
        }
        r
    };

    /// The index of the slot of class `class` that holds byte `off` of a chunk (`off` < CHUNK_SIZE).
    #[inline(always)]
    fn slot_index(off: usize, class: usize) -> usize {
        debug_assert!(class < size_class::NUM_CLASSES && off < chunk::CHUNK_SIZE);
        // SAFETY: class < NUM_CLASSES (callers pass classes from class_of or a checked header).
        ((off as u64 * unsafe { *RECIP.get_unchecked(class) }) >> 40) as usize
    }

    /// Validates `p` as the start of a carved slot in one of our chunks, for a small block of
    /// `size` bytes aligned to `align`, or aborts naming the problem; returns the slot's class.
    /// That is the layout's class, or a larger one when `realloc` shrank the block in place: the
    /// sizes [`size_class::stays`] allows in the slot are accepted, no others. `what` names the
    /// operation for the message. The layout's own class is looked up only for a message.
    #[inline]
    fn slot_of(p: *mut u8, size: usize, align: usize, what: &'static str) -> usize {
        if !is_ours(p) {
            invalid(what, p, size, align, Invalid::Foreign);
        }
        let c = chunk::of(p);
        // SAFETY: p's chunk is ours and mapped, so its header is readable; `magic` and `class` change
        // only while no slot of the chunk is handed out, `carved` is an atomic. Fields are read by
        // place, so no reference to the header (which its owner is writing) is made.
        let (magic, hclass, carved) =
            unsafe { ((*c).magic, (*c).class, (*c).carved.load(Acquire)) };
        if magic != chunk::LIVE {
            invalid(what, p, size, align, Invalid::NotInUse);
        }
        let hclass = hclass as usize;
        // `stays` accepts every size of the slot's own class and the sizes a shrink in place
        // leaves there, nothing else. A corrupt header's class is refused first: the slot grid
        // below indexes its tables with it.
        if hclass >= size_class::NUM_CLASSES || !size_class::stays(hclass, size, align, p as usize)
        {
            invalid(what, p, size, align, Invalid::Mismatch(hclass));
        }
        let slot = slot_size(hclass);
        let off = p as usize & (chunk::CHUNK_SIZE - 1);
        if slot_index(off, hclass) * slot != off || p as usize >= carved {
            invalid(what, p, size, align, Invalid::NotStart(hclass));
        }
        hclass
    }

    /// What is wrong with a pointer given to `free` or `realloc`.
    #[derive(Clone, Copy)]
    enum Invalid {
        Foreign,
        NotInUse,
        /// The block's class (from its chunk header).
        Mismatch(usize),
        /// The class of the slots there (from the chunk header).
        NotStart(usize),
    }

    /// Aborts naming what is wrong with `p`. Out of line, so the checks' fast path carries no
    /// formatting set-up.
    #[cold]
    #[inline(never)]
    fn invalid(what: &str, p: *mut u8, size: usize, align: usize, why: Invalid) -> ! {
        // `stays` also fails a pointer that lacks the layout's alignment: where the classes agree,
        // that is what is wrong.
        let why = match why {
            Invalid::Mismatch(found) if size_class::class_of(size, align) == Some(found) => {
                Invalid::NotStart(found)
            }
            why => why,
        };
        match why {
            Invalid::Foreign => fatal(format_args!(
                "{what} of invalid pointer {p:p}: not allocated by poolalloc (wild or foreign pointer)"
            )),
            Invalid::NotInUse => fatal(format_args!(
                "{what} of invalid pointer {p:p}: its chunk is not in use"
            )),
            Invalid::Mismatch(found) => fatal(format_args!(
                "size mismatch: {what} of {p:p} with a layout of the {}-byte class, but the block is in the {}-byte class",
                size_class::class_of(size, align).map_or(0, slot_size),
                size_class::CLASS_SIZE.get(found).copied().unwrap_or(0)
            )),
            Invalid::NotStart(class) => fatal(format_args!(
                "{what} of invalid pointer {p:p}: not the start of a block (interior, unaligned or never-allocated pointer into {}-byte slots)",
                slot_size(class)
            )),
        }
    }

    /// The slot size of class `class`, which came from `class_of` (so is in range).
    #[inline(always)]
    fn slot_size(class: usize) -> usize {
        debug_assert!(class < size_class::NUM_CLASSES);
        // The table `stays` reads too, so a check that uses both loads the size once.
        size_class::size_of(class)
    }

    /// A slot of class `class` is being handed out: it must carry its free mark and be untouched.
    #[inline(always)]
    pub fn on_hand_out(p: *mut u8, class: usize) {
        // The link the slot held is now its chunk's `free` (the hand-out was a pop by the owner, this
        // thread): it must be null or a free slot of the same chunk (`check_link`).
        let size = slot_size(class);
        // SAFETY: p was just handed out of its chunk, whose header is live and owned by this thread.
        check_link(p.cast(), unsafe { (*chunk::of(p)).free }, size);
        if size < 16 {
            // Its link was checked when it was taken off its list; zeroing it (and, on 32-bit
            // targets, the tag after it) makes the block live.
            // SAFETY: the slot is ours now, 8 bytes, 8-aligned.
            unsafe { p.cast::<u64>().write(0) };
            return;
        }
        let w = p.cast::<u64>();
        // SAFETY: the slot is ours now and at least min(size, 64)/8 ≥ 2 words long.
        unsafe {
            if w.add(1).read() != tag(p) {
                bad_hand_out(p, size, 8);
            }
            // The offending word is found only on failure.
            if !link::poison_intact(p, size) {
                let at = (2..size.min(POISON_BYTES) / 8)
                    .find(|&i| w.add(i).read() != POISON)
                    .map(|i| i * 8)
                    .or_else(|| {
                        (size > POISON_BYTES)
                            .then(|| link::rest_changed_at(p, size))
                            .flatten()
                    })
                    .unwrap_or(16);
                bad_hand_out(p, size, at);
            }
            // Clear the mark, so freeing the new block is not taken for a double free, and the
            // link word: a stale link left in a block the user never writes would otherwise be
            // copied by a realloc into an 8-byte slot, where it reads as a free slot's link.
            w.add(1).write(0);
            w.write(0);
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_hand_out(p: *mut u8, size: usize, at: usize) -> ! {
        fatal(format_args!(
            "write after free detected in block {p:p} ({size}-byte class) at offset {at} (or a corrupted free list handed out a live block)"
        ))
    }

    /// A small block is being freed (the caller saw a small layout): it must be a live block of
    /// the layout's class. Marks it free.
    #[inline]
    pub fn on_free(p: *mut u8, layout: core::alloc::Layout) {
        debug_assert!(size_class::is_small(layout.size(), layout.align()));
        let class = slot_of(p, layout.size(), layout.align(), "free");
        let size = slot_size(class);
        if size < 16 {
            // SAFETY: p is the start of a carved 8-byte slot (slot_of).
            if unsafe { looks_free_8(p) } {
                double_free(p);
            }
            // Its tag, on 32-bit targets (nothing on 64-bit ones); the free path writes the link.
            // SAFETY: the block was live and its owner has just given it up.
            unsafe { link::mark_free(p, size) };
            return;
        }
        let t = tag(p);
        // SAFETY: p is the start of a carved slot of at least 16 bytes (slot_of).
        if unsafe { p.cast::<u64>().add(1).read() } == t {
            double_free(p);
        }
        // SAFETY: the block was live and its owner has just given it up; size >= 16.
        unsafe { link::mark_free_tagged(p, size, t) };
    }

    /// A small block of `layout` freed to a `Heap`: it must lie in one of our chunks, which the
    /// heap's own pools own (`owned`, which reads the chunk's header), and be live ([`on_free`]).
    #[inline]
    pub fn on_heap_free(p: *mut u8, layout: core::alloc::Layout, owned: impl FnOnce() -> bool) {
        if !(addr_map::kind_of(p) == addr_map::Kind::Chunk && owned()) {
            fatal(format_args!(
                "a block freed to a Heap that did not allocate it ({p:p})"
            ));
        }
        on_free(p, layout);
    }

    #[cold]
    #[inline(never)]
    fn double_free(p: *mut u8) -> ! {
        fatal(format_args!(
            "double free of {p:p} (or free of a never-allocated slot)"
        ))
    }

    /// A pointer into one of our large spans that is not a live block's start, given to the
    /// size-less interface.
    #[cold]
    pub fn on_invalid_pointer(p: *mut u8, what: &str) {
        fatal(format_args!(
            "{what} of {p:p}: not a live block (inside a large block, or freed already)"
        ))
    }

    /// `realloc` of a small block of `size` bytes aligned to `align`: it must be live.
    pub fn check_live(p: *mut u8, size: usize, align: usize) {
        if !size_class::is_small(size, align) {
            return;
        }
        let class = slot_of(p, size, align, "realloc");
        let live = if slot_size(class) < 16 {
            // SAFETY: p is the start of a carved 8-byte slot (slot_of).
            !unsafe { looks_free_8(p) }
        } else {
            // SAFETY: p is the start of a carved slot of at least 16 bytes (slot_of).
            let mark = unsafe { p.cast::<u64>().add(1).read() };
            mark != tag(p)
        };
        if !live {
            fatal(format_args!("realloc of freed block {p:p}"));
        }
    }

    /// A pointer freed (or reallocated) that lies in none of our mappings: the C library leaves
    /// such pointers alone (the dynamic loader frees blocks of its early allocator through
    /// `free`), unless it is certainly no heap memory: misaligned, in the first 64 KiB, where
    /// nothing is mapped, on the stack or in a loaded object's image.
    #[cold]
    pub fn on_foreign(p: *mut u8, what: &str) {
        if is_zero_size_block(p) {
            return; // ours: freeing it does nothing
        }
        let a = p as usize;
        // No allocator hands out a block that is not 8-aligned (C's max_align_t), in the first
        // 64 KiB (Linux's least mapping address), or where nothing is mapped.
        if a % 8 != 0 {
            fatal(format_args!(
                "{what} of invalid pointer {p:p}: not a heap block (misaligned)"
            ));
        }
        if a < 1 << 16 {
            fatal(format_args!(
                "{what} of invalid pointer {p:p}: not a heap block (in the first 64 KiB, never mapped)"
            ));
        }
        if os::is_unmapped(p) {
            fatal(format_args!(
                "{what} of invalid pointer {p:p}: not a heap block (nothing is mapped there)"
            ));
        }
        if os::is_stack_or_image(p) {
            fatal(format_args!(
                "{what} of invalid pointer {p:p}: not a heap block (on the stack or in a program's static data)"
            ));
        }
    }

    // --- zero-size blocks of the C library -----------------------------------------------------------

    /// Address space for zero-size blocks: 256 MiB (16 MiB on 32-bit targets) that faults on any
    /// access, reserved at the first `malloc(0)`; each block is the next 16 bytes of it, never
    /// handed out again (so every zero-size block is unique, as C requires). 0: not reserved yet;
    /// 1: the OS gave none.
    static ZERO_BASE: AtomicUsize = AtomicUsize::new(0);
    static ZERO_NEXT: AtomicUsize = AtomicUsize::new(0);
    const ZERO_SPACE: usize = if cfg!(target_pointer_width = "64") {
        256 << 20
    } else {
        16 << 20
    };

    /// A unique block for a zero-size request (C's `malloc(0)`, `calloc(0, n)`) where any read or
    /// write of it faults, 16-aligned; null once the space is used up or where the OS has no such
    /// memory (the caller then hands out an 8-byte slot, as without the feature).
    #[cold]
    pub fn zero_size_block() -> *mut u8 {
        let mut base = ZERO_BASE.load(Acquire);
        if base == 0 {
            let p = os::reserve_inaccessible(ZERO_SPACE) as usize;
            let want = if p == 0 { 1 } else { p };
            base = match ZERO_BASE.compare_exchange(0, want, AcqRel, Acquire) {
                Ok(_) => want,
                Err(won) => won, // another thread reserved first; ours stays unused
            };
        }
        if base == 1 {
            return core::ptr::null_mut();
        }
        let off = ZERO_NEXT.fetch_add(16, Relaxed);
        if off >= ZERO_SPACE {
            return core::ptr::null_mut();
        }
        (base + off) as *mut u8
    }

    /// True when `p` is one of [`zero_size_block`]'s blocks (freeing one does nothing).
    #[inline]
    pub fn is_zero_size_block(p: *mut u8) -> bool {
        let base = ZERO_BASE.load(Acquire);
        base > 1 && (p as usize).wrapping_sub(base) < ZERO_SPACE
    }

    // --- large spans of the C library ---------------------------------------------------------------

    /// The word just below a span block (the end of its header's padding): an underflow of the
    /// block overwrites it first.
    #[inline]
    fn span_canary(p: *mut u8) -> u64 {
        tag(p).rotate_left(17) ^ 0x0bad_f00d_5eed_cafe
    }

    /// The word just below a span block: [`span_canary`] mixed with the seven words below it (its
    /// span header, the first 56 of the 64 bytes before the block), so that an underflow of up
    /// to 64 bytes changes the word or what it was computed from (a write 32 bytes below the
    /// block lands on the header's origin, which nothing else checks).
    ///
    /// # Safety
    /// `p` is a span block, with its 64-byte header before it, readable.
    #[inline]
    unsafe fn span_seal(p: *mut u8) -> u64 {
        let w = p.cast::<u64>();
        // SAFETY: the 56 bytes from p - 64 lie in the span header (caller), 8-aligned.
        (2..=8).fold(span_canary(p), |c, i| {
            (c ^ unsafe { w.sub(i).read() })
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29)
        })
    }

    /// Bytes of the canary after a span block: eight words, so an overflow by up to 64 bytes
    /// changes it (on a path of a few hundred instructions, 7 more stores and loads).
    const SPAN_AFTER: usize = 64;

    /// The usable size of a span block of `size` bytes: the request rounded up to 16 bytes, so
    /// that a canary after it catches an overflow, where the span has room for the canary
    /// (`room`: bytes from the block to the span's end); else `page_usable`, as without the feature.
    #[inline]
    pub fn span_usable(size: usize, page_usable: usize, room: usize) -> usize {
        let exact = size.max(1).next_multiple_of(16);
        if exact + SPAN_AFTER <= room {
            exact
        } else {
            page_usable
        }
    }

    /// A span block `p` with `usable` bytes and `room` bytes to its span's end was set up or
    /// resized: writes its canaries, below it and (where there is room) after its usable bytes.
    pub fn on_span_block(p: *mut u8, usable: usize, room: usize) {
        // The keys are fixed before the first canary is (a program's first block may be large).
        link::init();
        // SAFETY: the word below p lies in the block's span header padding (span::HEADER leaves
        // room for it); the words after the usable bytes lie in the span when usable +
        // SPAN_AFTER ≤ room; all are ours, and 8-aligned (p is, usable is a multiple of 16 or of
        // the page).
        unsafe {
            p.cast::<u64>().sub(1).write(span_seal(p));
            if usable + SPAN_AFTER <= room {
                let c = span_canary(p.add(usable));
                for i in 0..SPAN_AFTER / 8 {
                    p.add(usable + i * 8)
                        .cast::<u64>()
                        .write(c.rotate_left(8 * i as u32));
                }
            }
        }
    }

    /// A live span block `p` (as in [`on_span_block`]) is looked up (free, realloc, usable size):
    /// its canaries must hold.
    ///
    /// # Safety
    /// `p` is a live span block with these `usable` and `room`.
    #[inline]
    pub unsafe fn check_span_block(p: *mut u8, usable: usize, room: usize) {
        // SAFETY: as in on_span_block: the span of a live block is mapped and ours.
        unsafe {
            if p.cast::<u64>().sub(1).read() != span_seal(p) {
                fatal(format_args!(
                    "heap underflow: the bytes just below large block {p:p} (its header) were overwritten"
                ));
            }
            let c = span_canary(p.add(usable));
            if usable + SPAN_AFTER <= room
                && (0..SPAN_AFTER / 8).fold(0, |acc, i| {
                    acc | (p.add(usable + i * 8).cast::<u64>().read() ^ c.rotate_left(8 * i as u32))
                }) != 0
            {
                fatal(format_args!(
                    "heap overflow: the bytes just after large block {p:p} ({usable} usable bytes) were overwritten"
                ));
            }
        }
    }

    /// A freed span waits for reuse: made read-only (`hardened-full`), so a write after free
    /// faults. Whether it was (a refusal leaves it writable).
    pub fn on_span_cached(base: *mut u8, len: usize) -> bool {
        // SAFETY: the span is ours and unused (its block was freed).
        cfg!(feature = "hardened-full") && unsafe { os::protect(base, len, false) }
    }

    /// A cached span is taken for reuse: writable again. False when the OS refused (the caller
    /// unmaps it instead).
    #[must_use]
    pub fn on_span_reused(base: *mut u8, len: usize) -> bool {
        if !cfg!(feature = "hardened-full") {
            return true;
        }
        // SAFETY: the span is ours, taken off the cache by the caller.
        unsafe { os::protect(base, len, true) }
    }

    // --- the C library with `hardened-full`: a canary after the request, and a quarantine ---------------

    /// Whether the C library's small blocks carry a canary after the request and wait in
    /// quarantine when freed (`hardened-full`).
    const FULL: bool = cfg!(feature = "hardened-full");
    /// Bytes a small request grows by for its canary's length (the last two bytes of the slot).
    const CANARY_LEN: usize = 2;
    /// Bytes after the request that carry the canary's pattern, at most (then the length).
    const CANARY_CHECKED: usize = 64;

    /// The size a small request of `size` bytes of the size-less interface is served at: with
    /// `hardened-full`, room for a canary after it.
    #[inline(always)]
    pub fn padded(size: usize) -> usize {
        if FULL {
            size.saturating_add(CANARY_LEN)
        } else {
            size
        }
    }

    /// The canary's pattern byte for a block with tag `t`: never zero, so a copy of zeros past the
    /// end changes it.
    #[inline(always)]
    fn canary_byte(t: u64) -> u8 {
        (t >> 8) as u8 | 1
    }

    /// The canary's length word for a block with tag `t` and `slack` bytes after its request.
    #[inline(always)]
    fn canary_len(t: u64, slack: usize) -> [u8; 2] {
        ((slack as u16) ^ (t >> 16) as u16).to_le_bytes()
    }

    /// A slot of class `class` handed out for a request of `n` bytes (`n` + [`CANARY_LEN`] ≤ its
    /// size, by [`padded`]): with `hardened-full`, writes the canary after the request: the
    /// pattern byte over up to 64 bytes, then, in the slot's last two bytes, the slack, keyed.
    /// `span_check` looks a large block's header up, checking its canaries (the memory layer's
    /// `large::is_span_block`, passed down by the caller, as this layer sits above it); it is
    /// called on the recent large blocks ([`watch`]).
    #[inline]
    pub fn on_request(p: *mut u8, class: usize, n: usize, span_check: fn(*mut u8) -> bool) {
        if !FULL {
            return;
        }
        let size = slot_size(class);
        debug_assert!(n + CANARY_LEN <= size && size - n <= u16::MAX as usize);
        let t = tag(p);
        let end = (n + CANARY_CHECKED).min(size - CANARY_LEN);
        // SAFETY: p is a live slot of `size` bytes that the caller just handed out or resized;
        // n ≤ end ≤ size - 2, so both writes lie inside it.
        unsafe {
            core::ptr::write_bytes(p.add(n), canary_byte(t), end - n);
            p.add(size - CANARY_LEN)
                .cast::<[u8; 2]>()
                .write(canary_len(t, size - n));
        }
        watch(p, class, span_check);
    }

    /// With `hardened-full`, a large block `p` handed out by the size-less interface, or moved
    /// there from `old` by a resize (`old` null: a new block): watched as [`watch`] says.
    pub fn on_raw_large(p: *mut u8, old: *mut u8, span_check: fn(*mut u8) -> bool) {
        if !FULL {
            return;
        }
        if !old.is_null() {
            QUARANTINE.lock().forget_live(old as usize);
        }
        watch(p, LARGE_CLASS, span_check);
    }

    /// A block of class `class` (or [`LARGE_CLASS`]) was just handed out: first the blocks handed
    /// out and freed last are checked (the last [`RECENT`] freed, waiting in quarantine, must
    /// read as zeros in their first 64 bytes; the last [`RECENT`] handed out and still live must
    /// have their canaries intact), then `p` joins the live ones. So an overflow of a live block
    /// or a write after free to a block just freed is caught at the next allocation of any size,
    /// not only when the block is freed or leaves the quarantine.
    fn watch(p: *mut u8, class: usize, span_check: fn(*mut u8) -> bool) {
        let mut q = QUARANTINE.lock();
        for &(b, size) in &q.freed {
            let b = b as *mut u8;
            if b.is_null() {
                continue;
            }
            // SAFETY: a block in `freed` waits in quarantine (the last RECENT frees; each class
            // keeps its last Q_SMALL > RECENT), a slot of `size` bytes nobody may use, and
            // stays there while the lock is held.
            let at = (0..size.min(POISON_BYTES) / 8)
                .find(|&i| unsafe { b.cast::<u64>().add(i).read() } != 0);
            if let Some(i) = at {
                fatal(format_args!(
                    "write after free detected in block {b:p} ({size}-byte class) at offset {}, freed recently and waiting in quarantine",
                    i * 8
                ));
            }
        }
        for &(b, c) in &q.live {
            let b = b as *mut u8;
            if b.is_null() {
            } else if c == LARGE_CLASS {
                // Looks its header up, which checks its canaries (aborting on a change).
                span_check(b);
            } else {
                request_of(b, c);
            }
        }
        let i = q.next_live;
        q.live[i] = (p as usize, class);
        q.next_live = (i + 1) % RECENT;
    }

    /// The request a live slot of class `class` was handed out for: its size without
    /// `hardened-full`; with it, read from its canary, which must be intact (else the block
    /// overflowed: abort).
    #[inline]
    pub fn request_of(p: *mut u8, class: usize) -> usize {
        let size = slot_size(class);
        if !FULL {
            return size;
        }
        let t = tag(p);
        // SAFETY: p is a live slot of `size` ≥ 8 bytes (caller), so its last two bytes are its.
        let l = unsafe { p.add(size - CANARY_LEN).cast::<[u8; 2]>().read() };
        let slack = (u16::from_le_bytes(l) ^ (t >> 16) as u16) as usize;
        if !(CANARY_LEN..=size).contains(&slack) {
            overflow(p, size, size - CANARY_LEN, None);
        }
        let n = size - slack;
        let b = canary_byte(t);
        let end = (n + CANARY_CHECKED).min(size - CANARY_LEN);
        let word = u64::from_ne_bytes([b; 8]);
        // Eight bytes at a time (unaligned reads), then the last few one by one.
        let mut i = n;
        let mut bad = false;
        while i + 8 <= end {
            // SAFETY: [i, i + 8) lies inside the slot (i + 8 ≤ end ≤ size - 2).
            bad |= unsafe { p.add(i).cast::<u64>().read_unaligned() } != word;
            i += 8;
        }
        while i < end {
            // SAFETY: i < end ≤ size - 2: inside the slot.
            bad |= unsafe { p.add(i).read() } != b;
            i += 1;
        }
        if bad {
            // SAFETY: as above, bytes n .. end of the slot.
            let at = (n..end).find(|&i| unsafe { p.add(i).read() } != b);
            overflow(p, size, at.unwrap_or(n), Some(n));
        }
        n
    }

    #[cold]
    #[inline(never)]
    fn overflow(p: *mut u8, size: usize, at: usize, n: Option<usize>) -> ! {
        match n {
            Some(n) => fatal(format_args!(
                "heap overflow: block {p:p} of {n} bytes ({size}-byte slot) was written past its end: the canary at offset {at} changed"
            )),
            None => fatal(format_args!(
                "heap overflow: block {p:p} ({size}-byte slot) was written past its end: the canary's length in its last bytes changed"
            )),
        }
    }

    /// Freed blocks of the C library held back from reuse (`hardened-full`): per class the last
    /// [`Q_SMALL`] small blocks freed, and the last [`Q_LARGE`] large ones (with their usable
    /// sizes). One lock for all (a test suite's level, not a service's: threads that free at once
    /// wait on it).
    struct Quarantine {
        small: [[usize; Q_SMALL]; size_class::NUM_CLASSES],
        next: [u8; size_class::NUM_CLASSES],
        large: [(usize, usize); Q_LARGE],
        next_large: usize,
        /// The last small blocks freed (address, slot size), checked at each allocation.
        freed: [(usize, usize); RECENT],
        next_freed: usize,
        /// The last blocks handed out, while live (address, class or [`LARGE_CLASS`]), checked at
        /// each allocation.
        live: [(usize, usize); RECENT],
        next_live: usize,
    }

    impl Quarantine {
        /// `b` is no longer live (freed, or moved by a resize): out of `live`.
        fn forget_live(&mut self, b: usize) {
            for e in &mut self.live {
                if e.0 == b {
                    *e = (0, 0);
                }
            }
        }
    }

    /// Blocks freed and handed out last that each allocation checks (`hardened-full`).
    const RECENT: usize = 4;
    /// The class `live` gives a large block.
    const LARGE_CLASS: usize = usize::MAX;
    // A block in `freed` is in its class's quarantine still.
    const _: () = assert!(RECENT < Q_SMALL);

    /// Small blocks of one class a quarantine holds: a freed block comes back after 8 more frees
    /// of its class.
    const Q_SMALL: usize = 8;
    /// Large blocks the quarantine holds (purged and read-only meanwhile, so they cost address
    /// space, not memory).
    const Q_LARGE: usize = 8;

    static QUARANTINE: Lock<Quarantine> = Lock::new(
        Rank::Quarantine,
        Quarantine {
            small: [[0; Q_SMALL]; size_class::NUM_CLASSES],
            next: [0; size_class::NUM_CLASSES],
            large: [(0, 0); Q_LARGE],
            next_large: 0,
            freed: [(0, 0); RECENT],
            next_freed: 0,
            live: [(0, 0); RECENT],
            next_live: 0,
        },
    );

    /// A small block `p` of class `class` (read from its chunk header) is freed through the
    /// size-less interface. Without `hardened-full`: checked as [`on_free`], and `p` returned
    /// (free it now). With it: checked (a live slot of its chunk; not on a free list, not in
    /// quarantine; its canary intact), zeroed whole and put in quarantine; returned is the block
    /// it pushes out (free that; null while the quarantine fills), whose zeros are checked first
    /// (a write after free while it waited aborts) and which is marked free.
    #[inline]
    pub fn on_raw_slot_free(p: *mut u8, class: usize) -> *mut u8 {
        let size = slot_size(class);
        if !FULL {
            // SAFETY: a class size with alignment 1 is a valid layout.
            on_free(p, unsafe {
                core::alloc::Layout::from_size_align_unchecked(size, 1)
            });
            return p;
        }
        let class = slot_of(p, size, 1, "free");
        let size = slot_size(class);
        // SAFETY: p is the start of a carved slot of `size` bytes (slot_of).
        let on_list = if size < 16 {
            unsafe { looks_free_8(p) }
        } else {
            unsafe { link::looks_free(p, size) }
        };
        if on_list {
            double_free(p);
        }
        let mut q = QUARANTINE.lock();
        if q.small[class].contains(&(p as usize)) {
            drop(q);
            quarantined(p, "double free of");
        }
        request_of(p, class);
        // SAFETY: p is a live slot of `size` bytes its owner has just given up (checked above).
        unsafe { core::ptr::write_bytes(p, 0, size) };
        let i = q.next[class] as usize;
        let out = core::mem::replace(&mut q.small[class][i], p as usize) as *mut u8;
        q.next[class] = ((i + 1) % Q_SMALL) as u8;
        q.forget_live(p as usize);
        let i = q.next_freed;
        q.freed[i] = (p as usize, size);
        q.next_freed = (i + 1) % RECENT;
        drop(q);
        if out.is_null() {
            return out;
        }
        // SAFETY: `out` was a slot of `size` bytes, zeroed when it entered the quarantine and
        // nobody's since (a write to it is the misuse looked for); it is ours to free now.
        unsafe {
            let changed = (0..size.min(POISON_BYTES) / 8)
                .find(|&i| out.cast::<u64>().add(i).read() != 0)
                .map(|i| i * 8)
                .or_else(|| {
                    (size > POISON_BYTES)
                        .then(|| link::rest_changed_at(out, size))
                        .flatten()
                });
            if let Some(at) = changed {
                fatal(format_args!(
                    "write after free detected in block {out:p} ({size}-byte class) at offset {at}, while it waited in quarantine"
                ));
            }
            // Zeros are the poison: only the tag is missing from a free slot's mark.
            if size >= 16 {
                out.cast::<u64>().add(1).write(tag(out));
            } else {
                link::mark_free(out, size);
            }
        }
        out
    }

    #[cold]
    #[inline(never)]
    fn quarantined(p: *mut u8, what: &str) -> ! {
        fatal(format_args!(
            "{what} {p:p}: not a live block (freed already; it waits in quarantine)"
        ))
    }

    /// `realloc` (or another use that needs a live block) of `p`, a small block of class `class`
    /// or (`class` None) a large one: aborts when `p` waits in quarantine (`hardened-full`).
    #[inline]
    pub fn check_not_quarantined(p: *mut u8, class: Option<usize>) {
        if !FULL {
            return;
        }
        let q = QUARANTINE.lock();
        let found = match class {
            Some(c) => q.small.get(c).is_some_and(|r| r.contains(&(p as usize))),
            None => q.large.iter().any(|&(b, _)| b == p as usize),
        };
        drop(q);
        if found {
            quarantined(p, "realloc of freed block");
        }
    }

    /// A large block `p` of `usable` bytes (its canaries checked) is freed through the size-less
    /// interface. Without `hardened-full`, `p` is returned (free it now). With it, `p` waits in
    /// quarantine: zeroed (its whole pages given back to the OS, so they read as zeros and cost no
    /// memory) and read-only from its span's first page on, so a write after free faults; returned
    /// is the block it pushes out, writable again (free that; null while the quarantine fills).
    pub fn on_raw_large_free(p: *mut u8, usable: impl FnOnce() -> usize) -> *mut u8 {
        if !FULL {
            return p;
        }
        let usable = usable();
        let mut q = QUARANTINE.lock();
        if q.large.iter().any(|&(b, _)| b == p as usize) {
            drop(q);
            quarantined(p, "double free of");
        }
        let page = os::page_size();
        let (first, inner, end) = ro_range(p, usable, page);
        // SAFETY: [p, p + usable) is the live block, ours now; [first, end) are whole pages of its
        // span (first: the page of its header, below p), one mapping of the memory layer, which
        // nobody writes while the block is live but ours: its header is only read until the
        // block leaves the quarantine. The bytes before `inner` and from `end` are zeroed by hand.
        unsafe {
            if end > inner {
                core::ptr::write_bytes(p, 0, inner - p as usize);
                core::ptr::write_bytes(end as *mut u8, 0, p as usize + usable - end);
                os::purge(inner as *mut u8, end - inner);
            } else {
                core::ptr::write_bytes(p, 0, usable);
            }
            if end > first {
                os::protect(first as *mut u8, end - first, false);
            }
        }
        q.forget_live(p as usize);
        let i = q.next_large;
        let (out, out_usable) = core::mem::replace(&mut q.large[i], (p as usize, usable));
        q.next_large = (i + 1) % Q_LARGE;
        drop(q);
        if out != 0 {
            let (first, _, end) = ro_range(out as *mut u8, out_usable, page);
            // SAFETY: as above, for the block leaving the quarantine: its pages back to writable
            // (a refusal leaves them read-only, and the span's release unmaps or reuses them).
            if end > first {
                unsafe { os::protect(first as *mut u8, end - first, true) };
            }
        }
        out as *mut u8
    }

    /// For a large block `p` of `usable` bytes: the start of its first page (its span header's),
    /// of its first whole page, and the end of its last whole page.
    fn ro_range(p: *mut u8, usable: usize, page: usize) -> (usize, usize, usize) {
        let a = p as usize;
        (
            a & !(page - 1),
            (a + page - 1) & !(page - 1),
            (a + usable) & !(page - 1),
        )
    }

    // --- live large blocks ------------------------------------------------------------------------------

    /// The live large blocks' addresses.
    static LARGE: Lock<BlockTable<()>> = Lock::new(Rank::LargeTable, BlockTable::new());

    pub fn on_large_alloc(p: *mut u8) {
        remember_large(&mut LARGE.lock(), p);
    }

    fn remember_large(set: &mut BlockTable<()>, p: *mut u8) {
        if let Err(e) = set.insert(p as usize, ()) {
            fatal(format_args!(
                "cannot map {} bytes for the table of live large blocks",
                e.bytes
            ));
        }
    }

    /// A large-layout free (or realloc, with `keep`): `p` must be a live large block.
    pub fn on_large_free(p: *mut u8, keep: bool) {
        let mut set = LARGE.lock();
        if set.remove(p as usize).is_none() {
            drop(set);
            if is_ours(p) {
                fatal(format_args!(
                    "size mismatch: {p:p} is a small block but was freed with a large layout"
                ));
            }
            fatal(format_args!(
                "double free or invalid pointer {p:p}: not a live large block"
            ));
        }
        if keep {
            remember_large(&mut set, p);
        }
    }

    /// Takes the quarantine's and the large-block table's locks for `fork` (after every other
    /// allocator lock).
    pub fn lock_for_fork() {
        core::mem::forget(QUARANTINE.lock());
        core::mem::forget(LARGE.lock());
    }

    /// # Safety
    /// Only after [`lock_for_fork`], by the same thread or its forked child.
    pub unsafe fn unlock_after_fork() {
        // SAFETY: both held by lock_for_fork, guards forgotten.
        unsafe {
            LARGE.force_unlock();
            QUARANTINE.force_unlock();
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::chunks::chunk::{CHUNK_SIZE, FreeSlot};
        use std::alloc::{Layout, alloc_zeroed, dealloc};

        /// An 8-byte slot reads as free while its word decodes to a link a free slot could hold
        /// and, on 32-bit targets, while its other half holds its tag. A live block whose word
        /// happens to be such a link is taken for free on 64-bit targets (the documented 2^-37
        /// chance for data that does not know the key), never on 32-bit ones, where the same
        /// chance would be 2^-17 without the tag.
        #[test]
        fn an_8_byte_slot_is_free_by_its_link_and_on_32_bit_its_tag() {
            let l = Layout::from_size_align(CHUNK_SIZE, CHUNK_SIZE).unwrap();
            // SAFETY: l has a non-zero size.
            let base = unsafe { alloc_zeroed(l) };
            assert!(!base.is_null());
            init_link_keys();
            // SAFETY: base is a CHUNK_SIZE-aligned, zeroed region this test owns; the chunk's
            // slots are handed out below the way the heap's fast path does it.
            unsafe {
                let c = chunk::init(base, 0);
                assert!(chunk::extend(c) > 2);
                let s0 = (*c).free;
                (*c).free = FreeSlot::next(s0);
                let s1 = (*c).free;
                assert!(looks_free_8(s0.cast()) && looks_free_8(s1.cast()));
                on_hand_out(s0.cast(), 0);
                assert!(!looks_free_8(s0.cast()), "a handed-out slot reads as free");
                // The live block now holds the encoded link to s1, a free slot of its chunk.
                s0.cast::<*mut FreeSlot>().write(link::encode(s1));
                assert_eq!(looks_free_8(s0.cast()), !link::TAG8);
                // Freed, it carries its tag again (on 32-bit targets), and reads as free.
                link::mark_free(s0.cast(), 8);
                assert!(looks_free_8(s0.cast()));
                dealloc(base, l);
            }
        }
    }
}

#[cfg(not(feature = "hardened"))]
mod imp {
    //! The no-op twins: with the feature off every check compiles to nothing.

    #[inline(always)]
    pub fn init_link_keys() {}
    #[inline(always)]
    pub fn on_hand_out(_p: *mut u8, _class: usize) {}
    #[inline(always)]
    pub fn on_free(_p: *mut u8, _layout: core::alloc::Layout) {}
    #[inline(always)]
    pub fn on_heap_free(_p: *mut u8, _layout: core::alloc::Layout, _owned: impl FnOnce() -> bool) {}
    #[inline(always)]
    pub fn check_live(_p: *mut u8, _size: usize, _align: usize) {}
    #[inline(always)]
    pub fn on_invalid_pointer(_p: *mut u8, _what: &str) {}
    #[inline(always)]
    pub fn on_foreign(_p: *mut u8, _what: &str) {}
    #[inline(always)]
    pub fn zero_size_block() -> *mut u8 {
        core::ptr::null_mut()
    }
    #[inline(always)]
    pub fn is_zero_size_block(_p: *mut u8) -> bool {
        false
    }
    #[inline(always)]
    pub fn span_usable(_size: usize, page_usable: usize, _room: usize) -> usize {
        page_usable
    }
    #[inline(always)]
    pub fn on_span_block(_p: *mut u8, _usable: usize, _room: usize) {}
    /// # Safety
    /// None: does nothing (the twin of the hardened version).
    #[inline(always)]
    pub unsafe fn check_span_block(_p: *mut u8, _usable: usize, _room: usize) {}
    #[inline(always)]
    pub fn on_span_cached(_base: *mut u8, _len: usize) -> bool {
        false
    }
    #[inline(always)]
    #[must_use]
    pub fn on_span_reused(_base: *mut u8, _len: usize) -> bool {
        true
    }
    #[inline(always)]
    pub fn on_large_alloc(_p: *mut u8) {}
    #[inline(always)]
    pub fn on_large_free(_p: *mut u8, _keep: bool) {}

    #[inline(always)]
    pub fn padded(size: usize) -> usize {
        size
    }

    #[inline(always)]
    pub fn on_request(_p: *mut u8, _class: usize, _n: usize, _span_check: fn(*mut u8) -> bool) {}

    #[inline(always)]
    pub fn request_of(_p: *mut u8, class: usize) -> usize {
        crate::base::size_class::size_of(class)
    }

    #[inline(always)]
    pub fn on_raw_slot_free(p: *mut u8, _class: usize) -> *mut u8 {
        p
    }

    #[inline(always)]
    pub fn check_not_quarantined(_p: *mut u8, _class: Option<usize>) {}

    #[inline(always)]
    pub fn on_raw_large(_p: *mut u8, _old: *mut u8, _span_check: fn(*mut u8) -> bool) {}

    #[inline(always)]
    pub fn on_raw_large_free(p: *mut u8, _usable: impl FnOnce() -> usize) -> *mut u8 {
        p
    }
    #[inline(always)]
    pub fn lock_for_fork() {}
    /// # Safety
    /// None: does nothing (the twin of the hardened version).
    #[inline(always)]
    pub unsafe fn unlock_after_fork() {}
}
