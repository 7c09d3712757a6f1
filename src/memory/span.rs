//! Large blocks of the size-less interface (`raw`, the C ABI): each one a *span*, a mapping of its
//! own, found again from the pointer alone. (`PoolAlloc`'s large blocks go to the system allocator
//! instead; in a process where poolalloc *is* the system allocator, that is not possible.)
//!
//! ```text
//! base (aligned to max(CHUNK_SIZE, align), 2 MiB for spans of 2 MiB and more)
//! │ … │ header (64 B) │ block: p = base + max(64, align) … │ end = base + len (whole granules)
//! ```
//!
//! A span covers whole [`CHUNK_SIZE`] granules, so no other mapping shares a granule with it and
//! the address map can mark its granules as ours: a pointer is looked up there before its header
//! is read. The header holds `MAGIC ^ p`, so a pointer into a span that is not its block start
//! (or a span's block freed already) is recognised.
//!
//! Freed spans wait in a cache for reuse: up to 4 MiB, `CACHE_ENTRIES` spans (`CACHE_BYTES` in all)
//! for a request of nearly their size; above that, `BIG_ENTRIES` spans (`BIG_BYTES` of address
//! space in all) for any large request, with their pages far beyond the block purged when they
//! are much larger, or grown to it by a remap (jemalloc's dirty extents, mimalloc's purge delay).
//! So a block freed and allocated again costs no system call, and a program that cycles blocks of
//! 5 to 25 MB does not fault in fresh pages for each. A block that grows past its span takes a
//! waiting span that holds the new size (up to twice it; spans up to 4 MiB) and grows on inside
//! it, its old span waiting in its place, so a buffer grown by doubling reuses resident pages
//! instead of faulting in new ones at each step. The purger unmaps spans that waited longer than
//! the purge delay (so RSS falls within a second of going idle), and `trim` unmaps all of them;
//! with a delay of zero, or no purger, nothing above 4 MiB waits. Growing a span moves its pages
//! where the OS can (`mremap` on Linux: no copy, in place when the address space after it is
//! free) and copies the block elsewhere.

use crate::base::lock::Lock;
use crate::chunks::addr_map::{self, Kind};
use crate::chunks::chunk::CHUNK_SIZE;
use crate::{checks::hardened, os};
use core::ptr;

/// Bytes of the header before each block.
pub const HEADER: usize = 64;
/// Spans of this size and more are aligned for transparent huge pages.
const HUGE: usize = 2 << 20;
/// Freed spans kept for reuse, at most.
const CACHE_ENTRIES: usize = 64;
/// Bytes of freed spans kept for reuse, at most: they are resident while they wait (64 MiB made
/// python3's peak RSS 1.17x the best peer's; with 8 MiB a redis MSET of ten 50 KB values, which
/// cycles ~20 spans plus its query buffer per request, fell to 0.66x the best peer's rate).
const CACHE_BYTES: usize = 16 << 20;
/// Freed spans larger than this wait among the big ones.
const CACHE_SPAN_MAX: usize = 4 << 20;
/// Big freed spans (above `CACHE_SPAN_MAX`) kept for reuse, at most.
const BIG_ENTRIES: usize = 8;
/// Bytes of big freed spans kept for reuse, at most. They wait the purge delay at most (250 ms by
/// default; jemalloc keeps dirty pages for 10 s), so this bounds only what a burst of frees
/// followed by other work adds to the peak.
const BIG_BYTES: usize = 256 << 20;
/// Resident bytes a reused big span may keep past its block (or the block's size, if larger).
const BIG_KEEP: usize = 16 << 20;
/// The header's magic (its low 32 bits on a 32-bit target).
const MAGIC: usize = 0x5a_9e11_0c8b_d2f3_u64 as usize;

#[repr(C)]
struct Header {
    /// `MAGIC ^ p` while the block `p` is live; zero once freed.
    magic: usize,
    /// The mapping: its start and length.
    base: *mut u8,
    len: usize,
    /// The usable size: the request rounded up to whole pages (at most to the span's end). Less
    /// than the span: programs size their buffers and their memory accounting by it (redis's
    /// `used_memory` sums `malloc_usable_size`).
    usable: usize,
}

/// The usable size of a block of `size` bytes at offset `off` in a span of `len` bytes.
#[inline]
fn usable_for(size: usize, off: usize, len: usize) -> usize {
    let page = os::page_size();
    let end = (off + size + page - 1) & !(page - 1);
    // With `hardened`, the request rounded to 16 bytes where a canary fits after it.
    hardened::span_usable(size, end.min(len) - off, len - off)
}

/// A freed span waiting for reuse.
#[derive(Clone, Copy)]
struct Cached {
    base: *mut u8,
    len: usize,
    /// When it was freed ([`os::now_ms`]).
    at: u32,
}

/// One list of waiting spans: `entries[..n]`, `bytes` in all.
struct List<const N: usize> {
    entries: [Cached; N],
    n: usize,
    bytes: usize,
}

struct Cache {
    /// Spans up to `CACHE_SPAN_MAX`.
    small: List<CACHE_ENTRIES>,
    /// Spans above it.
    big: List<BIG_ENTRIES>,
}

// SAFETY: the pointers name mappings only the cache's holder touches.
unsafe impl Send for Cache {}

const NONE: Cached = Cached {
    base: ptr::null_mut(),
    len: 0,
    at: 0,
};

impl<const N: usize> List<N> {
    const fn new() -> Self {
        List {
            entries: [NONE; N],
            n: 0,
            bytes: 0,
        }
    }

    /// Takes entry `i` (< n) off the list; the last entry moves into its place.
    fn remove(&mut self, i: usize) -> Cached {
        let s = self.entries[i];
        self.n -= 1;
        self.entries[i] = self.entries[self.n];
        self.bytes -= s.len;
        s
    }

    /// Adds a span, first moving the spans that waited longest to `out` (from `*nout` on) until
    /// it fits within `N` spans and `max_bytes`.
    fn push(&mut self, s: Cached, max_bytes: usize, out: &mut [Cached], nout: &mut usize) {
        while self.n == N || self.n > 0 && self.bytes + s.len > max_bytes {
            let oldest = (0..self.n)
                .min_by_key(|&i| self.entries[i].at)
                .expect("a full list holds a span");
            out[*nout] = self.remove(oldest);
            *nout += 1;
        }
        self.entries[self.n] = s;
        self.n += 1;
        self.bytes += s.len;
    }

    /// The first span that waited `delay_ms` or longer at `now`, taken off the list.
    fn take_expired(&mut self, now: u32, delay_ms: u32) -> Option<Cached> {
        let i = (0..self.n).find(|&i| now.wrapping_sub(self.entries[i].at) >= delay_ms)?;
        Some(self.remove(i))
    }
}

static CACHE: Lock<Cache> = Lock::new(Cache {
    small: List::new(),
    big: List::new(),
});

/// Where the block of a span with alignment `align` starts, from the span's base.
#[inline]
fn offset(align: usize) -> usize {
    align.max(HEADER)
}

/// The alignment of a span's base for a block of `align` and a span of `len` bytes.
#[inline]
fn base_align(align: usize, len: usize) -> usize {
    let a = align.max(CHUNK_SIZE);
    if len >= HUGE { a.max(HUGE) } else { a }
}

/// The span length for `size` bytes at alignment `align`: whole granules; None on overflow.
#[inline]
fn span_len(size: usize, align: usize) -> Option<usize> {
    let need = size.checked_add(offset(align))?;
    let len = need.checked_add(CHUNK_SIZE - 1)? & !(CHUNK_SIZE - 1);
    // Keep every length a valid isize, as Rust and mmap want.
    (len <= isize::MAX as usize / 2).then_some(len)
}

/// A block of at least `size` bytes aligned to `align` (a power of two), and whether its memory is
/// fresh from the OS (so already zero); null when out of memory or the size is absurd.
pub fn alloc(size: usize, align: usize) -> (*mut u8, bool) {
    let Some(len) = span_len(size, align) else {
        return (ptr::null_mut(), false);
    };
    let balign = base_align(align, len);
    if len > CACHE_SPAN_MAX {
        if let Some(p) = reuse_big(size, align, len, balign) {
            return (p, false);
        }
    }
    let (base, len, fresh) = match take_cached(len, len / 4, balign) {
        Some((b, l)) => (b, l, false),
        None => {
            let b = os::map_aligned(len, balign);
            if b.is_null() {
                return (ptr::null_mut(), false);
            }
            if !addr_map::set(Kind::Span, b, len, true) {
                // SAFETY: our own fresh mapping, unknown to anyone.
                unsafe { os::unmap(b, len) };
                return (ptr::null_mut(), false);
            }
            (b, len, true)
        }
    };
    // SAFETY: base + offset(align) < base + len lies in the span, and the header's 64 bytes
    // before it too (offset ≥ HEADER); the span is ours and unshared.
    unsafe {
        let p = base.add(offset(align));
        write_header(p, base, len, usable_for(size, offset(align), len));
        (p, fresh)
    }
}

/// # Safety
/// `p - HEADER .. p` must lie in the span `[base, base + len)`, which the caller owns.
unsafe fn write_header(p: *mut u8, base: *mut u8, len: usize, usable: usize) {
    // SAFETY: guaranteed by the caller; the header is 8-aligned since p is 64-aligned.
    unsafe {
        p.sub(HEADER).cast::<Header>().write(Header {
            magic: MAGIC ^ p as usize,
            base,
            len,
            usable,
        })
    };
    hardened::on_span_block(p, usable, base as usize + len - p as usize);
}

/// Sets the usable size of the live block `p` whose header is `h` (and `hardened`'s canaries).
///
/// # Safety
/// `h` is the header of the live span block `p`, which the caller owns; `usable` fits its span.
unsafe fn set_usable(h: *mut Header, p: *mut u8, usable: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*h).usable = usable;
        hardened::on_span_block(p, usable, (*h).base as usize + (*h).len - p as usize);
    }
}

// The header's last word stays free for `hardened`'s canary.
const _: () = assert!(size_of::<Header>() + 8 <= HEADER);

/// The header of the live span block `p`, or None when `p` is not the start of a live span block.
/// `p` must be in a granule the address map marks as a span.
#[inline]
fn header(p: *mut u8) -> Option<*mut Header> {
    let h = p.wrapping_sub(HEADER);
    // The header is in the same span as p when both are in granules of spans; a p in the first 64
    // bytes of a span's first granule is no block start (blocks start at 64 or more).
    if (p as usize & (CHUNK_SIZE - 1)) < HEADER && addr_map::kind_of(h) != Kind::Span {
        return None;
    }
    let h = h.cast::<Header>();
    // SAFETY: h is inside a mapped span of ours (p's granule is a span's and h is in the same
    // span or, checked above, in a span granule too), 8-aligned when p is (checked first).
    if p as usize % 8 != 0 || unsafe { (*h).magic } != MAGIC ^ p as usize {
        return None;
    }
    // SAFETY: h is the header of a live block (its magic says so).
    unsafe {
        hardened::check_span_block(p, (*h).usable, (*h).base as usize + (*h).len - p as usize)
    };
    Some(h)
}

/// True when `p` is a live block of a span. `p` must be in a granule the map marks as a span.
pub fn is_block(p: *mut u8) -> bool {
    header(p).is_some()
}

/// The usable size of the live span block `p`.
///
/// # Safety
/// `p` must be a live block from [`alloc`].
pub unsafe fn usable(p: *mut u8) -> usize {
    let h = p.wrapping_sub(HEADER).cast::<Header>();
    // SAFETY: p is live (caller), so its header is readable.
    unsafe { (*h).usable }
}

/// Whether the live span block `p` stays where it is when resized to `new_size` bytes: it holds
/// them and they use at least half of it (a block shrunk further moves, so a small block does not
/// keep a big span's memory).
///
/// # Safety
/// `p` must be a live block from [`alloc`].
pub unsafe fn stays(p: *mut u8, new_size: usize) -> bool {
    // SAFETY: forwarded.
    let usable = unsafe { usable(p) };
    new_size <= usable && new_size >= usable / 2
}

/// Frees the span block `p`. Returns its usable size (for the statistics), or None when `p` is not
/// a live span block (nothing is done then). `may_wait`: the purger runs, so a big span may wait
/// in the cache (it will be unmapped after the purge delay); else only a small one does.
///
/// # Safety
/// `p` must be in a granule the map marks as a span; if it is a live block, nobody uses it after.
pub unsafe fn free(p: *mut u8, may_wait: bool) -> Option<usize> {
    let h = header(p)?;
    // SAFETY: h is the header of the live block p, which the caller gives up.
    let (base, len, usable) = unsafe {
        let (b, l, u) = ((*h).base, (*h).len, (*h).usable);
        (*h).magic = 0;
        (b, l, u)
    };
    // SAFETY: the span is ours and nobody refers to it any more.
    unsafe { put_cached(base, len, may_wait) };
    Some(usable)
}

/// Resizes the live span block `p` to hold `new_size` bytes, keeping its contents and alignment
/// (its offset in the span keeps it): in place, by moving its pages, or not at all (null: `p` is untouched).
/// Returns the block (maybe moved) and its new usable size.
///
/// # Safety
/// `p` must be a live block from [`alloc`].
pub unsafe fn resize(p: *mut u8, new_size: usize) -> (*mut u8, usize) {
    let h = p.wrapping_sub(HEADER).cast::<Header>();
    // SAFETY: p is live (caller).
    let (base, len) = unsafe { ((*h).base, (*h).len) };
    let off = p as usize - base as usize;
    let Some(new_len) = new_size
        .checked_add(off)
        .and_then(|n| n.checked_add(CHUNK_SIZE - 1))
        .map(|n| n & !(CHUNK_SIZE - 1))
        .filter(|&n| n <= isize::MAX as usize / 2)
    else {
        return (ptr::null_mut(), 0);
    };
    // SAFETY: p is live (caller).
    let growing = new_size > unsafe { (*h).usable };
    // The span holds the new size: only the usable size changes. A growing block keeps a span of
    // up to twice its new size (it may have been given one to grow into, below); a bigger span,
    // or a big one from `reuse_big`, is cut back as a shrink is.
    if new_len == len || growing && new_len < len && len <= CACHE_SPAN_MAX && len <= 2 * new_len {
        let u = usable_for(new_size, off, len);
        // SAFETY: p is live (caller); the block's new size fits the span.
        unsafe { set_usable(h, p, u) };
        return (p, u);
    }
    if new_len < len {
        // Shrink: give the tail back.
        // SAFETY: [base + new_len, base + len) is the span's own tail, whole granules, unused
        // after the shrink (new_size fits below it).
        unsafe {
            let tail = base.add(new_len);
            addr_map::set(Kind::Span, tail, len - new_len, false);
            os::unmap_part(tail, len - new_len);
            (*h).len = new_len;
            set_usable(h, p, usable_for(new_size, off, new_len));
            return (p, (*h).usable);
        }
    }
    let balign = base_align(if off > HEADER { off } else { 1 }, new_len);
    // A waiting span that holds the new size (the smallest such, up to twice it): the block is
    // copied into it and its own span waits in its place. Its pages are resident, so the growth
    // faults nothing in, and the block may grow on inside it with no call at all (a buffer grown
    // by doubling, as `Vec` does, again and again: glibc's and musl's realloc fault fresh pages
    // in for each). A copy costs less than the faults it saves: 1 MiB is ~0.1 ms to copy, and
    // the span that holds twice it ~0.6 ms of faults on this VM. Moving the pages instead
    // (mremap) would leave the span two mappings, which the next move could not take whole.
    if let Some((dst, dst_len)) = take_cached(new_len, new_len, balign) {
        // SAFETY: [dst, dst + dst_len) is a waiting span taken off the cache: ours, unused,
        // still marked in the address map, and distinct from p's; the block's usable bytes fit
        // at the same offset there (dst_len ≥ new_len > len). p's span is then given up as
        // `free` does (its block is the caller's, who gets the new one).
        unsafe {
            ptr::copy_nonoverlapping(p, dst.add(off), (*h).usable);
            let q = dst.add(off);
            let u = usable_for(new_size, off, dst_len);
            write_header(q, dst, dst_len, u);
            (*h).magic = 0;
            put_cached(base, len, false);
            return (q, u);
        }
    }
    // Grow in place when the address space after the span is free (where the OS can remap).
    // SAFETY: base/len is our whole mapping and new_len > len.
    if unsafe { os::grow_in_place(base, len, new_len) } {
        // SAFETY: the mapping now covers [base, base + new_len); the new granules were free.
        unsafe {
            if !addr_map::set(Kind::Span, base.add(len), new_len - len, true) {
                // Cannot record it: give the growth back (munmap of our own tail cannot fail).
                os::unmap_part(base.add(len), new_len - len);
                return (ptr::null_mut(), 0);
            }
            (*h).len = new_len;
            set_usable(h, p, usable_for(new_size, off, new_len));
            return (p, (*h).usable);
        }
    }
    // Move to a new, suitably aligned place: reserve it, then move the pages there (mremap), or
    // copy the block where the OS cannot move pages.
    let dst = os::map_aligned(new_len, balign);
    if dst.is_null() {
        return (ptr::null_mut(), 0);
    }
    if !addr_map::set(Kind::Span, dst, new_len, true) {
        // SAFETY: our own fresh mapping.
        unsafe { os::unmap(dst, new_len) };
        return (ptr::null_mut(), 0);
    }
    // The old range leaves the address map before it leaves the process: once unmapped (or moved
    // away), another thread may map a span there at once, whose marks must not then be cleared
    // by us. Nobody looks the old range up meanwhile: its one block is the caller's.
    addr_map::set(Kind::Span, base, len, false);
    // SAFETY: base/len is our whole mapping, dst/new_len our fresh one, distinct; on success
    // the old range is gone and dst holds its pages.
    if unsafe { !os::move_pages(base, len, dst, new_len) } {
        // SAFETY: the span's block [p, p + usable) lies inside [base, base + len), and the same
        // offset in dst holds at least that much (new_len > len); the header before it is
        // rewritten below. The old span is ours and unused once copied.
        unsafe {
            let old_usable = (*h).usable;
            ptr::copy_nonoverlapping(p, dst.add(off), old_usable);
            os::unmap(base, len);
        }
    }
    // SAFETY: dst + off is the moved block; its header moved with it.
    unsafe {
        let q = dst.add(off);
        let u = usable_for(new_size, off, new_len);
        write_header(q, dst, new_len, u);
        (q, u)
    }
}

/// A cached span of at least `len` bytes (and not much more: `slack` bytes at most past it) whose
/// base is aligned to `balign`, the smallest such.
fn take_cached(len: usize, slack: usize, balign: usize) -> Option<(*mut u8, usize)> {
    let mut c = CACHE.lock();
    let l = &mut c.small;
    let mut best: Option<usize> = None;
    for i in 0..l.n {
        let s = l.entries[i];
        if s.len >= len
            && s.len - len <= slack
            && s.base as usize % balign == 0
            && best.is_none_or(|b| l.entries[b].len > s.len)
        {
            best = Some(i);
        }
    }
    let s = l.remove(best?);
    drop(c);
    if !hardened::on_span_reused(s.base, s.len) {
        // SAFETY: taken off the cache: ours and unused.
        unsafe { unmap_span(s.base, s.len) };
        return None;
    }
    Some((s.base, s.len))
}

/// A block of `size` bytes at `align` (a span of `len` bytes, above `CACHE_SPAN_MAX`, based at a
/// multiple of `balign`) made from a waiting big span: the smallest that holds it (the pages far
/// past `len` purged when it is much larger: address space is kept, memory is not); else the
/// largest, grown to `len` (by a remap where the OS has one: its resident pages come along). So
/// one span serves a loop of blocks of varying sizes, and only pages beyond the last block's
/// fault. None when no big span waits or growing failed.
fn reuse_big(size: usize, align: usize, len: usize, balign: usize) -> Option<*mut u8> {
    let s = {
        let mut c = CACHE.lock();
        let l = &mut c.big;
        let aligned = |i: &usize| l.entries[*i].base as usize % balign == 0;
        let fit = (0..l.n)
            .filter(aligned)
            .filter(|&i| l.entries[i].len >= len)
            .min_by_key(|&i| l.entries[i].len);
        let i = fit.or_else(|| (0..l.n).filter(aligned).max_by_key(|&i| l.entries[i].len))?;
        l.remove(i)
    };
    if !hardened::on_span_reused(s.base, s.len) {
        // SAFETY: taken off the cache: ours and unused.
        unsafe { unmap_span(s.base, s.len) };
        return None;
    }
    let off = offset(align);
    let fits = s.len >= len;
    // Pages past the block stay resident up to `len` or `BIG_KEEP` beyond it (a loop over blocks
    // of 5 to 25 MB then faults in nothing), and are purged past that (a small block does not
    // keep a huge span's memory for its lifetime).
    let keep = len.saturating_add(len.max(BIG_KEEP));
    if fits && s.len > keep {
        // SAFETY: [base + keep, base + s.len) is whole granules of a span of ours, unused and
        // past the block.
        unsafe { os::purge(s.base.add(keep), s.len - keep) };
    }
    // SAFETY: the span [base, base + s.len) is ours and unused; the block's offset and its
    // header lie inside it (s.len ≥ the first granule ≥ offset(align) + HEADER). When it is too
    // small, usable 0 until the resize below: nothing in it is worth copying if that must move
    // it by copying.
    let p = unsafe {
        let p = s.base.add(off);
        let u = if fits {
            usable_for(size, off, s.len)
        } else {
            0
        };
        write_header(p, s.base, s.len, u);
        p
    };
    if fits {
        return Some(p);
    }
    // SAFETY: p is now a live block of a span made by `alloc`.
    let (q, _) = unsafe { resize(p, size) };
    if q.is_null() {
        // Could not grow it: give it back and map a fresh one.
        // SAFETY: the span is still ours, whole (a failed resize changes nothing), and unused.
        unsafe { unmap_span(s.base, s.len) };
        return None;
    }
    Some(q)
}

/// Puts a freed span in the cache, or unmaps it (or the spans that waited longest) when the cache
/// is full; a big span only when `may_wait`.
///
/// # Safety
/// The span is ours, whole, and unused.
unsafe fn put_cached(base: *mut u8, len: usize, may_wait: bool) {
    // Spans to unmap once the lock is released: evicted ones, or this one.
    let mut out = [NONE; CACHE_ENTRIES + 1];
    let mut nout = 0;
    if len <= CACHE_SPAN_MAX || (may_wait && len <= BIG_BYTES) {
        // Read-only while it waits (hardened): a write after free faults. Before it is visible
        // to other threads, so none takes it and finds it protected afterwards.
        hardened::on_span_cached(base, len);
    }
    let s = Cached {
        base,
        len,
        at: os::now_ms(),
    };
    {
        let mut c = CACHE.lock();
        if len <= CACHE_SPAN_MAX {
            c.small.push(s, CACHE_BYTES, &mut out, &mut nout);
        } else if may_wait && len <= BIG_BYTES {
            c.big.push(s, BIG_BYTES, &mut out, &mut nout);
        } else {
            out[0] = s;
            nout = 1;
        }
    }
    for e in &out[..nout] {
        // SAFETY: the span given to us or one taken off the cache: ours and unused.
        unsafe { unmap_span(e.base, e.len) };
    }
}

/// # Safety
/// The span is ours, whole, and unused.
unsafe fn unmap_span(base: *mut u8, len: usize) {
    addr_map::set(Kind::Span, base, len, false);
    // SAFETY: guaranteed by the caller.
    unsafe { os::unmap(base, len) };
}

/// Unmaps the cached spans that waited `delay_ms` or longer (all of them when `delay_ms` is 0).
pub fn expire(now: u32, delay_ms: u32) {
    loop {
        let victim = {
            let mut c = CACHE.lock();
            let big = c.big.take_expired(now, delay_ms);
            match big.or_else(|| c.small.take_expired(now, delay_ms)) {
                Some(v) => v,
                None => return,
            }
        };
        // SAFETY: taken off the cache: ours and unused.
        unsafe { unmap_span(victim.base, victim.len) };
    }
}

/// Takes the cache lock for `fork` (see `heap`'s fork handlers).
pub(crate) fn lock_for_fork() {
    core::mem::forget(CACHE.lock());
}

/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: held by lock_for_fork, guard forgotten.
    unsafe { CACHE.force_unlock() };
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The cache is process-wide: the tests that use spans take turns.
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn turn() -> std::sync::MutexGuard<'static, ()> {
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri cannot unmap part of a mapping (os::map_aligned trims)"
    )]
    fn blocks_are_found_reused_and_expired() {
        let _turn = turn();
        // Spans an earlier test left waiting would serve the first request (not fresh then).
        expire(os::now_ms(), 0);
        let (p, fresh) = alloc(100_000, 16);
        assert!(!p.is_null() && fresh);
        assert_eq!(addr_map::kind_of(p), Kind::Span);
        assert!(is_block(p));
        assert!(
            !is_block(p.wrapping_add(64)),
            "an interior pointer is no block"
        );
        // SAFETY: p is a live block of at least 100 000 bytes.
        let u = unsafe { usable(p) };
        assert!(u >= 100_000 && u < 100_000 + os::page_size());
        // SAFETY: the whole usable size may be written.
        unsafe { ptr::write_bytes(p, 7, u) };
        // SAFETY: p is live and not used after.
        assert_eq!(unsafe { free(p, true) }, Some(u));
        assert!(!is_block(p), "a freed block is no block");
        // SAFETY: a freed block's header is still mapped (cached span), but no live block.
        assert_eq!(unsafe { free(p, true) }, None);
        // A request of nearly the same size takes the cached span: not fresh.
        let (q, fresh) = alloc(90_000, 16);
        assert!(!q.is_null() && !fresh);
        // SAFETY: q is live.
        assert!(unsafe { free(q, true) }.is_some());
        // Aligned blocks keep their alignment.
        let (a, _) = alloc(10, 1 << 20);
        assert_eq!(a as usize % (1 << 20), 0);
        assert!(is_block(a));
        // SAFETY: a is live.
        assert!(unsafe { free(a, true) }.is_some());
        expire(os::now_ms(), 0);
        assert_eq!(CACHE.lock().small.n, 0);
        assert_eq!(
            addr_map::kind_of(q),
            Kind::Foreign,
            "an unmapped span leaves the map"
        );
        assert_eq!(alloc(usize::MAX - 10, 16).0, ptr::null_mut());
    }

    /// A block grown past its span moves into a waiting span that holds the new size: its
    /// contents come along, the waiting span's base is the new one, the old span waits in its
    /// place, and the block grows again (in place or moved), shrinks and is freed as usual.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri cannot unmap part of a mapping (os::map_aligned trims)"
    )]
    fn a_growing_block_moves_into_a_waiting_span() {
        let _turn = turn();
        expire(os::now_ms(), 0);
        let (w, _) = alloc(1 << 20, 16);
        // SAFETY: w is live, 1 MiB, freed once: its span waits.
        unsafe {
            ptr::write_bytes(w, 0xee, 1 << 20);
            assert!(free(w, true).is_some());
        }
        let waiting = w.wrapping_sub(offset(16));
        let (p, _) = alloc(200_000, 16);
        // SAFETY: p holds 200 000 bytes; each resize keeps the first 200 000 (then 600 000).
        unsafe {
            for i in 0..200_000 {
                *p.add(i) = (i % 251) as u8;
            }
            let (q, u) = resize(p, 600_000);
            assert!(!q.is_null() && u >= 600_000);
            assert_eq!(
                q.wrapping_sub(offset(16)),
                waiting,
                "the waiting span was taken"
            );
            assert!(is_block(q));
            assert!(!is_block(p), "the old span waits, its block freed");
            assert!((0..200_000).all(|i| *q.add(i) == (i % 251) as u8));
            ptr::write_bytes(q.add(200_000), 3, 400_000);
            // Growing within the span it was given: it stays, keeping the whole span.
            let (q2, u2) = resize(q, 900_000);
            assert_eq!(q2, q, "a growing block keeps the span it was given");
            assert!(u2 >= 900_000);
            // Past the span: another move (by copying where the joined mappings cannot move).
            let (r, u) = resize(q, 3 << 20);
            assert!(!r.is_null() && u >= 3 << 20);
            assert!((0..200_000).all(|i| *r.add(i) == (i % 251) as u8));
            assert!((200_000..600_000).all(|i| *r.add(i) == 3));
            let (s, _) = resize(r, 100_000);
            assert_eq!(s, r, "a shrink stays");
            assert!((0..100_000).all(|i| *s.add(i) == (i % 251) as u8));
            assert!(free(s, true).is_some());
        }
        expire(os::now_ms(), 0);
        assert_eq!(CACHE.lock().small.n, 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri cannot unmap part of a mapping (os::map_aligned trims)"
    )]
    fn big_spans_wait_for_any_large_request_only_while_the_purger_runs() {
        let _turn = turn();
        expire(os::now_ms(), 0);
        let (p, fresh) = alloc(10 << 20, 16);
        assert!(!p.is_null() && fresh);
        // SAFETY: p holds 10 MiB; live, freed once.
        unsafe {
            ptr::write_bytes(p, 1, 10 << 20);
            assert!(free(p, true).is_some());
        }
        assert_eq!(CACHE.lock().big.n, 1);
        // A much smaller large request takes it (no fresh mapping), and a larger one after it
        // grows it: both see dirty memory.
        let (q, fresh) = alloc(5 << 20, 16);
        assert!(!q.is_null() && !fresh);
        // SAFETY: q holds at least 5 MiB.
        assert!(unsafe { usable(q) } >= 5 << 20);
        // SAFETY: q is live, freed once.
        assert!(unsafe { free(q, true) }.is_some());
        let (r, fresh) = alloc(20 << 20, 16);
        assert!(!r.is_null() && !fresh);
        // SAFETY: r holds at least 20 MiB, all writable; freed once, not to wait.
        unsafe {
            assert!(usable(r) >= 20 << 20);
            ptr::write_bytes(r, 2, 20 << 20);
            assert!(free(r, false).is_some());
        }
        assert_eq!(CACHE.lock().big.n, 0, "without a purger nothing big waits");
        assert_eq!(addr_map::kind_of(r), Kind::Foreign);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri has no mremap, nor partial munmap")]
    fn resizing_keeps_contents() {
        let _turn = turn();
        let (p, _) = alloc(40_000, 16);
        // SAFETY: p holds 40 000 bytes.
        unsafe { ptr::write_bytes(p, 3, 40_000) };
        // SAFETY: p is live; each result is the live block from then on.
        unsafe {
            let (q, u) = resize(p, 3 << 20);
            assert!(!q.is_null() && u >= 3 << 20);
            assert_eq!(*q.add(39_999), 3);
            ptr::write_bytes(q, 5, u);
            let (r, u) = resize(q, 50_000);
            assert_eq!(r, q, "a shrink stays in place");
            assert!((50_000..3 << 20).contains(&u));
            assert_eq!(*r.add(49_999), 5);
            assert!(free(r, true).is_some());
        }
    }
}
