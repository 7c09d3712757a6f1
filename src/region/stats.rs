//! `RegionStats`: what a [`RegionAlloc`](super::RegionAlloc) holds, exact at the moment it is
//! taken (counted under the lock on every call, gathered by one lock).

/// A snapshot of a [`RegionAlloc`](super::RegionAlloc)'s memory, from
/// [`RegionAlloc::stats`](super::RegionAlloc::stats). All sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Regions laid out (the initial one once used, and each [`add_region`]).
    ///
    /// [`add_region`]: super::RegionAlloc::add_region
    pub regions: usize,
    /// Bytes of all regions the allocator manages (after trimming their ends to the granule).
    pub region_bytes: usize,
    /// Live blocks: allocated and not freed.
    pub live_blocks: usize,
    /// The sizes of the live blocks' layouts, summed (what the program asked for).
    pub requested: usize,
    /// The most `requested` has been.
    pub peak_requested: usize,
    /// Bytes the live blocks take: slot sizes of small blocks, whole blocks (with their header
    /// word) of large ones. `allocated - requested` is the rounding waste.
    pub allocated: usize,
    /// Bytes of slabs held by the small classes (their live slots are in `allocated`; the rest is
    /// free slots, headers and tails).
    pub slab_bytes: usize,
    /// Bytes in free blocks, available to any request.
    pub free: usize,
    /// The largest payload one free block can give (a larger request fails until memory is
    /// freed or added).
    pub largest_free: usize,
    /// Allocations that failed (returned null).
    pub failed: usize,
}
