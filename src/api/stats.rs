//! Statistics: a snapshot of what the pools hold, gathered without allocating, and `trim`.

use crate::base::settings;
use crate::base::size_class::{self, NUM_CLASSES};
use crate::base::stack_text::StackText;
#[cfg(poolalloc_pools)]
use crate::chunks::chunk::{self, CHUNK_SIZE};
use crate::os::{self, Backend};
#[cfg(poolalloc_pools)]
use crate::{
    memory::purge,
    memory::{chunk_lists, source},
    thread::heap,
};
use core::fmt;

/// Counters of one size class. Slots of a class's chunks are either `live` (held by the program),
/// `cached` (freed by a thread other than the chunk's owner, in that thread's batch or on the
/// chunk's remote-free list, for the owner to collect) or `free` (on their chunk's free lists, or
/// never used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// Bytes per slot.
    pub slot_size: usize,
    /// Chunks of the class: owned by threads, abandoned by exited threads, or retained empty.
    pub chunks: usize,
    /// Slots holding live blocks.
    pub live_slots: usize,
    /// Cached slots: freed by other threads, waiting in batches or on remote-free lists for their
    /// chunk's owner to collect them.
    pub cached_slots: usize,
    /// Free slots in their chunks (including never-used ones).
    pub free_slots: usize,
    /// Address space held in the class's chunks (`chunks × CHUNK_SIZE`).
    pub reserved_bytes: usize,
    /// Sum of `Layout::size()` of the live blocks: `live_slots × slot_size - requested_bytes` is the
    /// exact internal waste.
    pub requested_bytes: usize,
    /// Retained empty chunks: the class's empty chunks the chunk source holds (the first
    /// [`retained_chunks`](crate::retained_chunks) kept, the others waiting for the purge delay).
    pub retained_chunks: usize,
    /// Chunks whose owning thread exited while they held live blocks, not yet adopted.
    pub abandoned_chunks: usize,
    /// Slots of the class handed to threads' fast paths since start (cumulative; see
    /// [`Stats::allocations`] for what it counts exactly).
    pub allocations: usize,
}

impl ClassStats {
    /// Bytes of the live slots.
    pub fn live_bytes(&self) -> usize {
        self.live_slots * self.slot_size
    }
}

impl Stats {
    /// Per size class, smallest first: entry `i` is the class of slot size `class_sizes()[i]`.
    pub fn classes(&self) -> &[ClassStats] {
        &self.classes
    }

    /// The share of the chunk memory (`reserved_bytes`) in huge pages (`huge_page_bytes`), 0 to 1
    /// (a unit counts whole though some of its chunks may be free: the share is capped at 1).
    pub fn huge_page_share(&self) -> f64 {
        if self.reserved_bytes == 0 {
            0.0
        } else {
            (self.huge_page_bytes as f64 / self.reserved_bytes as f64).min(1.0)
        }
    }

    /// Live blocks, small (live slots of every class) and large.
    pub fn live_blocks(&self) -> usize {
        self.classes.iter().map(|c| c.live_slots).sum::<usize>() + self.large_blocks
    }
}

/// A snapshot of the allocator's state. Counters are read class by class and thread by thread, so
/// a snapshot taken while other threads allocate is approximate; one taken while they are quiet is
/// exact.
///
/// Live counts are summed at snapshot time from the chunks' own counts (the fast paths keep no
/// other counter); cumulative counts are kept where the slow paths pass. A snapshot allocates
/// nothing; [`Stats::json`] and [`Stats::prometheus`] render it for machines.
///
/// Every count is a `usize`: on a 32-bit target the cumulative ones (`allocations`, `frees`,
/// `allocated_bytes`, `chunks_mapped`, `chunks_purged`) wrap past 2^32, which a monitor reads as
/// a counter reset.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Stats {
    /// Per size class, smallest first: see [`Stats::classes`].
    pub(crate) classes: [ClassStats; NUM_CLASSES],
    /// Chunks currently held by the pools (in use or retained empty).
    pub chunks: usize,
    /// Bytes of address space the pools hold in chunks.
    pub reserved_bytes: usize,
    /// Bytes of slots holding live small blocks.
    pub live_bytes: usize,
    /// Bytes requested by live small blocks (sum of their `Layout::size()`); only those of sized
    /// allocations when [`requested_known`](Stats::requested_known) is false.
    pub requested_bytes: usize,
    /// Whether `requested_bytes` (and so waste and utilisation) is known: false once a small block
    /// came from the size-less interface (the C library's `malloc`, whose `free` carries no size):
    /// its requested size is not kept, so the table prints `n/a` and the JSON `null` for it.
    pub requested_known: bool,
    /// Bytes of the cached slots (see [`ClassStats::cached_slots`]).
    pub cached_bytes: usize,
    /// Large blocks currently live (spans or the system allocator's, as
    /// [`LargeBlocks`](crate::LargeBlocks) says where each came from).
    pub large_blocks: usize,
    /// Bytes requested by the live large blocks.
    pub large_bytes: usize,
    /// Resident set size of the process, where the OS reports it.
    pub rss_bytes: Option<usize>,
    /// Blocks allocated since start (cumulative, never decreasing). Large blocks are counted
    /// exactly, as they are allocated (a `realloc` that moves or resizes one counts one more).
    /// Small blocks are counted, at no cost to the fast path, when the slow path supplies free
    /// slots to a thread's fast path (puts them on its current chunk's free list, which the fast
    /// path pops): a slot is counted when supplied, before the program takes it. So the
    /// figure is never below the exact count, and above it by the slots waiting on the threads'
    /// current free lists at the snapshot (plus those a thread still had there when it exited,
    /// which the thread that adopts the chunk counts again).
    pub allocations: usize,
    /// Blocks freed since start: `allocations` minus the blocks live now (small and large), with
    /// the same approximation as `allocations`, and never less than in an earlier snapshot (a
    /// counter must not step back; `allocations` minus live blocks does when a thread takes slots
    /// already counted as supplied). So `allocations - frees` is at least the live blocks, and
    /// equal to them unless such a step was held back.
    pub frees: usize,
    /// Bytes allocated since start: slot bytes of the small allocations counted in
    /// `allocations` (slot sizes, not requested sizes), plus the requested bytes of large blocks.
    pub allocated_bytes: usize,
    /// The most bytes held in chunks at once since start (`chunks × CHUNK_SIZE` at its peak,
    /// exact: kept as chunks are taken from the regions or given back): an upper bound of the peak of
    /// small live bytes, at chunk granularity.
    pub peak_reserved_bytes: usize,
    /// Chunks mapped from the OS since start (regions of 16 at a time where they can be).
    pub chunks_mapped: usize,
    /// Chunks purged since start (their pages given back to the OS; kept mapped for reuse or
    /// unmapped).
    pub chunks_purged: usize,
    /// Chunk memory in transparent huge pages, by the chunk source's own count (read without a
    /// system call): the 2 MiB units of chunks advised `MADV_HUGEPAGE` (see
    /// [`HugePages`](crate::HugePages)) of which some chunk was handed out since the unit was last
    /// purged whole, and no chunk purged alone since (that splits the huge page). What it cannot
    /// see: a huge page the kernel could not supply at the first touch (it then backs the unit with
    /// small pages; `AnonHugePages` in `/proc/self/smaps` has the kernel's figure). Zero where huge
    /// pages are off or unavailable. [`Stats::huge_page_share`] relates it to the chunk memory.
    pub huge_page_bytes: usize,
    /// Which allocator serves `PoolAlloc`: the pools, or (on a platform without a port) `System`,
    /// in which case every other counter is zero.
    pub backend: Backend,
}

/// Set once a small block came from the size-less interface (`raw`): requested sizes are unknown.
static UNSIZED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// A small block without a requested size was handed out (`raw`): a load, and a store the first
/// time.
#[inline(always)]
#[cfg_attr(not(feature = "raw"), allow(dead_code))]
pub(crate) fn note_unsized() {
    use core::sync::atomic::Ordering::Relaxed;
    if !UNSIZED.load(Relaxed) {
        UNSIZED.store(true, Relaxed);
    }
}

/// Takes a snapshot of the allocator's counters. Allocates nothing.
pub fn stats() -> Stats {
    let mut s = Stats {
        classes: [ClassStats::default(); NUM_CLASSES],
        chunks: 0,
        reserved_bytes: 0,
        live_bytes: 0,
        requested_bytes: 0,
        requested_known: !UNSIZED.load(core::sync::atomic::Ordering::Relaxed),
        cached_bytes: 0,
        large_blocks: 0,
        large_bytes: 0,
        rss_bytes: None,
        allocations: 0,
        frees: 0,
        allocated_bytes: 0,
        peak_reserved_bytes: 0,
        chunks_mapped: 0,
        chunks_purged: 0,
        huge_page_bytes: 0,
        backend: os::BACKEND,
    };
    for (c, cs) in s.classes.iter_mut().enumerate() {
        cs.slot_size = size_class::CLASS_SIZE[c];
    }
    #[cfg(poolalloc_pools)]
    gather(&mut s);
    s.rss_bytes = os::rss_bytes();
    s
}

/// Fills in the pools' counters.
#[cfg(poolalloc_pools)]
fn gather(s: &mut Stats) {
    let threads = heap::class_totals();
    // A snapshot racing with other threads can see a transiently "negative" sum: clamp it.
    let clamp = |x: usize| if x > isize::MAX as usize { 0 } else { x };
    let mut live_blocks = 0;
    for (c, t) in threads.iter().enumerate() {
        let src = chunk_lists::counts(c);
        let (size, cap) = (size_class::CLASS_SIZE[c], chunk::capacity_of(c));
        // `used` counts live slots and cached slots (see `Chunk::used`).
        let held = t.used + src.abandoned_used;
        let live = held.wrapping_sub(t.cached);
        let cs = ClassStats {
            slot_size: size,
            chunks: src.chunks,
            live_slots: clamp(live),
            cached_slots: clamp(t.cached),
            free_slots: (src.chunks * cap).saturating_sub(held),
            reserved_bytes: src.chunks * CHUNK_SIZE,
            // Less the bytes freed into batches not yet pushed, which their chunks still count.
            requested_bytes: clamp((t.requested + src.abandoned_requested).wrapping_sub(t.batched)),
            retained_chunks: src.retained,
            abandoned_chunks: src.abandoned,
            allocations: t.supplied,
        };
        s.chunks += src.chunks;
        s.reserved_bytes += cs.reserved_bytes;
        s.live_bytes += cs.live_bytes();
        s.requested_bytes += cs.requested_bytes;
        s.cached_bytes += cs.cached_slots * size;
        s.allocations = s.allocations.wrapping_add(t.supplied);
        s.allocated_bytes = s
            .allocated_bytes
            .wrapping_add(t.supplied.wrapping_mul(size));
        live_blocks += cs.live_slots;
        s.classes[c] = cs;
    }
    let [blocks, bytes, allocated, allocated_bytes] = heap::large_totals().map(clamp);
    (s.large_blocks, s.large_bytes) = (blocks, bytes);
    s.allocations = s.allocations.wrapping_add(allocated);
    s.allocated_bytes = s.allocated_bytes.wrapping_add(allocated_bytes);
    // The most any snapshot reported: `frees` is a counter (see its doc).
    static FREES: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let frees = s.allocations.saturating_sub(live_blocks + blocks);
    s.frees = FREES
        .fetch_max(frees, core::sync::atomic::Ordering::Relaxed)
        .max(frees);
    let (peak, mapped, purged) = source::lifetime();
    s.peak_reserved_bytes = peak * CHUNK_SIZE;
    s.chunks_mapped = mapped;
    s.chunks_purged = purged;
    s.huge_page_bytes = source::huge_bytes();
}

// At start: read the settings (so warnings about them come first) and, with
// `POOLALLOC_SHOW_STATS`, arrange for the exit report.
os::run_at_start!(at_start);

/// Reads the settings and, with `POOLALLOC_SHOW_STATS`, arranges for the exit report (once).
pub(crate) fn at_start() {
    static ONCE: spin::Once<()> = spin::Once::new();
    ONCE.call_once(|| {
        // `POOLALLOC_PROF`: the profiler samples from here on and dumps at exit.
        #[cfg(feature = "profiling")]
        let profiling = crate::checks::profile::start_from_env();
        #[cfg(not(feature = "profiling"))]
        let profiling = false;
        if settings::show_stats() {
            os::keep_stderr();
        }
        if settings::show_stats() || profiling {
            os::at_exit(at_exit);
        }
    });
}

/// The exit hook (the OS layer keeps one): the profile, then the statistics.
fn at_exit() {
    #[cfg(feature = "profiling")]
    crate::checks::profile::dump_at_exit();
    if settings::show_stats() {
        exit_report();
    }
}

/// `stats()` on stderr, written without allocating (line by line through a stack buffer).
fn exit_report() {
    struct Stderr;
    impl fmt::Write for Stderr {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            os::write_stderr(s.as_bytes());
            Ok(())
        }
    }
    let _ = fmt::Write::write_fmt(
        &mut Stderr,
        format_args!("poolalloc: stats at exit\n{}", stats()),
    );
}

/// Returns to the OS everything that can go now: the calling thread's empty chunks (after
/// collecting their remote frees), abandoned chunks that became empty, every retained empty chunk,
/// and (with glibc) the system allocator's free heap. Other threads' chunks are untouched.
/// True when the process's resident set shrank (false where the OS does not report it).
pub fn trim() -> bool {
    rss_shrank(|| {
        trim_pools();
        // Where our C library is the process's malloc, malloc_trim would be trim_pools again.
        if !settings::malloc_is_ours() {
            os::trim_system_allocator();
        }
    })
}

/// Runs `f` and says whether the resident set shrank meanwhile.
pub(crate) fn rss_shrank(f: impl FnOnce()) -> bool {
    let before = os::rss_bytes();
    f();
    let after = os::rss_bytes();
    matches!((before, after), (Some(b), Some(a)) if a < b)
}

/// [`trim`] without the system allocator's part: what poolalloc itself holds (large spans of the
/// size-less interface waiting for reuse included). The C ABI's `malloc_trim` calls this one: there
/// the system allocator's trim would be itself.
pub(crate) fn trim_pools() {
    #[cfg(poolalloc_pools)]
    {
        heap::trim_current_thread();
        purge::trim();
    }
}

/// Bytes as a short human-readable string, formatted without allocating.
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = StackText::<24>::new();
        let b = self.0 as f64;
        let _ = match self.0 {
            n if n >= 1 << 30 => {
                fmt::write(&mut out, format_args!("{:.1} GiB", b / (1u64 << 30) as f64))
            }
            n if n >= 1 << 20 => {
                fmt::write(&mut out, format_args!("{:.1} MiB", b / (1 << 20) as f64))
            }
            n if n >= 1 << 10 => fmt::write(&mut out, format_args!("{:.1} KiB", b / 1024.0)),
            n => fmt::write(&mut out, format_args!("{n} B")),
        };
        // `pad` aligns the text to the caller's width.
        f.pad(out.as_str())
    }
}

/// Bytes, or `n/a` where they are not known.
struct Known(Option<usize>);

impl fmt::Display for Known {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(b) => fmt::Display::fmt(&Bytes(b), f),
            None => f.pad("n/a"),
        }
    }
}

/// A utilisation in percent (one decimal), or `n/a`.
struct UtilText(Option<f64>);

impl fmt::Display for UtilText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(u) => {
                let mut out = StackText::<16>::new();
                let _ = fmt::write(&mut out, format_args!("{u:.1}"));
                f.pad(out.as_str())
            }
            None => f.pad("n/a"),
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>8}",
            "slot",
            "chunks",
            "reserved",
            "live",
            "requested",
            "waste",
            "cached",
            "free",
            "util%",
            "retained"
        )?;
        // Requested sizes, waste and utilisation only where they are known (see `requested_known`).
        let known = |b: usize| Known(self.requested_known.then_some(b));
        for c in self.classes.iter().filter(|c| c.chunks > 0) {
            let util = if c.reserved_bytes > 0 {
                100.0 * c.requested_bytes as f64 / c.reserved_bytes as f64
            } else {
                0.0
            };
            let util = UtilText(self.requested_known.then_some(util));
            writeln!(
                f,
                "{:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>8}",
                c.slot_size,
                c.chunks,
                Bytes(c.reserved_bytes),
                Bytes(c.live_bytes()),
                known(c.requested_bytes),
                known(c.live_bytes().saturating_sub(c.requested_bytes)),
                Bytes(c.cached_slots * c.slot_size),
                Bytes(c.free_slots * c.slot_size),
                util,
                c.retained_chunks
            )?;
        }
        writeln!(
            f,
            "small: {} chunks, {} reserved, {} live ({} requested), {} cached (freed by other threads, not yet collected)",
            self.chunks,
            Bytes(self.reserved_bytes),
            Bytes(self.live_bytes),
            known(self.requested_bytes),
            Bytes(self.cached_bytes)
        )?;
        if !self.requested_known {
            writeln!(
                f,
                "       (requested, waste, util%: n/a, the C interface's malloc passes no size to free)"
            )?;
        }
        writeln!(
            f,
            "large: {} blocks, {}",
            self.large_blocks,
            Bytes(self.large_bytes)
        )?;
        match self.rss_bytes {
            Some(r) => writeln!(f, "rss:   {}", Bytes(r))?,
            None => writeln!(f, "rss:   not reported")?,
        }
        writeln!(f, "backend: {:?}", self.backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::alloc::{GlobalAlloc, Layout};

    /// The backend named in the snapshot is the one that serves: with the pools, a small block
    /// shows up in the class counters; with `System`, nothing does.
    #[test]
    #[cfg_attr(miri, ignore = "reads the process's counters, slow under Miri")]
    fn the_snapshot_names_the_live_backend() {
        let l = Layout::from_size_align(40, 8).unwrap();
        // SAFETY: a non-zero layout; freed below.
        let p = unsafe { crate::PoolAlloc::new().alloc(l) };
        assert!(!p.is_null());
        let during = stats();
        // SAFETY: allocated above with l.
        unsafe { crate::PoolAlloc::new().dealloc(p, l) };
        match during.backend {
            Backend::Pools => {
                assert_eq!(os::BACKEND, Backend::Pools);
                // The live block sits in a chunk of ours.
                assert!(during.chunks > 0);
                assert!(during.reserved_bytes >= crate::CHUNK_SIZE);
            }
            Backend::System => {
                assert_eq!(during.chunks, 0);
                assert_eq!(during.live_bytes, 0);
            }
        }
    }
}
