//! The small classes of a region: requests of at most [`MAX_SMALL`] bytes (aligned to at most 8)
//! take a slot of the crate's size classes (`size_class`: 8, 16, ..., 64, 80, 96, 112, 128 B) from
//! a **slab**: a block of the block allocator (`blocks.rs`) of 512 B or more (see `SLAB_SIZE`),
//! aligned to its size, whose first bytes are its header and the rest slots of one class.
//!
//! Why 128 B and 512 B: every class with a slab holds a partly used one, and a slab needs a free
//! block with an aligned range of its size. On a 40 KiB heap, a heavy mixed workload (the first
//! version of ports/thumbv7m's) ran out at 27.5 KiB requested with classes up to 256 B in 1 KiB
//! slabs (a seventh of the heap free, in pieces too small for a slab), at 31.7 KiB with classes up
//! to 128 B in 512 B slabs; random sizes up to 1 KiB fill 92-94% of a 256 KiB region before the
//! first failure, up from 89%.
//!
//! A slot's slab is found by masking its address with the class's slab size (the class is known at
//! free time from the layout). Each class keeps a list of its slabs that have a free slot; a slab
//! hands out its freed slots first (a list through their first word), then carves fresh ones in
//! address order. A slab whose last slot is freed goes back to the block allocator at once, so
//! memory one class no longer uses serves any size (a 64 KiB part cannot keep idle slabs).
//!
//! **Cost.** Allocation: the class's first slab, one pop or one carve, and when the slab becomes
//! full one unlink; when the class has no slab, one block allocation (O(1), `blocks.rs`). Free: one
//! push, at most one list insert (the slab was full) or one unlink and one block free (it became
//! empty). No loop over slabs or slots.

use super::blocks::{Blocks, GRANULE};
use super::misuse::Misuse;
use crate::base::size_class::{class_of_size_computed, class_size_of};
use core::ptr;

/// The largest request served from a slab.
pub const MAX_SMALL: usize = 128;
/// Classes served from slabs: every class of the crate's table up to `MAX_SMALL`.
pub const CLASSES: usize = class_of_size_computed(MAX_SMALL) + 1;

/// The slot size of each class, from the crate's formula (`size_class`). The region keeps its own
/// compact tables (this one, [`CLASS_OF`]): the crate's cover 48 classes up to 64 KiB, 300 bytes a
/// `no_std` wasm module would carry for nothing.
static CLASS_SIZE: [u16; CLASSES] = {
    let mut t = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        t[c] = class_size_of(c) as u16;
        c += 1;
    }
    t
};

/// `CLASS_OF[(size + 7) / 8]` is the class of a request of `size <= MAX_SMALL` bytes.
static CLASS_OF: [u8; MAX_SMALL / 8 + 1] = {
    let mut t = [0; MAX_SMALL / 8 + 1];
    let mut i = 0;
    while i < t.len() {
        t[i] = class_of_size_computed(i * 8) as u8;
        i += 1;
    }
    t
};
/// The smallest slab.
const MIN_SLAB: usize = 512;
/// The bytes at a slab's end that it leaves to the header of the block after it (the block
/// allocator puts each block's header one word before its payload, so a slab's block is its size
/// less a granule: slabs carved one after another then tile the region with no gap).
const TAIL: usize = GRANULE;

/// A slab's header, at its start.
#[repr(C)]
struct Slab {
    /// The class's list of slabs with a free slot (null at the ends). Meaningful only while the
    /// slab has a free slot: a full slab is in no list.
    next: *mut Slab,
    prev: *mut Slab,
    /// The first freed slot (null: none); each links to the next through its first word.
    free: *mut u8,
    /// Offset of the first slot never handed out (the slab's size: all carved).
    carve: u16,
    /// Slots handed out and not freed. The slab is full iff `used == capacity`.
    used: u16,
    /// `hardened`: which slots are handed out (bit i: slot i), and the class, to tell a double
    /// free, a pointer inside a slot or a slab of another class from a valid free.
    #[cfg(feature = "hardened")]
    live: [u32; 4],
    #[cfg(feature = "hardened")]
    class: usize,
}

/// The header's size, rounded up to 8 so slots are 8-aligned.
const HEADER: usize = size_of::<Slab>().next_multiple_of(8);

/// The slab size of class `c`: the smallest power of two from 512 B up that holds at least 4 slots
/// and whose header and tail (the bytes no slot fills) are at most 1/8 of it.
const fn slab_size_of(c: usize) -> usize {
    let slot = class_size_of(c);
    let mut s = MIN_SLAB;
    while HEADER + TAIL + (s - HEADER - TAIL) % slot > s / 8 || (s - HEADER - TAIL) / slot < 4 {
        s *= 2;
    }
    s
}

/// Slab size of every class: 512 B or 1 KiB (2 KiB for two classes with `hardened` on 64-bit).
pub static SLAB_SIZE: [u16; CLASSES] = {
    let mut t = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        t[c] = slab_size_of(c) as u16;
        c += 1;
    }
    t
};

/// Slots in a slab of each class.
static CAPACITY: [u16; CLASSES] = {
    let mut t = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        let n = (slab_size_of(c) - HEADER - TAIL) / class_size_of(c);
        assert!(n >= 4 && n <= 128);
        t[c] = n as u16;
        c += 1;
    }
    t
};

/// The class of a request, or `None` when it is not small.
#[inline(always)]
pub fn class_of(size: usize, align: usize) -> Option<usize> {
    // Every class is a multiple of 8, so an alignment of at most 8 never changes the class.
    if size <= MAX_SMALL && align <= 8 {
        Some(CLASS_OF[(size + 7) >> 3] as usize)
    } else {
        None
    }
}

/// Slot size of class `c`.
#[inline(always)]
pub fn slot_size(c: usize) -> usize {
    CLASS_SIZE[c] as usize
}

/// The slabs of every small class of one allocator.
pub struct Slabs {
    /// Per class: the first slab with a free slot (null: none).
    heads: [*mut Slab; CLASSES],
    /// Bytes of slabs held (all classes).
    pub slab_bytes: usize,
}

impl Slabs {
    pub const fn new() -> Slabs {
        Slabs {
            heads: [ptr::null_mut(); CLASSES],
            slab_bytes: 0,
        }
    }

    /// A slot of class `c`, or `None` when the class has no free slot and `blocks` no room for a
    /// slab. O(1).
    #[inline]
    pub fn alloc(&mut self, c: usize, blocks: &mut Blocks) -> Option<*mut u8> {
        let mut slab = self.heads[c];
        if slab.is_null() {
            slab = self.new_slab(c, blocks)?;
        }
        let size = slot_size(c);
        // SAFETY: slab heads the class's list: a live slab of class c with a free slot (a freed
        // one on its list, or an uncarved one below its end).
        unsafe {
            let s = &mut *slab;
            let p = if !s.free.is_null() {
                let p = s.free;
                s.free = p.cast::<*mut u8>().read();
                p
            } else {
                let p = slab.cast::<u8>().add(s.carve as usize);
                s.carve += size as u16;
                p
            };
            s.used += 1;
            #[cfg(feature = "hardened")]
            {
                let i = (p as usize - slab as usize - HEADER) / size;
                s.live[i / 32] |= 1 << (i % 32);
            }
            if s.used == CAPACITY[c] {
                // Full: out of the list (it is the head).
                self.heads[c] = s.next;
                if !s.next.is_null() {
                    (*s.next).prev = ptr::null_mut();
                }
            }
            Some(p)
        }
    }

    /// A fresh slab of class `c` from `blocks`, at the head of the class's list.
    #[cold]
    fn new_slab(&mut self, c: usize, blocks: &mut Blocks) -> Option<*mut Slab> {
        let size = SLAB_SIZE[c] as usize;
        let slab = blocks.alloc(size - TAIL, size)?.cast::<Slab>();
        // SAFETY: a new block of `size - TAIL` bytes aligned to `size`: room for the header.
        unsafe {
            slab.write(Slab {
                next: ptr::null_mut(),
                prev: ptr::null_mut(),
                free: ptr::null_mut(),
                carve: HEADER as u16,
                used: 0,
                #[cfg(feature = "hardened")]
                live: [0; 4],
                #[cfg(feature = "hardened")]
                class: c,
            });
        }
        self.heads[c] = slab;
        self.slab_bytes += size;
        Some(slab)
    }

    /// Frees the slot `p` of class `c`. O(1). `Err` (with `hardened` only) when `p` is not a
    /// handed-out slot of class `c`.
    ///
    /// # Safety
    ///
    /// `p` was returned by [`alloc`](Self::alloc) of this allocator for class `c` and is not freed
    /// yet (with `hardened`, violations of this are detected where a slab's header tells).
    #[inline]
    pub unsafe fn free(&mut self, c: usize, p: *mut u8, blocks: &mut Blocks) -> Result<(), Misuse> {
        let size = SLAB_SIZE[c] as usize;
        // The slab is the slot's address rounded down to the slab size; keep p's provenance.
        let slab = p.wrapping_sub(p as usize & (size - 1)).cast::<Slab>();
        // SAFETY: p is a slot of a live slab of class c (caller), whose header is at `slab`.
        unsafe {
            let s = &mut *slab;
            #[cfg(feature = "hardened")]
            {
                let off = p as usize - slab as usize;
                if s.class != c {
                    return Err(Misuse::SizeMismatch);
                }
                if off < HEADER || (off - HEADER) % slot_size(c) != 0 {
                    return Err(Misuse::Foreign);
                }
                let i = (off - HEADER) / slot_size(c);
                if s.live[i / 32] & (1 << (i % 32)) == 0 {
                    return Err(Misuse::DoubleFree);
                }
                s.live[i / 32] &= !(1 << (i % 32));
            }
            if s.used == CAPACITY[c] {
                // Was full: back on the class's list, first.
                let head = self.heads[c];
                s.next = head;
                s.prev = ptr::null_mut();
                if !head.is_null() {
                    (*head).prev = slab;
                }
                self.heads[c] = slab;
            }
            s.used -= 1;
            if s.used == 0 {
                // Empty: off the list and back to the block allocator.
                if s.prev.is_null() {
                    self.heads[c] = s.next;
                } else {
                    (*s.prev).next = s.next;
                }
                if !s.next.is_null() {
                    (*s.next).prev = s.prev;
                }
                self.slab_bytes -= size;
                blocks.free(slab.cast());
                return Ok(());
            }
            p.cast::<*mut u8>().write(s.free);
            s.free = p;
        }
        Ok(())
    }

    /// Slots handed out of class `c`'s slabs on its list, and those slabs (tests: a walk).
    #[cfg(test)]
    pub fn partial_slabs(&self, c: usize) -> usize {
        let mut n = 0;
        let mut s = self.heads[c];
        while !s.is_null() {
            n += 1;
            // SAFETY: list members are live slabs.
            s = unsafe { (*s).next };
        }
        n
    }
}
