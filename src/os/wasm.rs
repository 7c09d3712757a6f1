//! The OS contract on wasm32 (`wasm32-unknown-unknown`, `wasm32-wasip1`, `wasm32-wasip1-threads`).
//! There is no OS to map from: only the module's linear memory, which grows by 64 KiB pages
//! (`memory.grow`) and never shrinks.
//!
//! - **Memory.** Mappings are blocks of the system allocator (dlmalloc), page-sized and aligned as
//!   asked, zeroed; unmapped, they go back to it, so what chunks and spans free serves its large
//!   blocks and later mappings alike. poolalloc never calls `memory.grow` itself: dlmalloc grows
//!   memory in steps it assumes contiguous, and a second allocator growing memory between them on
//!   another thread corrupts its heap (seen under wasi-threads, 2026-11-25, with a free list of
//!   pages of our own that grew memory directly). Nothing ever goes back to the host
//!   ([`RETURNS_MEMORY`] is false): the chunk source keeps empty chunks for any class instead of
//!   purging them, and a [`purge`] only zeroes. Part of a mapping cannot be unmapped
//!   ([`PARTIAL_UNMAP`] is false): chunks are mapped one at a time.
//! - **Threads.** Without shared memory (`wasm32-unknown-unknown`, `wasm32-wasip1`) there is one
//!   thread: the heap's TLS word is a plain static and no thread ever exits before the module ends.
//!   On `wasm32-wasip1-threads` it is a real thread-local (`thread_local!`) and wasi-libc's pthread
//!   keys run the exit hook, as on Unix; on other threaded wasm32 builds (no libc) there is no
//!   exit hook: an exited thread's chunks stay with its heap (documented in docs/platforms.md).
//!   There is no purger thread (nothing could be returned) and no fork.
//! - The rest (clock, stderr, environment, start hooks) is `fallback.rs`'s: what `std` gives.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;
use std::alloc::System;

pub use super::fallback::{
    at_exit, at_fork, copy_readable, fatal_write_and_abort, for_each_env, keep_stderr,
    keep_system_allocator_blocks, privileged, thread_id, trim_system_allocator, yield_now,
};
pub(crate) use super::fallback::{run_at_start, tls_word};

/// The pools run here.
pub const BACKEND: super::Backend = super::Backend::Pools;

/// A mapping is a block of the system allocator's: it goes back whole.
pub const PARTIAL_UNMAP: bool = false;

/// Linear memory never shrinks: nothing goes back to the host.
pub const RETURNS_MEMORY: bool = false;

/// The wasm page: the unit of `memory.grow`.
const PAGE: usize = 65536;

pub fn page_size() -> usize {
    PAGE
}

#[inline]
fn memory_size() -> usize {
    core::arch::wasm32::memory_size::<0>()
}

/// Mappings are whole pages: a size is rounded up to a page, as an OS rounds `mmap`'s.
fn layout(size: usize, align: usize) -> Option<Layout> {
    let size = size.checked_next_multiple_of(PAGE).filter(|&s| s > 0)?;
    Layout::from_size_align(size, align.max(PAGE)).ok()
}

/// Memory comes from the system allocator (dlmalloc: Rust's crate on `wasm32-unknown-unknown`,
/// wasi-libc's on WASI), never from `memory.grow` directly: dlmalloc assumes that the memory it
/// grows in two steps is contiguous, which a second allocator growing memory on another thread
/// between its steps breaks (a corruption seen under wasi-threads, 2026-11-25). Fresh memory from
/// dlmalloc is zero without a write; reused memory is zeroed by it.
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    match layout(size, align) {
        // SAFETY: the layout has a non-zero size.
        Some(l) => unsafe { System.alloc_zeroed(l) },
        None => ptr::null_mut(),
    }
}

pub fn map(size: usize) -> *mut u8 {
    map_aligned(size, PAGE)
}

/// Linear memory has no lazily backed pages: a sparse mapping is a plain one.
pub fn map_sparse(size: usize) -> *mut u8 {
    map(size)
}

/// Every byte of linear memory can be read and written: nothing faults.
pub fn reserve_inaccessible(_size: usize) -> *mut u8 {
    ptr::null_mut()
}

/// # Safety
/// See `os::unmap`: `p` came from [`map`] or [`map_aligned`] with this `size` (and that alignment,
/// which the system allocator's `free` does not need).
pub unsafe fn unmap(p: *mut u8, size: usize) {
    if let Some(l) = layout(size, PAGE) {
        // SAFETY: p was allocated by System with this size (caller); dlmalloc frees by address.
        unsafe { System.dealloc(p, l) };
    }
}

/// Part of a system allocator's block cannot be given back: it stays with the block until the
/// block is unmapped whole.
///
/// # Safety
/// See `os::unmap_part`.
pub unsafe fn unmap_part(_p: *mut u8, _size: usize) {}

/// Nothing goes back to the host; the range reads as zero afterwards, as the contract says.
///
/// # Safety
/// See `os::purge`.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: the range is ours and unused (caller).
    unsafe { ptr::write_bytes(p, 0, size) };
}

/// No transparent huge pages here: `os::huge_page_size` says what the page size implies.
pub fn huge_page_size() -> Option<usize> {
    None
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
