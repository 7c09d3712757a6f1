//! Which parts of the address space are ours: one byte per [`CHUNK_SIZE`] granule of the user
//! address space (`os::ADDRESS_BITS`: 47 bits, 48 on AArch64, all 32 on 32-bit targets), naming it
//! one of our chunks, one of our large spans (see `span`), or foreign.
//! A pointer handed to `free` with no size (the C ABI) and a pointer checked by the `hardened`
//! feature are looked up here before anything at their address is read, so a pointer that is not
//! ours never leads to a read of memory that may not be mapped.
//!
//! The map takes 512 MiB of address space (1 GiB with 48-bit addresses, 16 KiB on 32-bit
//! targets), reserved once (`os::map_sparse`) on first use; only the pages that cover our memory
//! are ever touched. Bytes are written with atomics: no lock.

use crate::chunks::chunk::{CHUNK_SHIFT, CHUNK_SIZE};
use crate::os;
use core::ptr;
use core::sync::atomic::{
    AtomicPtr, AtomicU8, AtomicUsize, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
    Ordering::Release,
};

/// Bits of address the map covers: the user address space (`os::ADDRESS_BITS`), less under Miri,
/// whose allocations sit low and which would otherwise allocate the whole map.
const ADDR_BITS: usize = if cfg!(miri) && os::ADDRESS_BITS > 40 {
    40
} else {
    os::ADDRESS_BITS as usize
};
/// Granules in the covered address space, and bytes of the map (512 MiB or 1 GiB of address space
/// on 64-bit targets, 16 KiB on 32-bit ones, where it covers every address).
const GRANULES: usize = 1 << (ADDR_BITS - CHUNK_SHIFT);

/// One byte per granule ([`Kind`] as `u8`), mapped with MAP_NORESERVE on first use; only the pages
/// covering our memory are ever touched (one 4 KiB page of map per GiB of our memory).
static MAP: Map = Map {
    granules: AtomicUsize::new(0),
    bytes: AtomicPtr::new(ptr::null_mut()),
};

/// The map and how many granules it covers (0 until it is mapped, so one compare rejects both an
/// address above the covered space and any address before the map exists).
struct Map {
    granules: AtomicUsize,
    bytes: AtomicPtr<AtomicU8>,
}

/// What a granule of the address space holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Not ours.
    Foreign = 0,
    /// One of our chunks.
    Chunk = 1,
    /// (Part of) one of our large spans.
    Span = 2,
}

/// The map, mapping it on first use; null when the OS refuses the address space.
#[cold]
fn install() -> *mut AtomicU8 {
    let m = os::map_sparse(GRANULES).cast::<AtomicU8>();
    if m.is_null() {
        return m;
    }
    match MAP
        .bytes
        .compare_exchange(ptr::null_mut(), m, AcqRel, Acquire)
    {
        Ok(_) => {
            // Published after the pointer: a reader that sees the count sees the map.
            MAP.granules.store(GRANULES, Release);
            m
        }
        Err(winner) => {
            // SAFETY: m is our own fresh mapping of that size, never published.
            unsafe { os::unmap(m.cast(), GRANULES) };
            winner
        }
    }
}

/// Marks the granules of `[base, base + len)` as holding `kind` (when `on`) or as foreign again
/// (when not). They must be whole, `CHUNK_SIZE`-aligned granules. Returns false (changing nothing)
/// when the range is above the covered address space or the map cannot be mapped.
pub fn set(kind: Kind, base: *mut u8, len: usize, on: bool) -> bool {
    debug_assert!(base as usize % CHUNK_SIZE == 0 && len % CHUNK_SIZE == 0);
    let first = base as usize >> CHUNK_SHIFT;
    let end = first + len / CHUNK_SIZE;
    if end > GRANULES {
        return false;
    }
    let mut map = MAP.bytes.load(Acquire);
    if map.is_null() {
        if !on {
            return true;
        }
        map = install();
        if map.is_null() {
            return false;
        }
    }
    let v = if on { kind as u8 } else { Kind::Foreign as u8 };
    for i in first..end {
        // SAFETY: i < GRANULES: inside the mapping.
        unsafe { (*map.add(i)).store(v, Relaxed) };
    }
    true
}

/// What the granule holding `p` is. The answer is current for memory the caller knows to be live
/// (its byte cannot change under it); for any other pointer it only says what was mapped a moment
/// ago. A shift, a compare and one byte load.
#[inline(always)]
pub fn kind_of(p: *const u8) -> Kind {
    let i = p as usize >> CHUNK_SHIFT;
    if i >= MAP.granules.load(Acquire) {
        return Kind::Foreign;
    }
    let map = MAP.bytes.load(Relaxed);
    // SAFETY: i < granules, which is non-zero only once the map (GRANULES bytes) is published.
    match unsafe { (*map.add(i)).load(Relaxed) } {
        1 => Kind::Chunk,
        2 => Kind::Span,
        _ => Kind::Foreign,
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
        // An address range nobody maps in a test: on 64-bit targets two granules below the top of
        // the covered space; on 32-bit ones, where the map covers every address (the top holds
        // the main thread's stack), the first granule, at address 0 (no chunk or span can start
        // there, and the granule after it is left alone: under qemu-user the guest's mappings
        // may lie that low).
        let (base, n) = if cfg!(target_pointer_width = "64") {
            ((GRANULES - 4) * CHUNK_SIZE, 2)
        } else {
            (0, 1)
        };
        let base = core::ptr::without_provenance_mut::<u8>(base);
        assert_eq!(kind_of(base), Kind::Foreign);
        assert!(set(Kind::Span, base, n * CHUNK_SIZE, true));
        assert_eq!(kind_of(base), Kind::Span);
        assert_eq!(kind_of(base.wrapping_add(n * CHUNK_SIZE - 1)), Kind::Span);
        if n == 2 {
            assert_eq!(kind_of(base.wrapping_add(n * CHUNK_SIZE)), Kind::Foreign);
        }
        assert!(!is_chunk(base));
        assert!(set(Kind::Span, base, n * CHUNK_SIZE, false));
        assert_eq!(kind_of(base), Kind::Foreign);
        // A range that runs past the covered space is refused, changing nothing.
        let last = core::ptr::without_provenance_mut::<u8>((GRANULES - 1) * CHUNK_SIZE);
        let before = kind_of(last);
        assert!(!set(Kind::Chunk, last, 2 * CHUNK_SIZE, true));
        assert_eq!(kind_of(last), before);
        // Above the covered space (there is none on 32-bit targets).
        #[cfg(target_pointer_width = "64")]
        {
            let above = core::ptr::without_provenance_mut::<u8>(GRANULES * CHUNK_SIZE);
            assert!(!set(Kind::Chunk, above, CHUNK_SIZE, true));
            assert_eq!(kind_of(core::ptr::without_provenance(usize::MAX)), Kind::Foreign);
        }
    }
}
