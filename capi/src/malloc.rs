//! The C allocation functions, exported unmangled: `malloc`, `free`, `calloc`, `realloc`, ...
//! (the crate's documentation says what they promise).

use core::ffi::c_void;
use core::ptr;
use poolalloc::raw;

/// Runs when the library is loaded (before the program's `main`): reads poolalloc's settings
/// (`POOLALLOC_*`) and arranges the exit report `POOLALLOC_SHOW_STATS` asks for.
extern "C" fn on_load() {
    raw::start();
}

#[used]
#[unsafe(link_section = ".init_array")]
pub(crate) static ON_LOAD: extern "C" fn() = on_load;

/// The alignment `malloc(size)` guarantees.
#[inline(always)]
pub(crate) fn align_for(size: usize) -> usize {
    if size <= 8 { 8 } else { 16 }
}

/// Sizes above this are refused with ENOMEM without trying (glibc refuses above PTRDIFF_MAX).
pub(crate) const MAX_REQUEST: usize = isize::MAX as usize;

#[inline(always)]
fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

#[inline(always)]
fn oom() -> *mut c_void {
    set_errno(libc::ENOMEM);
    ptr::null_mut()
}

/// `malloc(size)`: at least `size` bytes; `malloc(0)` is a unique pointer that `free` takes.
///
/// # Safety
/// Always safe to call; the result is the caller's to free.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    // Sizes above MAX_REQUEST fail in the large path (no span that long can be mapped).
    let p = raw::malloc(size);
    if p.is_null() {
        return oom();
    }
    p.cast()
}

/// `free(p)`: null and pointers that are not ours are ignored.
///
/// # Safety
/// `p` is null or a live block from this allocator (or one it did not hand out, which is left alone).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { raw::free(p.cast()) }
}

/// `calloc(n, size)`: `n * size` zeroed bytes; ENOMEM on overflow.
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size).filter(|&t| t <= MAX_REQUEST) else {
        return oom();
    };
    let p = raw::alloc_zeroed(total, align_for(total));
    if p.is_null() {
        return oom();
    }
    p.cast()
}

/// `realloc(p, size)`: glibc's rules: a null `p` allocates; a zero `size` with a non-null `p` frees
/// it and returns null; on failure `p` is untouched and errno is ENOMEM.
///
/// # Safety
/// `p` is null or a live block from this allocator (or a foreign one, which is copied, not freed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: malloc is always safe to call.
        return unsafe { malloc(size) };
    }
    if size == 0 {
        // SAFETY: forwarded contract.
        unsafe { raw::free(p.cast()) };
        return ptr::null_mut();
    }
    if size > MAX_REQUEST {
        return oom();
    }
    // A span that cannot grow in place tries mremap first, which fails with ENOMEM before the
    // move succeeds: errno must not show that on success.
    // SAFETY: __errno_location returns this thread's errno slot.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: forwarded contract.
    let q = unsafe { raw::realloc(p.cast(), size, align_for(size)) };
    if q.is_null() {
        return oom();
    }
    set_errno(saved);
    q.cast()
}

/// `reallocarray(p, n, size)`: `realloc(p, n * size)` with an overflow check (ENOMEM, `p` untouched).
///
/// # Safety
/// As [`realloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: forwarded contract.
        Some(total) => unsafe { realloc(p, total) },
        None => oom(),
    }
}

/// An aligned block for the memalign family: `align` is a power of two.
fn aligned(align: usize, size: usize) -> *mut c_void {
    if size > MAX_REQUEST {
        return oom();
    }
    let p = raw::alloc(size, align.max(align_for(size)));
    if p.is_null() {
        return oom();
    }
    p.cast()
}

/// `posix_memalign(out, align, size)`: EINVAL unless `align` is a power of two and a multiple of
/// `sizeof(void *)`; ENOMEM when out of memory; errno is left alone.
///
/// # Safety
/// `out` must be valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || align % size_of::<*mut c_void>() != 0 {
        return libc::EINVAL;
    }
    // SAFETY: __errno_location returns this thread's errno slot.
    let saved = unsafe { *libc::__errno_location() };
    let p = aligned(align, size);
    set_errno(saved);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: out is valid for a write (caller).
    unsafe { *out = p };
    0
}

/// `memalign(align, size)`, glibc's way: an alignment that is not a power of two is rounded up to
/// one; one above `SIZE_MAX / 2 + 1` is EINVAL.
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align.max(1).next_power_of_two(), size)
}

/// `aligned_alloc(align, size)`: as [`memalign`] (what glibc 2.36 does; it accepts any
/// alignment and rounds it up to a power of two).
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    // SAFETY: always safe.
    unsafe { memalign(align, size) }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let r = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if r > 0 { r as usize } else { 4096 }
}

/// `valloc(size)`: page-aligned.
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(page_size(), size)
}

/// `pvalloc(size)`: page-aligned, the size rounded up to whole pages (one page for 0).
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    let Some(rounded) = size.max(1).checked_add(page - 1).map(|s| s & !(page - 1)) else {
        return oom();
    };
    aligned(page, rounded)
}

/// `malloc_usable_size(p)`: bytes of the block that may be used; 0 for null and foreign pointers.
///
/// # Safety
/// `p` is null or a live block from this allocator (or a foreign one).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    // SAFETY: forwarded contract.
    unsafe { raw::usable_size(p.cast()) }.unwrap_or(0)
}

/// C23 `free_sized(p, size)`: `free`, the size being a promise we do not need.
///
/// # Safety
/// As [`free`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_sized(p: *mut c_void, _size: usize) {
    // SAFETY: forwarded contract.
    unsafe { raw::free(p.cast()) }
}

/// C23 `free_aligned_sized(p, align, size)`: `free`.
///
/// # Safety
/// As [`free`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_aligned_sized(p: *mut c_void, _align: usize, _size: usize) {
    // SAFETY: forwarded contract.
    unsafe { raw::free(p.cast()) }
}

/// `malloc_trim(pad)`: returns free memory to the OS ([`poolalloc::trim`]'s work); 1 when the
/// resident set shrank, else 0.
///
/// # Safety
/// Always safe to call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_trim(_pad: usize) -> i32 {
    raw::trim() as i32
}

/// Refers to every function of this file and to the constructor, so that the linker keeps them
/// all in an executable that links this library as an rlib (see [`crate::link`]).
pub(crate) fn keep() {
    keep!(
        malloc,
        free,
        calloc,
        realloc,
        reallocarray,
        posix_memalign,
        memalign,
        aligned_alloc,
        valloc,
        pvalloc,
        malloc_usable_size,
        free_sized,
        free_aligned_sized,
        malloc_trim,
    );
    core::hint::black_box(&ON_LOAD);
    // The constructor has run unless the executable was linked without it; either way, once more
    // is harmless.
    raw::start();
}
