//! Which parts of the address space are ours: one bit per [`CHUNK_SIZE`] granule of a 47-bit address
//! space for our chunks, and one for our large spans (see `span`). A pointer handed to `free` with
//! no size (the C ABI) and a pointer checked by the `hardened` feature are looked up here before
//! anything at their address is read, so a pointer that is not ours never leads to a read of memory
//! that may not be mapped.
//!
//! The map has two levels: a static table of 4096 leaves, each leaf (32 KiB, mapped on first use,
//! never unmapped) covering 32 GiB of address space. Bits are set and cleared with atomics: no lock.

use crate::chunk::{CHUNK_SHIFT, CHUNK_SIZE};
use crate::os;
use core::ptr;
use core::sync::atomic::{
    AtomicPtr, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
};

const ADDR_BITS: usize = 47;
/// Granules covered by one leaf of the map (32 GiB of address space).
const LEAF_SHIFT: usize = 17;
/// Words of one bitmap of a leaf.
const LEAF_WORDS: usize = 1 << (LEAF_SHIFT - 6);
/// Leaves in the top level.
const LEAVES: usize = 1 << (ADDR_BITS - CHUNK_SHIFT - LEAF_SHIFT);

/// A leaf: the chunk bitmap, then the span bitmap, of 2^LEAF_SHIFT granules (32 KiB, mapped on
/// first use and never unmapped).
type Leaf = [AtomicU64; 2 * LEAF_WORDS];

/// The top level: 4096 leaf pointers (32 KiB of static memory).
static TOP: [AtomicPtr<Leaf>; LEAVES] = [const { AtomicPtr::new(ptr::null_mut()) }; LEAVES];

/// What a granule of the address space holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Not ours.
    Foreign,
    /// One of our chunks.
    Chunk,
    /// (Part of) one of our large spans.
    Span,
}

/// The leaf of granule index `i` (< 2^(47 - CHUNK_SHIFT)), mapping it on first use; null when the
/// OS refuses the memory.
#[cold]
fn leaf_or_install(i: usize) -> *mut Leaf {
    let slot = &TOP[i >> LEAF_SHIFT];
    let l = slot.load(Acquire);
    if !l.is_null() {
        return l;
    }
    let m = os::map(core::mem::size_of::<Leaf>()).cast::<Leaf>();
    if m.is_null() {
        return m;
    }
    match slot.compare_exchange(ptr::null_mut(), m, AcqRel, Acquire) {
        Ok(_) => m,
        Err(winner) => {
            // SAFETY: m is our own fresh mapping of that size, never published.
            unsafe { os::unmap(m.cast(), core::mem::size_of::<Leaf>()) };
            winner
        }
    }
}

/// Sets (`on`) or clears the bits of `kind` for the granules of `[base, base + len)`, which must be
/// whole, `CHUNK_SIZE`-aligned granules. Returns false when the range is above the 47-bit address
/// space or a leaf of the map cannot be mapped (bits set before the failure stay set).
pub fn set(kind: Kind, base: *mut u8, len: usize, on: bool) -> bool {
    debug_assert!(base as usize % CHUNK_SIZE == 0 && len % CHUNK_SIZE == 0);
    let first = base as usize >> CHUNK_SHIFT;
    let end = first + len / CHUNK_SIZE;
    if end > LEAVES << LEAF_SHIFT {
        return false;
    }
    let offset = match kind {
        Kind::Chunk => 0,
        Kind::Span => LEAF_WORDS,
        Kind::Foreign => return true,
    };
    for i in first..end {
        let leaf = if on {
            leaf_or_install(i)
        } else {
            TOP[i >> LEAF_SHIFT].load(Acquire)
        };
        if leaf.is_null() {
            if on {
                return false;
            }
            continue;
        }
        let j = i & ((1 << LEAF_SHIFT) - 1);
        // SAFETY: leaf is a live, never-unmapped leaf; offset + j / 64 < 2 * LEAF_WORDS.
        let w = unsafe { &(*leaf)[offset + (j >> 6)] };
        if on {
            w.fetch_or(1 << (j & 63), Relaxed);
        } else {
            w.fetch_and(!(1 << (j & 63)), Relaxed);
        }
    }
    true
}

/// The word and bit of `p`'s granule in the chunk bitmap of its leaf; None when no leaf covers it.
#[inline(always)]
fn locate(p: *const u8) -> Option<(*mut Leaf, usize, u64)> {
    let i = p as usize >> CHUNK_SHIFT;
    let top = TOP.get(i >> LEAF_SHIFT)?;
    let leaf = top.load(Acquire);
    if leaf.is_null() {
        return None;
    }
    let j = i & ((1 << LEAF_SHIFT) - 1);
    Some((leaf, j >> 6, 1u64 << (j & 63)))
}

/// What the granule holding `p` is. The answer is current for memory the caller knows to be live
/// (its bit cannot change under it); for any other pointer it only says what was mapped a moment ago.
#[inline]
pub fn kind_of(p: *const u8) -> Kind {
    let Some((leaf, w, bit)) = locate(p) else {
        return Kind::Foreign;
    };
    // SAFETY: leaf is live; w < LEAF_WORDS, so both words are in it.
    unsafe {
        if (*leaf)[w].load(Relaxed) & bit != 0 {
            Kind::Chunk
        } else if (*leaf)[LEAF_WORDS + w].load(Relaxed) & bit != 0 {
            Kind::Span
        } else {
            Kind::Foreign
        }
    }
}

/// True when `p` lies in one of our chunks.
#[cfg_attr(not(feature = "hardened"), allow(dead_code))]
#[inline]
pub fn is_chunk(p: *const u8) -> bool {
    match locate(p) {
        // SAFETY: leaf is live; w < LEAF_WORDS.
        Some((leaf, w, bit)) => unsafe { (*leaf)[w].load(Relaxed) & bit != 0 },
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_clear_granules() {
        // An address range nobody maps in a test: the top of the 47-bit space.
        let base = ((1usize << 47) - 4 * CHUNK_SIZE) as *mut u8;
        assert_eq!(kind_of(base), Kind::Foreign);
        assert!(set(Kind::Span, base, 2 * CHUNK_SIZE, true));
        assert_eq!(kind_of(base), Kind::Span);
        assert_eq!(kind_of(base.wrapping_add(2 * CHUNK_SIZE - 1)), Kind::Span);
        assert_eq!(kind_of(base.wrapping_add(2 * CHUNK_SIZE)), Kind::Foreign);
        assert!(!is_chunk(base));
        assert!(set(Kind::Span, base, 2 * CHUNK_SIZE, false));
        assert_eq!(kind_of(base), Kind::Foreign);
        assert!(!set(
            Kind::Chunk,
            (1usize << 47) as *mut u8,
            CHUNK_SIZE,
            true
        ));
        assert_eq!(kind_of(usize::MAX as *const u8), Kind::Foreign);
    }
}
