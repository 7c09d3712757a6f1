//! The profiler's records, in memory it maps itself (never through the allocator):
//!
//! - one **record** per live sampled block, by address (an [`BlockTable`]): its size, its weight
//!   (how many blocks of its size it stands for) and its stack; removed when the block is freed;
//! - one **stack** entry per distinct call stack seen, with the cumulative allocations sampled
//!   there (never removed, so the cumulative profile survives the blocks);
//! - the **filter**: per hash bucket of addresses, how many records it holds. A free reads one
//!   counter of it and looks the block up only when that counter is not zero, so an ordinary free
//!   pays a load and a branch.
//!
//! All of it sits under one lock, a leaf: nothing else is locked, allocated or freed while it is
//! held (the stack is walked before it is taken). `fork` takes it last (`fork.rs`).

use crate::base::block_table::BlockTable;
use crate::base::lock::{Lock, Rank};
use crate::os;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// Frames kept per stack (the innermost ones).
pub const MAX_FRAMES: usize = 48;
/// log2 of the stack table's entries (at most 3/4 used).
const STACK_BITS: u32 = 15;
/// log2 of the filter's buckets.
const FILTER_BITS: u32 = 15;

/// A live sampled block, as a snapshot lists it.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub size: usize,
    /// Blocks of this size this one stands for (1 / the probability it was sampled).
    pub weight: f64,
    /// Its entry in the stack table.
    pub stack: u32,
}

/// What the record table keeps of a live sampled block, by its address.
#[derive(Clone, Copy)]
struct Sampled {
    size: usize,
    weight: f64,
    stack: u32,
}

/// A distinct stack. `depth == 0`: an empty entry.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Stack {
    pub hash: u64,
    pub depth: u32,
    /// Estimated blocks and bytes allocated here since the profiler started (sums of weights).
    pub alloc_objects: f64,
    pub alloc_bytes: f64,
    /// Return addresses, innermost first; `frames[..depth]`.
    pub frames: [usize; MAX_FRAMES],
}

struct Tables {
    /// The live sampled blocks.
    records: BlockTable<Sampled>,
    /// `1 << STACK_BITS` stacks, mapped at the first sample.
    stacks: *mut Stack,
    stack_count: usize,
    /// Samples not recorded because a table was full or could not be mapped.
    dropped: usize,
    /// The estimated live bytes: the sum of `weight * size` over the live records.
    live_bytes: f64,
}

// SAFETY: the pointer names memory mapped for the stack table, used only under the lock.
unsafe impl Send for Tables {}

static TABLES: Lock<Tables> = Lock::new(
    Rank::Profiler,
    Tables {
        records: BlockTable::new(),
        stacks: ptr::null_mut(),
        stack_count: 0,
        dropped: 0,
        live_bytes: 0.0,
    },
);

/// Set at the first record and never cleared: until then a free does not even read the filter.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Records per address bucket (written under the lock; read by every free while armed).
static FILTER: [AtomicU32; 1 << FILTER_BITS] = [const { AtomicU32::new(0) }; 1 << FILTER_BITS];

#[inline(always)]
fn hash_addr(addr: usize, bits: u32) -> usize {
    ((addr as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Whether the profiler ever recorded a block: until then a free need not look (one load).
#[inline(always)]
pub fn armed() -> bool {
    ARMED.load(Relaxed)
}

/// A block at `p` is being freed: drops its record if it has one. Reads one filter counter and
/// returns, unless `p` may be a sampled block.
#[inline(always)]
pub fn forget(p: *mut u8) {
    if armed() && FILTER[hash_addr(p as usize, FILTER_BITS)].load(Relaxed) != 0 {
        remove(p as usize);
    }
}

fn stack_hash(frames: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &f in frames {
        h = (h ^ f as u64).wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    }
    h | 1
}

impl Tables {
    /// Maps the stack table on first use; false when the OS refuses.
    fn ready(&mut self) -> bool {
        if self.stacks.is_null() {
            let s = os::map_sparse(size_of::<Stack>() << STACK_BITS);
            if s.is_null() {
                return false;
            }
            // Zeroed memory is a table of empty entries (depth 0).
            self.stacks = s.cast();
        }
        true
    }

    /// The entry of `frames` in the stack table (found or added), or None when it is full.
    fn stack_entry(&mut self, frames: &[usize]) -> Option<u32> {
        let h = stack_hash(frames);
        let mask = (1usize << STACK_BITS) - 1;
        let mut i = (h as usize) & mask;
        loop {
            // SAFETY: i <= mask, inside the mapped stack table, which we hold under the lock.
            let s = unsafe { &mut *self.stacks.add(i) };
            if s.depth == 0 {
                if self.stack_count >= (mask + 1) / 4 * 3 {
                    return None;
                }
                s.hash = h;
                s.depth = frames.len() as u32;
                s.frames[..frames.len()].copy_from_slice(frames);
                self.stack_count += 1;
                return Some(i as u32);
            }
            if s.hash == h && &s.frames[..s.depth as usize] == frames {
                return Some(i as u32);
            }
            i = (i + 1) & mask;
        }
    }
}

/// Records the sampled block `addr` of `size` bytes standing for `weight` blocks, allocated from
/// `frames` (innermost first, not empty). Allocates nothing.
pub fn insert(addr: usize, size: usize, weight: f64, frames: &[usize]) {
    debug_assert!(addr != 0 && !frames.is_empty() && frames.len() <= MAX_FRAMES);
    let mut t = TABLES.lock();
    if !t.ready() {
        t.dropped += 1;
        return;
    }
    let Some(stack) = t.stack_entry(frames) else {
        t.dropped += 1;
        return;
    };
    // SAFETY: stack is an entry of the mapped stack table, under the lock.
    unsafe {
        let s = &mut *t.stacks.add(stack as usize);
        s.alloc_objects += weight;
        s.alloc_bytes += weight * size as f64;
    }
    match t.records.insert(
        addr,
        Sampled {
            size,
            weight,
            stack,
        },
    ) {
        Err(_) => t.dropped += 1,
        // A block freed while the profiler was off, its address reused: the new record stands.
        Ok(Some(old)) => t.live_bytes += weight * size as f64 - old.weight * old.size as f64,
        Ok(None) => {
            t.live_bytes += weight * size as f64;
            FILTER[hash_addr(addr, FILTER_BITS)].fetch_add(1, Relaxed);
            ARMED.store(true, Relaxed);
        }
    }
}

/// Drops the record of block `addr`, if it has one (it is being freed). Allocates nothing.
#[cold]
#[inline(never)]
pub fn remove(addr: usize) {
    // None: a false positive of the filter.
    let mut t = TABLES.lock();
    if let Some(r) = t.records.remove(addr) {
        t.live_bytes -= r.weight * r.size as f64;
        FILTER[hash_addr(addr, FILTER_BITS)].fetch_sub(1, Relaxed);
    }
}

/// The estimated live bytes of the sampled blocks' stacks (what a dump's `inuse_space` totals).
pub fn live_bytes() -> f64 {
    TABLES.lock().live_bytes.max(0.0)
}

/// A copy of the tables for a dump: the live records, the stacks (by entry), samples dropped.
pub struct Snapshot {
    pub records: Vec<Record>,
    pub stacks: Vec<(u32, Stack)>,
    pub dropped: usize,
}

/// Copies the tables. Allocates, but never while holding the lock (a free by this thread of a
/// sampled block would need it): room is made first, then filled under the lock.
pub fn snapshot() -> Snapshot {
    let (live, stacks) = {
        let t = TABLES.lock();
        (t.records.len(), t.stack_count)
    };
    let mut out = Snapshot {
        records: Vec::with_capacity(live + 1024),
        stacks: Vec::with_capacity(stacks + 256),
        dropped: 0,
    };
    let t = TABLES.lock();
    out.dropped = t.dropped;
    t.records.for_each(|_, r| {
        if out.records.len() < out.records.capacity() {
            out.records.push(Record {
                size: r.size,
                weight: r.weight,
                stack: r.stack,
            });
        }
    });
    if t.stacks.is_null() {
        return out;
    }
    for i in 0..1usize << STACK_BITS {
        // SAFETY: i is inside the mapped stack table, under the lock.
        let s = unsafe { &*t.stacks.add(i) };
        if s.depth != 0 && out.stacks.len() < out.stacks.capacity() {
            out.stacks.push((i as u32, *s));
        }
    }
    out
}

/// Takes the lock for `fork` (last in the lock order: it is a leaf).
pub fn lock_for_fork() {
    core::mem::forget(TABLES.lock());
}

/// Releases the lock taken by [`lock_for_fork`].
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub unsafe fn unlock_after_fork() {
    // SAFETY: lock_for_fork took it in this thread and forgot the guard.
    unsafe { TABLES.force_unlock() };
}
