//! Which parts of the address space are ours: one bit per [`CHUNK_SIZE`] granule of a 47-bit address
//! space for our chunks, and one for our large spans (see `span`). A pointer handed to `free` with
//! no size (the C ABI) and a pointer checked by the `hardened` feature are looked up here before
//! anything at their address is read, so a pointer that is not ours never leads to a read of memory
//! that may not be mapped.
//!
//! The two bitmaps take 128 MiB of address space, reserved once (MAP_NORESERVE) on first use; only
//! the pages that cover our memory are ever touched. Bits are set and cleared with atomics: no lock.
//! A lookup is a shift, one load and a bit test.

use crate::chunk::{CHUNK_SHIFT, CHUNK_SIZE};
use crate::os;
use core::ptr;
use core::sync::atomic::{
    AtomicPtr, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
};

const ADDR_BITS: usize = 47;
/// Granules in the 47-bit address space.
const GRANULES: usize = 1 << (ADDR_BITS - CHUNK_SHIFT);
/// Words of one bitmap.
const MAP_WORDS: usize = GRANULES / 64;

/// The chunk bitmap, then the span bitmap: `2 * MAP_WORDS` words (128 MiB of address space,
/// mapped with MAP_NORESERVE on first use; only the pages covering our memory are touched).
static MAP: AtomicPtr<AtomicU64> = AtomicPtr::new(ptr::null_mut());

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

/// The map, mapping it on first use; null when the OS refuses the address space.
#[cold]
fn install() -> *mut AtomicU64 {
    let size = 2 * MAP_WORDS * 8;
    let m = os::reserve(size).cast::<AtomicU64>();
    if m.is_null() {
        return m;
    }
    match MAP.compare_exchange(ptr::null_mut(), m, AcqRel, Acquire) {
        Ok(_) => m,
        Err(winner) => {
            // SAFETY: m is our own fresh mapping of that size, never published.
            unsafe { os::unmap(m.cast(), size) };
            winner
        }
    }
}

/// Sets (`on`) or clears the bits of `kind` for the granules of `[base, base + len)`, which must be
/// whole, `CHUNK_SIZE`-aligned granules. Returns false (changing nothing) when the range is above
/// the 47-bit address space or the map cannot be mapped.
pub fn set(kind: Kind, base: *mut u8, len: usize, on: bool) -> bool {
    debug_assert!(base as usize % CHUNK_SIZE == 0 && len % CHUNK_SIZE == 0);
    let first = base as usize >> CHUNK_SHIFT;
    let end = first + len / CHUNK_SIZE;
    if end > GRANULES {
        return false;
    }
    let mut map = MAP.load(Acquire);
    if map.is_null() {
        if !on {
            return true;
        }
        map = install();
        if map.is_null() {
            return false;
        }
    }
    let offset = match kind {
        Kind::Chunk => 0,
        Kind::Span => MAP_WORDS,
        Kind::Foreign => return true,
    };
    for i in first..end {
        // SAFETY: i < GRANULES, so offset + i / 64 < 2 * MAP_WORDS: inside the mapping.
        let w = unsafe { &*map.add(offset + (i >> 6)) };
        if on {
            w.fetch_or(1 << (i & 63), Relaxed);
        } else {
            w.fetch_and(!(1 << (i & 63)), Relaxed);
        }
    }
    true
}

/// What the granule holding `p` is. The answer is current for memory the caller knows to be live
/// (its bit cannot change under it); for any other pointer it only says what was mapped a moment ago.
#[inline(always)]
pub fn kind_of(p: *const u8) -> Kind {
    let i = p as usize >> CHUNK_SHIFT;
    let map = MAP.load(Acquire);
    if i >= GRANULES || map.is_null() {
        return Kind::Foreign;
    }
    // SAFETY: i < GRANULES: both words are inside the mapping.
    unsafe {
        if (*map.add(i >> 6)).load(Relaxed) & (1 << (i & 63)) != 0 {
            Kind::Chunk
        } else if (*map.add(MAP_WORDS + (i >> 6))).load(Relaxed) & (1 << (i & 63)) != 0 {
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
    kind_of(p) == Kind::Chunk
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
