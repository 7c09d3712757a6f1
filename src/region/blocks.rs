//! The block allocator under everything a region holds: byte-granular blocks with boundary tags
//! and segregated free lists indexed by a two-level bitmap (the TLSF scheme: Masmano et al., "TLSF:
//! a new dynamic memory allocator for real-time systems", 2004). Large requests are served here
//! directly, and the slabs of the small classes (`slab.rs`) are blocks of it.
//!
//! **Layout.** A block starts with one header word, `size | FREE | PREV_FREE`; its payload follows
//! at `block + W` and is aligned to [`GRANULE`] (two words). Sizes count the header and are
//! multiples of the granule. A free block also holds, after its header, the next and previous
//! blocks of its free list, and in its last word its size (the footer), so the block after it can
//! find it. Each region ends with a sentinel: a header of size 0, never free.
//!
//! **Invariants.** No two free blocks are adjacent (a freed block merges with free neighbours at
//! once). `PREV_FREE` is set on a header iff the block before it is free (so its footer is valid).
//! `fl_bitmap` bit `f` is set iff `sl_bitmap[f] != 0`; `sl_bitmap[f]` bit `s` is set iff
//! `heads[f][s]` is not null. A block in list `(f, s)` has a size whose [`index`] is `(f, s)`.
//!
//! **Cost.** Allocation: one `index`, at most two bitmap look-ups (`trailing_zeros`), one unlink,
//! one split: no loop. Free: at most two unlinks and one insert: no loop. Both are O(1) whatever the
//! number of blocks and regions. Good fit, not best fit: a request is rounded up to the next list
//! boundary (at most 1/8 of its size above 64 B on 32-bit targets, 128 B on 64-bit ones) so that
//! any block of the first non-empty list found serves it without a search.

use super::memory::Region;
use core::ptr;

/// A machine word.
const W: usize = size_of::<usize>();
/// Every block's size is a multiple of this, and every payload is aligned to it.
pub const GRANULE: usize = 2 * W;
/// The smallest block: header, two list links, footer.
pub const MIN_BLOCK: usize = 4 * W;
/// Header flag: this block is free.
const FREE: usize = 1;
/// Header flag: the block before this one is free (its footer holds its size).
const PREV_FREE: usize = 2;
const FLAGS: usize = FREE | PREV_FREE;

/// Second-level lists per first-level class: each doubling of sizes is split into 8 lists.
const SL_BITS: u32 = 3;
const SL: usize = 1 << SL_BITS;
/// Sizes below this have one list per granule (first level 0).
const LINEAR: usize = SL * GRANULE;
const LINEAR_LOG: u32 = LINEAR.trailing_zeros();
/// Blocks are smaller than 2^MAX_LOG bytes.
const MAX_LOG: u32 = 30;
/// First-level classes: 0 for the linear sizes, then one per doubling up to 2^MAX_LOG.
pub const FL: usize = (MAX_LOG - LINEAR_LOG + 1) as usize;
/// The largest block (a larger region is used up to this).
pub const MAX_BLOCK: usize = (1 << MAX_LOG) - GRANULE;

/// The list of a free block of `size` bytes (a multiple of the granule, below 2^MAX_LOG).
#[inline(always)]
fn index(size: usize) -> (usize, usize) {
    if size < LINEAR {
        (0, size / GRANULE)
    } else {
        let f = usize::BITS - 1 - size.leading_zeros();
        let s = (size >> (f - SL_BITS)) & (SL - 1);
        ((f - LINEAR_LOG + 1) as usize, s)
    }
}

/// The first list whose every block holds `size` bytes, or `None` past the largest list.
#[inline(always)]
fn search_index(size: usize) -> Option<(usize, usize)> {
    let size = if size < LINEAR {
        size
    } else {
        let f = usize::BITS - 1 - size.leading_zeros();
        size + (1 << (f - SL_BITS)) - 1
    };
    if size > MAX_BLOCK {
        return None;
    }
    let (f, s) = index(size);
    // The rounding above may land on the last list of a doubling; `index` moved it to the next
    // first level already, so (f, s) is in range.
    Some((f, s))
}

/// The next block of a free block's list (word 1; null at the end). Links are stored as pointers,
/// not integers, so they keep their provenance.
///
/// # Safety
///
/// `b` is a free block.
#[inline(always)]
unsafe fn next_of(b: *mut usize) -> *mut usize {
    // SAFETY: caller: word 1 of a free block is its next link.
    unsafe { b.add(1).cast::<*mut usize>().read() }
}

/// The previous block of a free block's list (word 2; null at the head).
///
/// # Safety
///
/// `b` is a free block.
#[inline(always)]
unsafe fn prev_of(b: *mut usize) -> *mut usize {
    // SAFETY: caller: word 2 of a free block is its previous link.
    unsafe { b.add(2).cast::<*mut usize>().read() }
}

/// Sets a free block's next link.
///
/// # Safety
///
/// `b` is a free block (or one being made free) of at least `MIN_BLOCK` bytes.
#[inline(always)]
unsafe fn set_next(b: *mut usize, next: *mut usize) {
    // SAFETY: caller.
    unsafe { b.add(1).cast::<*mut usize>().write(next) }
}

/// Sets a free block's previous link.
///
/// # Safety
///
/// As [`set_next`].
#[inline(always)]
unsafe fn set_prev(b: *mut usize, prev: *mut usize) {
    // SAFETY: caller.
    unsafe { b.add(2).cast::<*mut usize>().write(prev) }
}

/// Rounds `n` up to the granule.
#[inline(always)]
const fn granules(n: usize) -> usize {
    (n + GRANULE - 1) & !(GRANULE - 1)
}

/// The block that serves a payload of `size` bytes: header included, granule rounded, at least
/// [`MIN_BLOCK`]. `None` when it cannot exist.
#[inline(always)]
pub fn block_size(size: usize) -> Option<usize> {
    if size > MAX_BLOCK {
        return None;
    }
    let s = granules(size + W);
    Some(if s < MIN_BLOCK { MIN_BLOCK } else { s })
}

/// The free lists of every region of one allocator.
pub struct Blocks {
    /// Bit `f` set iff `sl_bitmap[f] != 0`.
    fl_bitmap: u32,
    /// Bit `s` of entry `f` set iff `heads[f][s]` is not null.
    sl_bitmap: [u8; FL],
    /// The first free block of each list (null: empty).
    heads: [[*mut usize; SL]; FL],
    /// Bytes in free blocks (headers included).
    pub free_bytes: usize,
    /// Bytes of every region laid out (from the first block to the sentinel).
    pub region_bytes: usize,
    /// Regions laid out.
    pub regions: usize,
}

impl Blocks {
    pub const fn new() -> Blocks {
        Blocks {
            fl_bitmap: 0,
            sl_bitmap: [0; FL],
            heads: [[ptr::null_mut(); SL]; FL],
            free_bytes: 0,
            region_bytes: 0,
            regions: 0,
        }
    }

    /// Lays out `region` as one free block and its sentinel. Returns false (and adds nothing) when
    /// it is too small for one block.
    ///
    /// # Safety
    ///
    /// As [`Region::from_raw`]: the memory is valid, owned by this allocator from now on, and
    /// overlaps no region already added.
    pub unsafe fn add(&mut self, region: Region) -> bool {
        let base = region.base as usize;
        let Some(end) = base.checked_add(region.len) else {
            return false;
        };
        // The first header sits one word before a granule boundary, so its payload is aligned.
        let first = granules(base + W) - W;
        // The sentinel's header must fit before `end`, and block sizes are granule multiples.
        if first >= end || end - first < MIN_BLOCK + W {
            return false;
        }
        let mut size = (end - first - W) & !(GRANULE - 1);
        if size > MAX_BLOCK {
            size = MAX_BLOCK;
        }
        if size < MIN_BLOCK {
            return false;
        }
        // Keep the region's provenance: addresses inside it are derived from its pointer.
        let b = region.base.wrapping_add(first - base).cast::<usize>();
        // SAFETY: b..b+size+W lies inside the region (first + size + W <= end), which the caller
        // gave to us; b is word aligned (first + W is a granule multiple).
        unsafe {
            let sentinel = b.byte_add(size);
            // The sentinel: size 0, not free, its predecessor (the block below) free.
            sentinel.write(PREV_FREE);
            // The block before the first one is never looked at: PREV_FREE clear.
            self.insert(b, size);
        }
        self.region_bytes += size;
        self.regions += 1;
        true
    }

    /// Makes `b` a free block of `size` bytes at the head of its list: header, links, footer, and
    /// the next block's `PREV_FREE`. Its predecessor must not be free (blocks are merged first).
    ///
    /// # Safety
    ///
    /// `b..b + size` is a block of a region of this allocator, not in any list, followed by a
    /// block header.
    unsafe fn insert(&mut self, b: *mut usize, size: usize) {
        let (f, s) = index(size);
        let head = self.heads[f][s];
        // SAFETY: b holds at least MIN_BLOCK bytes (4 words), and the word after it is the next
        // header (caller); head, when not null, is a free block of this allocator.
        unsafe {
            b.write(size | FREE);
            set_next(b, head);
            set_prev(b, ptr::null_mut());
            b.byte_add(size - W).write(size);
            let next = b.byte_add(size);
            next.write(next.read() | PREV_FREE);
            if !head.is_null() {
                set_prev(head, b);
            }
        }
        self.heads[f][s] = b;
        self.sl_bitmap[f] |= 1 << s;
        self.fl_bitmap |= 1 << f;
        self.free_bytes += size;
    }

    /// Takes the free block `b` of `size` bytes out of its list (its header still says free).
    ///
    /// # Safety
    ///
    /// `b` is a free block of this allocator, in its list.
    unsafe fn unlink(&mut self, b: *mut usize, size: usize) {
        // SAFETY: b is a free block: words 1 and 2 are its links, each null or a free block.
        unsafe {
            let next = next_of(b);
            let prev = prev_of(b);
            if !next.is_null() {
                set_prev(next, prev);
            }
            if prev.is_null() {
                let (f, s) = index(size);
                debug_assert!(self.heads[f][s] == b);
                self.heads[f][s] = next;
                if next.is_null() {
                    self.sl_bitmap[f] &= !(1 << s);
                    if self.sl_bitmap[f] == 0 {
                        self.fl_bitmap &= !(1 << f);
                    }
                }
            } else {
                set_next(prev, next);
            }
        }
        self.free_bytes -= size;
    }

    /// The first block of the first non-empty list at or above `(f, s)`: two bitmap look-ups.
    #[inline(always)]
    fn find(&self, f: usize, s: usize) -> Option<*mut usize> {
        let above = self.sl_bitmap[f] as u32 & (!0u32 << s);
        let (f, s) = if above != 0 {
            (f, above.trailing_zeros() as usize)
        } else {
            let fls = self.fl_bitmap & (!0u32).checked_shl(f as u32 + 1).unwrap_or(0);
            if fls == 0 {
                return None;
            }
            let f = fls.trailing_zeros() as usize;
            (f, (self.sl_bitmap[f] as u32).trailing_zeros() as usize)
        };
        Some(self.heads[f][s])
    }

    /// Marks the unlinked free block `b` (of `size` bytes) used with `need` bytes, giving the rest
    /// back as a free block when it can hold one.
    ///
    /// # Safety
    ///
    /// `b` is a block of this allocator of `size >= need` bytes, out of every list, followed by a
    /// block header; `need` is a granule multiple of at least `MIN_BLOCK`.
    unsafe fn split_used(&mut self, b: *mut usize, size: usize, need: usize) {
        // SAFETY: b..b+size is the block (caller); the word at b+size is the next header.
        unsafe {
            let keep = b.read() & PREV_FREE;
            if size - need >= MIN_BLOCK {
                b.write(need | keep);
                // The rest follows a used block: its PREV_FREE stays clear.
                self.insert(b.byte_add(need), size - need);
            } else {
                b.write(size | keep);
                let next = b.byte_add(size);
                next.write(next.read() & !PREV_FREE);
            }
        }
    }

    /// A block with a payload of `size` bytes aligned to `align` (a power of two), or `None` when
    /// no free block is large enough. O(1): no loop.
    pub fn alloc(&mut self, size: usize, align: usize) -> Option<*mut u8> {
        let need = block_size(size)?;
        if align <= GRANULE {
            let (f, s) = search_index(need)?;
            let b = self.find(f, s)?;
            // SAFETY: b heads a free list: a free block of at least `need` bytes (search_index
            // rounded up to a list whose every block is large enough), predecessor used.
            unsafe {
                let bs = b.read() & !FLAGS;
                self.unlink(b, bs);
                self.split_used(b, bs, need);
                return Some(b.add(1).cast());
            }
        }
        // The gap before the aligned payload must be empty or a free block of its own.
        let gap_of = |b: *mut usize| {
            let payload = b as usize + W;
            let gap = payload.next_multiple_of(align) - payload;
            if gap != 0 && gap < MIN_BLOCK {
                gap + align
            } else {
                gap
            }
        };
        // First the block a plain request would take: it often has the alignment already (the
        // tail left by the last aligned request, as when slabs are carved one after another).
        let (f, s) = search_index(need)?;
        let plain = self.find(f, s).filter(|&b| {
            // SAFETY: a list head is a free block.
            let bs = unsafe { b.read() } & !FLAGS;
            bs >= need + gap_of(b)
        });
        // Else a block with room for any gap: need + align + MIN_BLOCK - GRANULE bytes.
        let b = match plain {
            Some(b) => b,
            None => {
                let (f, s) = search_index(need.checked_add(align + MIN_BLOCK - GRANULE)?)?;
                self.find(f, s)?
            }
        };
        // SAFETY: b is a free block of at least need + gap bytes, where the gap before the aligned
        // payload is 0 or [MIN_BLOCK, align + MIN_BLOCK - GRANULE] bytes.
        unsafe {
            let bs = b.read() & !FLAGS;
            self.unlink(b, bs);
            let gap = gap_of(b);
            let (b, bs) = if gap == 0 {
                (b, bs)
            } else {
                // The gap stays free (its predecessor is used); the aligned block follows it.
                let a = b.byte_add(gap);
                a.write(0);
                self.insert(b, gap);
                (a, bs - gap)
            };
            self.split_used(b, bs, need);
            Some(b.add(1).cast())
        }
    }

    /// Frees the block whose payload is `p`, merging it with free neighbours. O(1): no loop.
    ///
    /// # Safety
    ///
    /// `p` was returned by [`alloc`](Self::alloc) of this allocator and is not freed yet.
    pub unsafe fn free(&mut self, p: *mut u8) {
        // SAFETY: p's header is the word before it; its neighbours are blocks of the same region
        // (the sentinel bounds it above, a clear PREV_FREE below).
        unsafe {
            let mut b = p.cast::<usize>().sub(1);
            let h = b.read();
            let mut size = h & !FLAGS;
            // Marked free even where it merges into the block before it (whose header then
            // describes it): a second free of `p` sees FREE (`looks_used`, for `hardened`).
            b.write(h | FREE);
            let next = b.byte_add(size);
            let nh = next.read();
            if nh & FREE != 0 {
                let ns = nh & !FLAGS;
                self.unlink(next, ns);
                size += ns;
            }
            if h & PREV_FREE != 0 {
                let ps = b.sub(1).read();
                let prev = b.byte_sub(ps);
                self.unlink(prev, ps);
                b = prev;
                size += ps;
            }
            self.insert(b, size);
        }
    }

    /// Tries to resize the block of payload `p` to hold `size` bytes where it is: shrinking gives
    /// the tail back, growing takes the free block after it. True when the block now holds `size`
    /// bytes. O(1).
    ///
    /// # Safety
    ///
    /// `p` was returned by [`alloc`](Self::alloc) of this allocator and is not freed yet.
    pub unsafe fn resize(&mut self, p: *mut u8, size: usize) -> bool {
        let Some(need) = block_size(size) else {
            return false;
        };
        // SAFETY: as in free: p's header precedes it, the next header follows the block.
        unsafe {
            let b = p.cast::<usize>().sub(1);
            let bs = b.read() & !FLAGS;
            let next = b.byte_add(bs);
            let nh = next.read();
            let avail = if nh & FREE != 0 {
                bs + (nh & !FLAGS)
            } else {
                bs
            };
            if need > avail {
                return false;
            }
            if nh & FREE != 0 {
                self.unlink(next, nh & !FLAGS);
                // The merged block's tail is followed by the block after `next`, whose
                // PREV_FREE is set; split_used clears or keeps it as the split decides.
                self.split_used(b, avail, need);
            } else if bs - need >= MIN_BLOCK {
                self.split_used(b, bs, need);
            }
            true
        }
    }

    /// The bytes the block of payload `p` occupies (its header included).
    ///
    /// # Safety
    ///
    /// `p` was returned by [`alloc`](Self::alloc) of this allocator and is not freed yet.
    pub unsafe fn size_of(p: *mut u8) -> usize {
        // SAFETY: the header is the word before the payload.
        unsafe { p.cast::<usize>().sub(1).read() & !FLAGS }
    }

    /// True when the header before `p` says the block is in use (the `hardened` double-free and
    /// foreign-pointer test: a freed block's header says free).
    ///
    /// # Safety
    ///
    /// The word before `p` is readable.
    pub unsafe fn looks_used(p: *mut u8) -> bool {
        // SAFETY: caller.
        let h = unsafe { p.cast::<usize>().sub(1).read() };
        h & FREE == 0 && h & !FLAGS >= MIN_BLOCK
    }

    /// The payload bytes of the largest free block (0 when none): the highest non-empty list,
    /// walked. Statistics only: O(blocks in that list).
    pub fn largest_free(&self) -> usize {
        if self.fl_bitmap == 0 {
            return 0;
        }
        let f = 31 - self.fl_bitmap.leading_zeros() as usize;
        let s = 31 - (self.sl_bitmap[f] as u32).leading_zeros() as usize;
        let mut b = self.heads[f][s];
        let mut best = 0;
        while !b.is_null() {
            // SAFETY: every block of a list is a free block of this allocator.
            unsafe {
                best = best.max(b.read() & !FLAGS);
                b = next_of(b);
            }
        }
        best - W
    }

    /// Checks every invariant of the module docs over every list (tests only).
    #[cfg(test)]
    pub fn check(&self) {
        let mut total = 0;
        for f in 0..FL {
            assert_eq!(self.fl_bitmap >> f & 1 == 1, self.sl_bitmap[f] != 0);
            for s in 0..SL {
                let mut b = self.heads[f][s];
                assert_eq!(self.sl_bitmap[f] >> s & 1 == 1, !b.is_null());
                let mut prev = ptr::null_mut();
                while !b.is_null() {
                    // SAFETY: list members are free blocks.
                    unsafe {
                        let h = b.read();
                        let size = h & !FLAGS;
                        assert_eq!(h & FREE, FREE, "block in a list not marked free");
                        assert_eq!(h & PREV_FREE, 0, "two free blocks adjacent");
                        assert_eq!(index(size), (f, s), "block in the wrong list");
                        assert_eq!(b.byte_add(size - W).read(), size, "footer");
                        let next = b.byte_add(size).read();
                        assert_eq!(next & FREE, 0, "two free blocks adjacent");
                        assert_eq!(
                            next & PREV_FREE,
                            PREV_FREE,
                            "PREV_FREE not set after a free block"
                        );
                        assert_eq!(prev_of(b), prev);
                        total += size;
                        prev = b;
                        b = next_of(b);
                    }
                }
            }
        }
        assert_eq!(total, self.free_bytes);
    }
}
