//! `Region`: memory the user hands to a [`RegionAlloc`](super::RegionAlloc), described by its
//! address and length. Nothing is read or written until the allocator lays it out, inside its lock,
//! on first use (so a `static` allocator over a `static` array needs no init call).

/// A range of memory for a [`RegionAlloc`](super::RegionAlloc) to serve blocks from.
///
/// Building one is free: it only records the address and the length. The allocator lays its blocks
/// out in it the first time it needs memory, inside its lock. Any alignment and length are taken;
/// the ends are trimmed to the allocator's granule (two words), and a region too small to hold one
/// block (under 6 words) adds nothing. A region above 1 GiB is used up to 1 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub(super) base: *mut u8,
    pub(super) len: usize,
}

// SAFETY: a Region is an address and a length; the memory it names is handed to one allocator,
// which touches it only under its lock (the `unsafe` constructors make the caller promise that no
// one else does).
unsafe impl Send for Region {}
// SAFETY: as above; sharing a Region only shares the two numbers.
unsafe impl Sync for Region {}

impl Region {
    /// The memory of a static array, typically in `.bss`:
    ///
    /// ```
    /// use poolalloc::region::{Region, RegionAlloc};
    /// static mut ARENA: [u8; 16 * 1024] = [0; 16 * 1024];
    /// static A: RegionAlloc = RegionAlloc::new(unsafe { Region::array(&raw mut ARENA) });
    /// ```
    ///
    /// # Safety
    ///
    /// `array` is valid for reads and writes for as long as the allocator it is given to is used,
    /// and nothing else reads or writes it meanwhile (the allocator owns it from now on).
    pub const unsafe fn array<const N: usize>(array: *mut [u8; N]) -> Region {
        Region {
            base: array.cast(),
            len: N,
        }
    }

    /// The `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base..base + len` is valid for reads and writes for as long as the allocator it is given
    /// to is used, nothing else reads or writes it meanwhile, and it does not overlap a region
    /// already given to any allocator.
    pub const unsafe fn from_raw(base: *mut u8, len: usize) -> Region {
        Region { base, len }
    }

    /// A `'static` slice, owned by the allocator from now on (no `unsafe` needed: the exclusive
    /// borrow forever is the promise).
    pub const fn from_static(memory: &'static mut [u8]) -> Region {
        Region {
            base: memory.as_mut_ptr(),
            len: memory.len(),
        }
    }

    /// The region's first byte.
    pub const fn base(&self) -> *mut u8 {
        self.base
    }

    /// The region's length in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True for a region of no bytes.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}
