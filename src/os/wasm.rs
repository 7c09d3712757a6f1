//! The OS contract on wasm32 (`wasm32-unknown-unknown`, `wasm32-wasip1`, `wasm32-wasip1-threads`).
//! There is no OS to map from: only the module's linear memory, which grows by 64 KiB pages
//! (`memory.grow`) and never shrinks.
//!
//! - **Memory.** Mappings are page ranges of linear memory. What is unmapped (whole or in part)
//!   goes on a free list kept here, in the freed pages themselves: address-ordered, neighbours
//!   merged, searched first-fit for the size and alignment asked. Only when no range fits does
//!   memory grow, by exactly what the request needs from the current end; the pages skipped to
//!   reach an alignment go on the list. Memory handed out is zeroed: fresh pages are, and a
//!   reused range that was written is zeroed here. Nothing ever goes back to the host
//!   ([`RETURNS_MEMORY`] is false): the chunk source keeps empty chunks for any class instead of
//!   purging them, and a [`purge`] only zeroes.
//! - **Neighbours.** Other allocators of the module (std's dlmalloc, which serves large blocks as
//!   the system allocator; wasi-libc's malloc) grow the same memory. `memory.grow` hands each its
//!   own pages, so they share the address space without knowing of each other; a grow that
//!   another caller overtook is kept on the list and the grow tried again.
//! - **Threads.** Without shared memory (`wasm32-unknown-unknown`, `wasm32-wasip1`) there is one
//!   thread: the thread slot is a plain static and no thread ever exits before the module ends.
//!   On `wasm32-wasip1-threads` the slot is a TLS word (`thread_local!`) and wasi-libc's pthread
//!   keys run the exit hook, as on Unix; on other threaded wasm32 builds (no libc) there is no
//!   exit hook: an exited thread's chunks stay with its heap (documented in docs/platforms.md).
//!   There is no purger thread (nothing could be returned) and no fork.
//! - The rest (clock, stderr, environment, start hooks) is `fallback.rs`'s: what `std` gives.

use core::ptr;
use spin::Mutex;

pub use super::fallback::{
    at_exit, at_fork, copy_readable, fatal_write_and_abort, for_each_env, keep_stderr,
    keep_system_allocator_blocks, trim_system_allocator, yield_now,
};
pub(crate) use super::fallback::{run_at_start, thread_slot};

/// The pools run here.
pub const BACKEND: super::Backend = super::Backend::Pools;

/// Any page-aligned part of a mapping can be unmapped (it goes on the free list).
pub const PARTIAL_UNMAP: bool = true;

/// Linear memory never shrinks: nothing goes back to the host.
pub const RETURNS_MEMORY: bool = false;

/// The wasm page: the unit of `memory.grow`.
const PAGE: usize = 65536;

pub fn page_size() -> usize {
    PAGE
}

/// A free range of pages, written at its own start.
#[repr(C)]
struct Range {
    len: usize,
    next: *mut Range,
    /// Whether any byte past this header may be non-zero (the range was handed out before).
    dirty: bool,
}

/// Bytes of a free range that are known to be written: its header.
const HEADER: usize = core::mem::size_of::<Range>();

struct FreeList {
    /// Free ranges in address order, none adjacent to the next (they are merged).
    head: *mut Range,
}

// SAFETY: the list's ranges are linear memory owned by this file; access is serialised by the lock.
unsafe impl Send for FreeList {}

/// The free list. A leaf lock: nothing is called while it is held but `memory.grow`.
static FREE: Mutex<FreeList> = Mutex::new(FreeList {
    head: ptr::null_mut(),
});

#[inline]
fn memory_size() -> usize {
    core::arch::wasm32::memory_size::<0>()
}

/// Puts `[p, p + len)` on the list, merged with its neighbours.
///
/// # Safety
/// The range is page aligned, lies in linear memory, belongs to nobody (it is being given back or
/// was just grown) and overlaps no range on the list.
unsafe fn insert(f: &mut FreeList, p: usize, len: usize, dirty: bool) {
    let mut prev: *mut Range = ptr::null_mut();
    let mut cur = f.head;
    // SAFETY: every range on the list is a valid header in linear memory, ours under the lock; the
    // new range is ours too (caller), so writing its header is sound.
    unsafe {
        while !cur.is_null() && (cur as usize) < p {
            prev = cur;
            cur = (*cur).next;
        }
        let (mut len, mut next, mut dirty) = (len, cur, dirty);
        if !cur.is_null() && p + len == cur as usize {
            len += (*cur).len;
            next = (*cur).next;
            // The old header now lies inside the merged range: it is written.
            dirty = true;
        }
        if !prev.is_null() && prev as usize + (*prev).len == p {
            (*prev).len += len;
            (*prev).next = next;
            // The new range gets no header of its own: prev's covers it.
            (*prev).dirty |= dirty;
        } else {
            let r = p as *mut Range;
            r.write(Range { len, next, dirty });
            if prev.is_null() {
                f.head = r;
            } else {
                (*prev).next = r;
            }
        }
    }
}

/// Takes `size` bytes at a multiple of `align` from the list: null when no range holds them.
/// With it, how many of its first bytes may be non-zero, for the caller to zero: all of them if
/// the range was handed out before, its header if the part taken starts the range, else none.
fn take(f: &mut FreeList, size: usize, align: usize) -> (*mut u8, usize) {
    let mut link: *mut *mut Range = &mut f.head;
    // SAFETY: every range on the list is a valid header, ours under the lock; the pieces written
    // back lie inside the range taken off, in address order, so the list stays sorted and apart.
    unsafe {
        while !(*link).is_null() {
            let r = *link;
            let (start, len, next, dirty) = (r as usize, (*r).len, (*r).next, (*r).dirty);
            let end = start + len;
            let a = start.next_multiple_of(align);
            if a.checked_add(size).is_some_and(|e| e <= end) {
                *link = next;
                let mut at = link;
                if a > start {
                    let h = start as *mut Range;
                    h.write(Range {
                        len: a - start,
                        next: *at,
                        dirty,
                    });
                    *at = h;
                    at = &raw mut (*h).next;
                }
                if a + size < end {
                    let t = (a + size) as *mut Range;
                    t.write(Range {
                        len: end - a - size,
                        next: *at,
                        dirty,
                    });
                    *at = t;
                }
                let written = if dirty {
                    size
                } else if a == start {
                    HEADER.min(size)
                } else {
                    0
                };
                return (a as *mut u8, written);
            }
            link = &raw mut (*r).next;
        }
    }
    (ptr::null_mut(), 0)
}

/// Grows linear memory by what `size` bytes at a multiple of `align` need from its end; the
/// pages skipped for the alignment go on the list. Null when memory cannot grow.
fn grow(f: &mut FreeList, size: usize, align: usize) -> *mut u8 {
    loop {
        let Some(end) = memory_size().checked_mul(PAGE) else {
            return ptr::null_mut();
        };
        let Some(a) = end.checked_next_multiple_of(align) else {
            return ptr::null_mut();
        };
        let Some(need) = (a - end).checked_add(size) else {
            return ptr::null_mut();
        };
        let pages = need / PAGE;
        let prev = core::arch::wasm32::memory_grow::<0>(pages);
        if prev == usize::MAX {
            return ptr::null_mut();
        }
        let got = prev * PAGE;
        if got == end {
            if a > end {
                // SAFETY: the skipped pages were just grown: ours, fresh, apart from the list.
                unsafe { insert(f, end, a - end, false) };
            }
            return a as *mut u8;
        }
        // Another allocator grew memory between our look and our grow: keep the pages we got
        // (they are fresh) and try again from the new end.
        // SAFETY: as above.
        unsafe { insert(f, got, need, false) };
        let (p, written) = take(f, size, align);
        if !p.is_null() {
            // SAFETY: the range came off the list: ours alone now.
            unsafe { ptr::write_bytes(p, 0, written) };
            return p;
        }
    }
}

/// Mappings are whole pages: a size is rounded up to a page, as an OS rounds `mmap`'s.
fn pages(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(PAGE).filter(|&s| s > 0)
}

fn map_with(size: usize, align: usize) -> *mut u8 {
    let Some(size) = pages(size) else {
        return ptr::null_mut();
    };
    let align = align.max(PAGE);
    let mut f = FREE.lock();
    let (p, written) = take(&mut f, size, align);
    if !p.is_null() {
        drop(f);
        // SAFETY: the range came off the list: ours alone now, `written` bytes of it at most.
        unsafe { ptr::write_bytes(p, 0, written) };
        return p;
    }
    grow(&mut f, size, align)
}

pub fn map(size: usize) -> *mut u8 {
    map_with(size, PAGE)
}

pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    if !align.is_power_of_two() {
        return ptr::null_mut();
    }
    map_with(size, align)
}

/// Every byte of linear memory can be read and written: nothing faults.
pub fn reserve_inaccessible(_size: usize) -> *mut u8 {
    ptr::null_mut()
}

/// Linear memory has no lazily backed pages: a sparse mapping is a plain one.
pub fn map_sparse(size: usize) -> *mut u8 {
    map(size)
}

/// # Safety
/// See `os::unmap`.
pub unsafe fn unmap(p: *mut u8, size: usize) {
    let Some(size) = pages(size) else { return };
    // SAFETY: the caller gives the range back (whole pages, as it was mapped): ours now, apart
    // from every free range.
    unsafe { insert(&mut FREE.lock(), p as usize, size, true) };
}

/// # Safety
/// See `os::unmap_part`.
pub unsafe fn unmap_part(p: *mut u8, size: usize) {
    // SAFETY: as in `unmap`.
    unsafe { unmap(p, size) };
}

/// Nothing goes back to the host; the range reads as zero afterwards, as the contract says.
///
/// # Safety
/// See `os::purge`.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: the range is ours and unused (caller).
    unsafe { ptr::write_bytes(p, 0, size) };
}

/// # Safety
/// See `os::advise_huge`.
pub unsafe fn advise_huge(_p: *mut u8, _size: usize) -> bool {
    false
}

/// # Safety
/// See `os::grow_in_place`.
pub unsafe fn grow_in_place(_p: *mut u8, _old: usize, _new: usize) -> bool {
    false
}

/// # Safety
/// See `os::move_pages`.
pub unsafe fn move_pages(_src: *mut u8, _len: usize, _dst: *mut u8, _new_len: usize) -> bool {
    false
}

/// Linear memory cannot be made read-only (refused: it stays writable), and is always writable
/// (granted at once).
///
/// # Safety
/// See `os::protect`.
pub unsafe fn protect(_p: *mut u8, _size: usize, writable: bool) -> bool {
    writable
}

unsafe extern "C" {
    /// The end of the module's static data and stack, where the heap may start (set by the
    /// linker, `wasm-ld`).
    static __heap_base: u8;
}

/// Below `__heap_base` lie the stack and the module's static data: no allocator's memory.
pub fn is_stack_or_image(p: *const u8) -> bool {
    (p as usize) < &raw const __heap_base as usize
}

/// Linear memory is mapped from 0 to its size: beyond it nothing is.
pub fn is_unmapped(p: *const u8) -> bool {
    (p as usize) >= memory_size().saturating_mul(PAGE)
}

/// Entropy for the `hardened` keys: WASI's `random_get` (through std's hash keys, which allocate
/// nothing), mixed with addresses; only addresses on `wasm32-unknown-unknown`.
pub fn random_seed() -> [usize; 3] {
    #[allow(unused_mut)]
    let mut s = super::fallback::random_seed();
    #[cfg(target_os = "wasi")]
    {
        use core::hash::BuildHasher;
        let h = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        s[0] ^= h as usize;
        s[2] ^= (h >> 32) as usize;
    }
    s
}

/// The module's memory: every page of linear memory grown (whoever grew it). The module cannot
/// see which of them the host has backed, so this is an upper bound of its resident set.
pub fn rss_bytes() -> Option<usize> {
    memory_size().checked_mul(PAGE)
}

/// Milliseconds since the first call: WASI's monotonic clock (through `std::time::Instant`, which
/// allocates nothing); 0 on `wasm32-unknown-unknown`, which has no clock.
pub fn now_ms() -> u32 {
    #[cfg(target_os = "wasi")]
    {
        static START: spin::Once<std::time::Instant> = spin::Once::new();
        let start = *START.call_once(std::time::Instant::now);
        start.elapsed().as_millis() as u32
    }
    #[cfg(not(target_os = "wasi"))]
    {
        0
    }
}

/// WASI's `poll_oneoff` (std's sleep); nothing on `wasm32-unknown-unknown`.
pub fn sleep_ms(ms: usize) {
    #[cfg(target_os = "wasi")]
    std::thread::sleep(std::time::Duration::from_millis(ms as u64));
    #[cfg(not(target_os = "wasi"))]
    let _ = ms;
}

/// No background thread: there is nothing it could give back.
pub fn spawn_purger(_body: fn()) -> bool {
    false
}

#[cfg(all(poolalloc_wasm_threads, target_os = "wasi"))]
mod exit {
    use core::ffi::c_void;
    use core::ptr;

    // wasi-libc's pthread keys (musl's), whose destructors run as a thread exits.
    unsafe extern "C" {
        fn pthread_key_create(
            key: *mut u32,
            dtor: Option<unsafe extern "C" fn(*mut c_void)>,
        ) -> i32;
        fn pthread_setspecific(key: u32, value: *const c_void) -> i32;
    }

    static HOOK: super::super::Hook = super::super::Hook::new();
    static KEY: spin::Once<Option<u32>> = spin::Once::new();

    unsafe extern "C" fn on_key_destroyed(_: *mut c_void) {
        HOOK.call();
    }

    pub fn watch_thread_exit(hook: fn()) {
        HOOK.set(hook);
        let key = KEY.call_once(|| {
            let mut k = 0u32;
            // SAFETY: k is a valid out-pointer; the destructor is a plain function living forever.
            let r = unsafe { pthread_key_create(&mut k, Some(on_key_destroyed)) };
            (r == 0).then_some(k)
        });
        if let Some(k) = *key {
            // Any non-null value makes the destructor run at exit.
            // SAFETY: k is a key created above.
            unsafe { pthread_setspecific(k, ptr::dangling::<u8>().cast()) };
        }
    }
}
#[cfg(all(poolalloc_wasm_threads, target_os = "wasi"))]
pub use exit::watch_thread_exit;

/// One thread that never exits before the module, or (threaded wasm without libc) no way to
/// hear of an exit.
#[cfg(not(all(poolalloc_wasm_threads, target_os = "wasi")))]
pub fn watch_thread_exit(_hook: fn()) {}

pub fn write_stderr(msg: &[u8]) {
    super::fallback::write_stderr(msg)
}
