//! The OS contract (see `mod.rs`) where poolalloc has no port (wasm32, 32-bit targets, any OS
//! without a file here): the pools are not compiled and `PoolAlloc` forwards to
//! `std::alloc::System`. What remains (statistics, the `testing` feature's tables, the lock, the
//! fatal message) uses the few services below, built on `std` alone:
//! - memory comes from `System`, page aligned; there is no aligned map, remap or purge to speak
//!   of (a purge zeroes);
//! - no thread-exit hook, no fork, no purger thread (nothing to purge), no clock (0), no
//!   resident-set reading.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;
use std::alloc::System;

/// The allocator `PoolAlloc` uses here.
pub const BACKEND: super::Backend = super::Backend::System;

/// Nothing here hands back part of a block.
pub const PARTIAL_UNMAP: bool = false;

/// Nothing here gives memory back (the pools do not run).
pub const RETURNS_MEMORY: bool = false;

pub fn page_size() -> usize {
    if cfg!(target_family = "wasm") {
        65536
    } else {
        4096
    }
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.max(1), page_size()).ok()
}

pub fn map(size: usize) -> *mut u8 {
    match layout(size) {
        // SAFETY: the layout has a non-zero size.
        Some(l) => unsafe { System.alloc_zeroed(l) },
        None => ptr::null_mut(),
    }
}

pub fn map_sparse(size: usize) -> *mut u8 {
    map(size)
}

/// Not available here: no memory here faults on access.
pub fn reserve_inaccessible(_size: usize) -> *mut u8 {
    ptr::null_mut()
}

/// Not available here: nothing that remains without the pools asks for it.
pub fn map_aligned(_size: usize, _align: usize) -> *mut u8 {
    ptr::null_mut()
}

/// # Safety
/// See `os::unmap`: `p` came from [`map`] or [`map_sparse`] with this `size`.
pub unsafe fn unmap(p: *mut u8, size: usize) {
    if let Some(l) = layout(size) {
        // SAFETY: p was allocated by System with this layout (caller).
        unsafe { System.dealloc(p, l) };
    }
}

/// # Safety
/// See `os::unmap_part`. The memory stays with the block until it is unmapped whole.
pub unsafe fn unmap_part(_p: *mut u8, _size: usize) {}

/// # Safety
/// See `os::purge`.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: the range is ours and unused (caller).
    unsafe { ptr::write_bytes(p, 0, size) };
}

/// # Safety
/// See `os::protect`.
pub unsafe fn protect(_p: *mut u8, _size: usize, _writable: bool) -> bool {
    false
}

/// See `os::is_stack_or_image`.
pub fn is_stack_or_image(_p: *const u8) -> bool {
    false
}

/// See `os::is_unmapped`: not told here.
pub fn is_unmapped(_p: *const u8) -> bool {
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

#[allow(unused_imports)]
pub(crate) use super::tls_word_std as tls_word;

pub fn watch_thread_exit(_hook: fn()) {}

pub fn at_fork(_prepare: fn(), _parent: fn(), _child: fn()) {}

pub fn spawn_purger(_body: fn()) -> bool {
    false
}

pub fn sleep_ms(_ms: usize) {}

/// The address of a byte of this thread's own (`std`'s thread-locals: native where there are
/// threads, a static where there are none), never 0.
pub fn thread_id() -> usize {
    std::thread_local! {
        static ID: u8 = const { 0 };
    }
    ID.with(|b| ptr::from_ref(b) as usize)
}

#[inline]
pub fn yield_now() {
    core::hint::spin_loop();
}

pub fn now_ms() -> u32 {
    0
}

pub fn random_seed() -> [usize; 3] {
    let local = 0u8;
    [
        &local as *const u8 as usize,
        random_seed as *const () as usize,
        0x9e37_79b9,
    ]
}

pub fn rss_bytes() -> Option<usize> {
    None
}

/// Stderr stays reachable here: nothing to keep.
pub fn keep_stderr() {}

pub fn write_stderr(msg: &[u8]) {
    use std::io::Write;
    // Writing a byte slice to the unbuffered stderr allocates nothing.
    let _ = std::io::stderr().write_all(msg);
}

pub fn fatal_write_and_abort(msg: &[u8]) -> ! {
    write_stderr(msg);
    std::process::abort()
}

/// No environment is read here (`std::env` allocates).
pub fn for_each_env(_f: &mut dyn FnMut(&[u8])) {}

/// No process here gains privileges from how it was started (no setuid, no environment read).
pub fn privileged() -> bool {
    false
}

pub fn at_exit(_hook: fn()) {}

/// Nothing runs at start here: the settings are read at their first use instead.
macro_rules! run_at_start {
    ($f:path) => {};
}
pub(crate) use run_at_start;

/// # Safety
/// Both ranges are valid for `len` bytes (nothing here copies foreign blocks).
pub unsafe fn copy_readable(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr::copy_nonoverlapping(src, dst, len) };
}

pub fn trim_system_allocator() {}

/// The system heap keeps its own policy.
pub fn keep_system_allocator_blocks() {}

/// No transparent huge pages here: `os::huge_page_size` says what the page size implies.
pub fn huge_page_size() -> Option<usize> {
    None
}

/// # Safety
/// See `os::advise_huge`.
pub unsafe fn advise_huge(_p: *mut u8, _size: usize) -> bool {
    false
}
