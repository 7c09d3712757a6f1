//! Statistics: a snapshot of what the pools hold, gathered without allocating, and `trim`.

use crate::chunk::CHUNK_SIZE;
use crate::pool::{self, POOLS};
use crate::size_class::NUM_CLASSES;
use crate::{large, os, thread_cache};
use core::fmt;

/// Counters of one size class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Bytes per slot.
    pub slot_size: usize,
    /// Chunks the class's pool holds (in use or retained empty).
    pub chunks: usize,
    /// Slots handed out of the pool: live blocks plus slots parked in thread caches.
    pub live_slots: usize,
    /// Slots of the class's chunks not handed out.
    pub free_slots: usize,
    /// Address space held in the class's chunks (`chunks × CHUNK_SIZE`).
    pub reserved_bytes: usize,
    /// Empty chunks kept for reuse.
    pub retained_chunks: usize,
}

/// A snapshot of the allocator's state. Counters are read class by class, so a snapshot taken while
/// other threads allocate is consistent per class, not across classes.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Per size class, smallest first.
    pub classes: [ClassStats; NUM_CLASSES],
    /// Chunks currently held by the pools (in use or retained empty).
    pub chunks: usize,
    /// Bytes of address space the pools hold in chunks.
    pub reserved_bytes: usize,
    /// Large blocks (served by the system allocator) currently live.
    pub large_blocks: usize,
    /// Bytes requested by the live large blocks.
    pub large_bytes: usize,
    /// Resident set size of the process, where the OS reports it.
    pub rss_bytes: Option<usize>,
}

/// Takes a snapshot of the allocator's counters. Allocates nothing.
pub fn stats() -> Stats {
    let mut classes = [ClassStats::default(); NUM_CLASSES];
    let mut chunks = 0;
    for (c, cs) in classes.iter_mut().enumerate() {
        let (n, used, retained) = POOLS[c].counts();
        let (size, cap) = pool::geometry(c);
        *cs = ClassStats {
            slot_size: size,
            chunks: n,
            live_slots: used,
            free_slots: n * cap - used,
            reserved_bytes: n * CHUNK_SIZE,
            retained_chunks: retained,
        };
        chunks += n;
    }
    let (large_blocks, large_bytes) = large::counts();
    Stats {
        classes,
        chunks,
        reserved_bytes: chunks * CHUNK_SIZE,
        large_blocks,
        large_bytes,
        rss_bytes: os::rss_bytes(),
    }
}

/// Returns to the OS everything that can go now: the calling thread's cached slots go back to their
/// pools, and every empty chunk is released. Other threads' caches are untouched.
pub fn trim() {
    thread_cache::flush_current_thread();
    for p in POOLS.iter() {
        p.trim();
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>8} {:>7} {:>12} {:>12} {:>12} {:>9}",
            "slot", "chunks", "live slots", "free slots", "reserved", "retained"
        )?;
        for c in self.classes.iter().filter(|c| c.chunks > 0) {
            writeln!(
                f,
                "{:>8} {:>7} {:>12} {:>12} {:>12} {:>9}",
                c.slot_size,
                c.chunks,
                c.live_slots,
                c.free_slots,
                c.reserved_bytes,
                c.retained_chunks
            )?;
        }
        writeln!(
            f,
            "total: {} chunks, {} bytes reserved; large: {} blocks, {} bytes",
            self.chunks, self.reserved_bytes, self.large_blocks, self.large_bytes
        )?;
        match self.rss_bytes {
            Some(r) => writeln!(f, "rss: {r} bytes"),
            None => writeln!(f, "rss: not reported"),
        }
    }
}
