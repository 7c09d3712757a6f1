//! Pages from the OS: map, unmap, purge, and the page size read at run time.
//!
//! Everything here is a thin wrapper over `libc`; nothing allocates.

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The OS page size, read once with `sysconf` (4 KiB is only the fallback if that fails).
pub fn page_size() -> usize {
    let p = PAGE_SIZE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let r = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if r > 0 { r as usize } else { 4096 };
    PAGE_SIZE.store(p, Ordering::Relaxed);
    p
}

/// Maps `size` bytes of fresh, zeroed, read-write memory; null on failure.
pub fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no existing
    // memory; the result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Maps `size` bytes of zeroed read-write address space without reserving swap for it
/// (MAP_NORESERVE): for large, sparsely touched tables. Null on failure.
pub fn reserve(size: usize) -> *mut u8 {
    if cfg!(miri) {
        // Miri knows only MAP_PRIVATE | MAP_ANONYMOUS.
        return map(size);
    }
    // SAFETY: as in `map`.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Maps `size` bytes aligned to `align` (a power of two, a multiple of the page size); null on
/// failure. Over-maps by `align` and unmaps the unaligned head and tail.
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    let Some(total) = size.checked_add(align) else {
        return ptr::null_mut();
    };
    let raw = map(total);
    if raw.is_null() {
        return raw;
    }
    let addr = raw as usize;
    let start = (addr + align - 1) & !(align - 1);
    let head = start - addr;
    let tail = total - head - size;
    // SAFETY: [raw, raw+head) and [start+size, start+size+tail) lie inside the mapping just made and
    // nothing else refers to them.
    unsafe {
        if head != 0 {
            unmap(raw, head);
        }
        if tail != 0 {
            unmap(raw.add(head + size), tail);
        }
        raw.add(head)
    }
}

/// Unmaps `[p, p+size)`.
///
/// # Safety
/// The range must be a whole mapped range from [`map`] or [`map_aligned`] (or part of one) that
/// nothing will touch again.
pub unsafe fn unmap(p: *mut u8, size: usize) {
    // SAFETY: guaranteed by the caller. munmap of a valid range only fails on bad arguments.
    unsafe {
        libc::munmap(p.cast(), size);
    }
}

/// Gives the physical pages of `[p, p+size)` back to the OS; the range stays mapped and reads as
/// zero afterwards. `MADV_DONTNEED`, not `MADV_FREE`: freed-but-lazy pages stay in RSS (snmalloc#846).
///
/// # Safety
/// The range must be mapped by this module, page aligned, and hold nothing anyone needs.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        libc::madvise(p.cast(), size, libc::MADV_DONTNEED);
    }
}

/// A coarse monotonic clock in milliseconds (wrapping), cheap enough for the slow path.
pub fn now_ms() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000) as u32
}

/// The process's resident set size in bytes, from `/proc/self/statm`, read without allocating.
pub fn rss_bytes() -> Option<usize> {
    let mut buf = [0u8; 128];
    // SAFETY: the path is a NUL-terminated literal; the fd is closed on every path below.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: buf is valid for buf.len() bytes of writes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: fd is an open descriptor owned here.
    unsafe { libc::close(fd) };
    if n <= 0 {
        return None;
    }
    // statm: "size resident shared text lib data dt", in pages.
    let mut fields = buf[..n as usize].split(|&b| b == b' ');
    fields.next()?;
    let resident = fields.next()?;
    let mut pages = 0usize;
    for &d in resident {
        if !d.is_ascii_digit() {
            return None;
        }
        pages = pages * 10 + (d - b'0') as usize;
    }
    Some(pages * page_size())
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }

    #[test]
    fn aligned_map_is_aligned_zeroed_and_purgeable() {
        let align = 256 * 1024;
        let p = map_aligned(4 * align, align);
        assert!(!p.is_null());
        assert_eq!(p as usize % align, 0);
        // SAFETY: p is a fresh mapping of 4·align bytes.
        unsafe {
            assert_eq!(*p, 0);
            p.write_bytes(7, 4 * align);
            purge(p, 4 * align);
            assert_eq!(*p.add(100), 0);
            unmap(p, 4 * align);
        }
    }

    #[test]
    fn rss_is_reported() {
        assert!(rss_bytes().unwrap() > 0);
    }
}
