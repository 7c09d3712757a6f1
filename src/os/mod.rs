//! The operating system, behind one contract. Every service poolalloc needs from the OS is a
//! function (or, for the heap's TLS word, a macro) of this module; no other module names `libc` or a
//! Windows API. One file per platform family implements the contract:
//!
//! | file          | platforms                                           | backend  |
//! |---------------|-----------------------------------------------------|----------|
//! | `unix.rs`     | Linux (glibc, musl), macOS, FreeBSD; 64- and 32-bit | `Pools`  |
//! | `windows.rs`  | Windows, 64-bit                                     | `Pools`  |
//! | `wasm.rs`     | wasm32: unknown-unknown, wasip1, wasip1-threads     | `Pools`  |
//! | `fallback.rs` | everything else (32-bit Windows, no port)           | `System` |
//!
//! Which file serves a target is decided in `build.rs` (the cfgs `poolalloc_port` and
//! `poolalloc_pools`), nowhere else.
//!
//! On a platform with no port the pools are not compiled at all: `PoolAlloc` forwards every call
//! to `std::alloc::System` ([`BACKEND`] says which is live), and the fallback file provides only
//! what the parts that remain (statistics, the `testing` feature) need.
//!
//! # The rules every service keeps
//!
//! 1. **No allocation.** A service never allocates through the global allocator (it may be that
//!    allocator): no `Vec`, no `String`, no `std::thread::spawn`, no formatting into a `String`.
//! 2. **No lock of ours.** A service takes none of poolalloc's locks and calls back into none of
//!    its code, except where it says so (the thread-exit hook, the fork hooks, the purger's body),
//!    and then only when the OS calls it, never from inside the service call. OS-internal locks
//!    (the loader's, the kernel's) are the OS's business.
//! 3. **No unwinding.** Nothing here panics; failure is a return value (null, `false`, `None`).
//!    The one exception is [`fatal_write_and_abort`], which does not return at all.
//! 4. **Failure leaves the rest intact.** A refused mapping returns null and changes nothing; the
//!    caller hands null to its caller, and every other block stays as it was.
//!
//! # The services
//!
//! Memory (all sizes and addresses multiples of [`page_size`]):
//! - [`map`]: fresh, zeroed, committed read-write memory. [`map_aligned`]: the same, its start a
//!   multiple of `align`. [`map_sparse`]: zeroed address space of which only touched pages cost
//!   memory (a large table).
//! - [`reserve_inaccessible`]: address space that faults on any access (no memory).
//! - [`reserve_aligned`], [`commit`], [`decommit`]: an arena's range, used in parts. Windows
//!   reserves, then commits and decommits each part; elsewhere the range is an aligned mapping
//!   whose parts cost memory once touched, a commit is nothing and a decommit a [`purge`].
//! - [`unmap`]: gives back a whole mapping made here (from its start, of its current length).
//!   [`unmap_part`]: gives back the memory of part of one; where [`PARTIAL_UNMAP`] is false
//!   (Windows) the part's address space stays reserved until its mapping is unmapped whole.
//! - [`purge`]: decommits a range: its memory goes back to the OS, the range stays usable and
//!   reads as zero afterwards. Where [`RETURNS_MEMORY`] is false (wasm32: linear memory only
//!   grows) nothing goes back, whether purged or unmapped; a purge only zeroes, so the callers keep
//!   such memory for reuse instead of purging it.
//! - [`protect`]: makes a range read-only or read-write (`hardened`).
//! - [`grow_in_place`] and [`move_pages`]: an optional remap (Linux's `mremap`); where there is
//!   none they return `false` and the caller copies.
//! - [`advise_huge`]: asks for transparent huge pages (Linux); [`huge_page_size`]: their size,
//!   the kernel's (read once) or what the page size implies.
//!
//! Threads and the process:
//! - [`tls_word!`]: a thread's heap pointer, const-initialised, with no destructor.
//! - [`watch_thread_exit`]: the hook runs when the calling thread exits.
//! - [`at_fork`]: hooks around `fork` (nothing where there is no fork).
//! - [`spawn_purger`], [`sleep_ms`]: the background purger's thread, detached, small stack.
//! - `watch_user_signal` (Unix only): sets a flag on `SIGUSR2`, unless the program handles that
//!   signal itself (the profiler's dump on demand).
//! - [`yield_now`]: gives the core away (the lock's back-off); [`thread_id`]: a number of the
//!   calling thread's, never 0, unique among live threads, read without allocating (the lock's
//!   holder record in test builds).
//! - [`random_seed`]: entropy for the `hardened` keys (never fails: falls back to the clock and
//!   addresses). [`now_ms`]: a coarse monotonic clock. [`rss_bytes`]: the resident set.
//! - [`write_stderr`], [`fatal_write_and_abort`]: a message to stderr without allocating (and
//!   then abort). [`for_each_env`]: the environment's entries, read without allocating.
//!   [`privileged`]: whether the process runs with privileges its invoker lacks (setuid,
//!   setgid, file capabilities: Linux's `AT_SECURE`, the BSDs' and macOS's `issetugid`), so
//!   that nothing from the environment may steer it.
//!   [`at_exit`]: a hook when the process exits normally; [`run_at_start!`]: a function run
//!   before `main` (or when the shared library is loaded).
//! - [`is_stack_or_image`], [`is_unmapped`]: whether a pointer is certainly no heap memory
//!   (`hardened`'s check of a pointer freed that is not ours).
//! - [`copy_readable`]: copies memory that may not all be mapped, without faulting (the C
//!   library's realloc of a block it did not allocate). [`trim_system_allocator`]: asks the
//!   system allocator to return its free memory (glibc's `malloc_trim`; nothing elsewhere).
//!   [`keep_system_allocator_blocks`]: asks it to keep freed large blocks for reuse instead of
//!   unmapping each at `free` (glibc's `mallopt` thresholds; nothing elsewhere).
//!
//! # Faults
//!
//! Unit tests (`cfg(test)`) can make the next mapping calls of the calling thread fail
//! ([`fault::fail_maps`], [`fault::fail_remaps`]), to check that every caller turns a refusal into a null pointer and
//! loses nothing.

/// Declares `mod $m { pub fn get() -> *mut $T; pub fn set(*mut $T) }` over `thread_local!`: the
/// calling thread's TLS word, starting out as the address of the static `$init` (a `$T` or a
/// `repr(transparent)` wrapper of one). Const-initialised and without a destructor, so it never
/// allocates and never registers anything with the runtime. The backends re-export this as
/// `tls_word!` where they have nothing faster.
#[allow(unused_macros)]
macro_rules! tls_word_std {
    (mod $m:ident: $T:ty = $init:path) => {
        mod $m {
            use super::*;
            use core::cell::Cell;

            std::thread_local! {
                static WORD: Cell<*mut $T> =
                    const { Cell::new((&raw const $init).cast::<$T>().cast_mut()) };
            }

            #[inline(always)]
            pub fn get() -> *mut $T {
                WORD.with(|s| s.get())
            }

            #[inline(always)]
            pub fn set(h: *mut $T) {
                WORD.with(|s| s.set(h))
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use tls_word_std;

#[cfg(poolalloc_port = "unix")]
#[allow(dead_code)] // The whole contract; a build uses what its features need.
mod unix;
#[cfg(poolalloc_port = "unix")]
use unix as imp;

#[cfg(poolalloc_port = "windows")]
#[allow(dead_code)]
mod windows;
#[cfg(poolalloc_port = "windows")]
use windows as imp;

#[cfg(poolalloc_port = "wasm")]
#[allow(dead_code)]
mod wasm;
#[cfg(poolalloc_port = "wasm")]
use wasm as imp;

// Where there is no port, the whole contract; on wasm32, the services that need nothing but
// `std` (the wasm file re-exports them).
#[cfg(any(not(poolalloc_pools), poolalloc_port = "wasm"))]
#[allow(dead_code)]
mod fallback;
#[cfg(not(poolalloc_pools))]
use fallback as imp;

#[cfg(poolalloc_port = "unix")]
#[allow(unused_imports)]
pub use imp::watch_user_signal;
#[allow(unused_imports)]
pub use imp::{
    BACKEND, PARTIAL_UNMAP, RETURNS_MEMORY, at_exit, at_fork, copy_readable, fatal_write_and_abort,
    for_each_env, keep_stderr, keep_system_allocator_blocks, now_ms, privileged, random_seed,
    rss_bytes, sleep_ms, spawn_purger, thread_id, trim_system_allocator, watch_thread_exit,
    write_stderr, yield_now,
};
pub(crate) use imp::{run_at_start, tls_word};
#[cfg(poolalloc_port = "windows")]
pub use imp::{tls_get, tls_set};

use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Every address the OS hands to user space lies below `2^ADDRESS_BITS`: 47 bits on x86-64 (Linux,
/// macOS, Windows, FreeBSD without LA57 opt-in), 48 on other 64-bit targets (AArch64 Linux with
/// 48-bit virtual addresses hands out addresses up to 2^48 by default; macOS on Apple silicon
/// stays below 2^47), and the whole word on 32-bit targets: a 32-bit process under a 64-bit
/// kernel (i686 or armv7 on x86-64 or AArch64) is given addresses up to 4 GiB, so no bit of a
/// pointer is free there.
pub const ADDRESS_BITS: u32 = if cfg!(target_pointer_width = "32") {
    32
} else if cfg!(target_arch = "x86_64") {
    47
} else {
    48
};

/// Which allocator serves `PoolAlloc` in this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// poolalloc's own pools (a platform with a port).
    Pools,
    /// `std::alloc::System`: no port for this platform; `PoolAlloc` forwards every call.
    System,
}

/// A function the OS calls back later (at thread exit, around fork, at exit, as a thread's body),
/// kept in a static: set before the OS can call it, then called from an `extern` trampoline.
pub(crate) struct Hook(AtomicPtr<()>);

impl Hook {
    pub(crate) const fn new() -> Self {
        Hook(AtomicPtr::new(core::ptr::null_mut()))
    }

    pub(crate) fn set(&self, f: fn()) {
        self.0.store(f as *mut (), Ordering::Release);
    }

    /// Calls the function set last; nothing if none was.
    pub(crate) fn call(&self) {
        let p = self.0.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: only `set` stores here, and it stores a `fn()`.
            let f = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
            f();
        }
    }
}

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The OS page size, read once (a power of two; 4 KiB, 16 KiB and 64 KiB are all met in practice,
/// so nothing may assume one).
#[inline]
pub fn page_size() -> usize {
    let p = PAGE_SIZE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = imp::page_size();
    debug_assert!(p.is_power_of_two());
    PAGE_SIZE.store(p, Ordering::Relaxed);
    p
}

static HUGE_PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The size of a transparent huge page, read once (a power of two, a multiple of [`page_size`]):
/// the kernel's where it says (Linux: `/sys/kernel/mm/transparent_hugepage/hpage_pmd_size`), else
/// what the page size implies ([`huge_page_size_for`]). 2 MiB on x86-64 and on AArch64 with 4 KiB
/// pages, but 32 MiB and 512 MiB on AArch64 with 16 KiB and 64 KiB pages: nothing may assume one.
/// A size only: whether huge pages can be had is [`advise_huge`]'s answer.
pub fn huge_page_size() -> usize {
    let h = HUGE_PAGE_SIZE.load(Ordering::Relaxed);
    if h != 0 {
        return h;
    }
    let page = page_size();
    // Miri, isolated from the file system, would stop at the read: what the page size implies.
    let told = if cfg!(miri) {
        None
    } else {
        imp::huge_page_size()
    };
    let h = told
        .filter(|&h| h.is_power_of_two() && h >= page)
        .unwrap_or_else(|| huge_page_size_for(page));
    HUGE_PAGE_SIZE.store(h, Ordering::Relaxed);
    h
}

/// The huge page that pages of `page` bytes imply where the OS does not say: on a 64-bit target
/// one page of the page table maps `page / 8` pages (8-byte entries), and a huge page is what the
/// next level's entry maps, `page * page / 8`; on a 32-bit target 2 MiB (x86 with PAE, ARM with
/// LPAE).
pub fn huge_page_size_for(page: usize) -> usize {
    if cfg!(target_pointer_width = "64") {
        page.saturating_mul(page / 8)
    } else {
        2 << 20
    }
}

/// `size` bytes of fresh, zeroed, committed read-write memory; null when the OS refuses.
pub fn map(size: usize) -> *mut u8 {
    if fault::take() {
        return core::ptr::null_mut();
    }
    imp::map(size)
}

/// As [`map`], the start a multiple of `align` (a power of two, at least the page size). The
/// result is a mapping of its own: [`unmap`] takes it from its start.
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    if fault::take() {
        return core::ptr::null_mut();
    }
    imp::map_aligned(size, align)
}

/// Address space of `size` bytes at a multiple of `align` (a power of two, at least the page
/// size), of which parts are used once [`commit`]ted and given back by [`decommit`] (the arenas'
/// ranges); null when the OS refuses. Where committing is a separate step (Windows) the space
/// costs no memory or commit charge and faults until committed; elsewhere it is a [`map_aligned`]
/// mapping, whose pages cost memory once touched. [`unmap`] takes it whole.
pub fn reserve_aligned(size: usize, align: usize) -> *mut u8 {
    if fault::take() {
        return core::ptr::null_mut();
    }
    #[cfg(poolalloc_port = "windows")]
    return imp::reserve_aligned(size, align);
    #[cfg(not(poolalloc_port = "windows"))]
    imp::map_aligned(size, align)
}

/// Makes `[p, p + size)`, a page-aligned part of a [`reserve_aligned`] space, usable read-write
/// and zero; false, changing nothing, where the OS refuses (Windows: the commit limit). Nothing
/// to do elsewhere (the pages come on first touch).
///
/// # Safety
/// The range lies inside one space made by [`reserve_aligned`], and is decommitted (or was never
/// committed).
pub unsafe fn commit(p: *mut u8, size: usize) -> bool {
    #[cfg(poolalloc_port = "windows")]
    // SAFETY: forwarded contract.
    return unsafe { imp::commit(p, size) };
    #[cfg(not(poolalloc_port = "windows"))]
    {
        let _ = (p, size);
        true
    }
}

/// Gives the memory of `[p, p + size)`, a page-aligned part of a [`reserve_aligned`] space, back
/// to the OS until it is [`commit`]ted again, which makes it read as zero. Windows decommits
/// (the range faults meanwhile, and its commit charge goes back); elsewhere it is a [`purge`].
///
/// # Safety
/// The range lies inside one space made by [`reserve_aligned`], is page aligned, and holds
/// nothing anyone needs; nothing touches it before it is committed again.
pub unsafe fn decommit(p: *mut u8, size: usize) {
    #[cfg(poolalloc_port = "windows")]
    // SAFETY: forwarded contract.
    unsafe {
        imp::unmap_part(p, size)
    };
    #[cfg(not(poolalloc_port = "windows"))]
    // SAFETY: forwarded contract (a reserved space is a mapping made here).
    unsafe {
        purge(p, size)
    };
}

/// `size` bytes of zeroed read-write address space of which only the pages touched cost memory
/// (for a large, sparsely used table); null when the OS refuses.
pub fn map_sparse(size: usize) -> *mut u8 {
    if fault::take() {
        return core::ptr::null_mut();
    }
    imp::map_sparse(size)
}

/// Address space of `size` bytes (a page multiple) that faults on any access and costs no memory;
/// null where the OS cannot give such (wasm32) or refuses. Never given back. (`hardened`'s
/// zero-size blocks.)
#[cfg_attr(not(feature = "hardened"), allow(dead_code))]
pub fn reserve_inaccessible(size: usize) -> *mut u8 {
    imp::reserve_inaccessible(size)
}

/// Gives back a whole mapping.
///
/// # Safety
/// `p` is the start of a mapping made by this module and `size` its length (as made, or as left
/// by [`unmap_part`] of its tail); nothing touches it again.
pub unsafe fn unmap(p: *mut u8, size: usize) {
    // SAFETY: forwarded contract.
    unsafe { imp::unmap(p, size) }
}

/// Gives back the memory of `[p, p + size)`, a page-aligned part of a mapping made here. Where
/// [`PARTIAL_UNMAP`] is true the address space goes too; elsewhere it stays reserved (and
/// inaccessible) until the mapping is unmapped whole.
///
/// # Safety
/// The range lies inside one mapping made by this module, is page aligned, and nothing touches
/// it again.
pub unsafe fn unmap_part(p: *mut u8, size: usize) {
    // SAFETY: forwarded contract.
    unsafe { imp::unmap_part(p, size) }
}

/// Gives the memory of `[p, p + size)` back to the OS; the range stays usable and reads as zero
/// afterwards (the chunk source relies on a purged header reading as zero).
///
/// # Safety
/// The range lies inside a mapping made by this module, is page aligned, and holds nothing
/// anyone needs.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: forwarded contract.
    unsafe { imp::purge(p, size) }
}

/// Asks the OS to back `[p, p + size)` with huge pages where it can (Linux transparent huge pages:
/// `MADV_HUGEPAGE`); `false` where it cannot or will not (THP `never`, another OS). A hint only:
/// the range behaves as before either way.
///
/// # Safety
/// The range lies inside one mapping made by this module and is page aligned.
pub unsafe fn advise_huge(p: *mut u8, size: usize) -> bool {
    // SAFETY: forwarded contract.
    unsafe { imp::advise_huge(p, size) }
}

/// Grows the mapping `[p, p + old)` to `new` bytes where it lies, if the address space after it
/// is free and the OS can remap; `false` (changing nothing) otherwise.
///
/// # Safety
/// `[p, p + old)` is a whole mapping made by this module; `new > old`, both page multiples.
pub unsafe fn grow_in_place(p: *mut u8, old: usize, new: usize) -> bool {
    if fault::take_remap() {
        return false;
    }
    // SAFETY: forwarded contract.
    unsafe { imp::grow_in_place(p, old, new) }
}

/// Moves the pages of the mapping `[src, src + len)` onto `dst`, a fresh mapping of `new_len`
/// bytes, without copying: afterwards `dst` holds the old contents (then zeros) and `src` is
/// unmapped. `false` where the OS cannot, with both mappings unchanged: the caller copies.
///
/// # Safety
/// Both are whole mappings made by this module, distinct, `new_len >= len`; nobody else uses them.
pub unsafe fn move_pages(src: *mut u8, len: usize, dst: *mut u8, new_len: usize) -> bool {
    if fault::take_remap() {
        return false;
    }
    // SAFETY: forwarded contract.
    unsafe { imp::move_pages(src, len, dst, new_len) }
}

/// Makes `[p, p + size)` read-only (`writable` false: a write faults) or read-write again (also
/// a [`guard`]); false where the OS refuses (`hardened`'s freed large blocks waiting for reuse,
/// and the guards of an arena's spans when their granules are cut again).
///
/// # Safety
/// The range lies inside one mapping made by this module and is page aligned; nobody writes to
/// it while it is read-only.
pub unsafe fn protect(p: *mut u8, size: usize, writable: bool) -> bool {
    // SAFETY: forwarded contract.
    unsafe { imp::protect(p, size, writable) }
}

/// Whether [`guard`] can make address space inaccessible on this port (Unix only: elsewhere a
/// guard below a region would be a reservation the region's release does not start at, which
/// Windows cannot free in part).
pub const HAS_GUARD: bool = cfg!(poolalloc_port = "unix");

/// Makes `[p, p + size)` inaccessible (any access faults) until [`protect`] makes it writable
/// again (the guards of `hardened`: below a region of chunks, for good; around an arena's span,
/// until the granules are cut for another); false, changing nothing, where the OS refuses or
/// cannot (every port but Unix).
///
/// # Safety
/// The range lies inside one mapping made by this module and is page aligned; nothing in it is
/// used while it is inaccessible.
pub unsafe fn guard(p: *mut u8, size: usize) -> bool {
    #[cfg(poolalloc_port = "unix")]
    // SAFETY: forwarded contract.
    return unsafe { imp::guard(p, size) };
    #[cfg(not(poolalloc_port = "unix"))]
    {
        let _ = (p, size);
        false
    }
}

/// True when `p` is certainly not heap memory: in the calling thread's stack above its current
/// frame, or inside the image (code, data, bss) of a loaded object other than the dynamic loader
/// (whose early allocator hands blocks out of its own bss). False when unsure, and on systems
/// where it cannot tell (everything but Linux). May take the loader's lock; allocates nothing.
#[cfg_attr(not(feature = "hardened"), allow(dead_code))]
pub fn is_stack_or_image(p: *const u8) -> bool {
    imp::is_stack_or_image(p)
}

/// True when nothing at all is mapped at `p`'s page (so no allocator's block can be there). False
/// when unsure, and on systems where it cannot tell (everything but Linux and wasm32). A system
/// call; allocates nothing.
#[cfg_attr(not(feature = "hardened"), allow(dead_code))]
pub fn is_unmapped(p: *const u8) -> bool {
    imp::is_unmapped(p)
}

/// Injected OS failures for unit tests: the calling thread's next `n` calls that map (or, apart,
/// that remap) fail as if the OS refused. Compiled to nothing outside `cfg(test)`.
pub mod fault {
    #[cfg(test)]
    use core::cell::Cell;

    #[cfg(test)]
    std::thread_local! {
        static MAPS: Cell<usize> = const { Cell::new(0) };
        static REMAPS: Cell<usize> = const { Cell::new(0) };
    }

    /// Makes the calling thread's next `n` map calls (`map`, `map_aligned`, `map_sparse`) fail.
    #[cfg(test)]
    pub fn fail_maps(n: usize) {
        MAPS.with(|f| f.set(n));
    }

    /// Makes the calling thread's next `n` remap calls (`grow_in_place`, `move_pages`) fail.
    #[cfg(test)]
    pub fn fail_remaps(n: usize) {
        REMAPS.with(|f| f.set(n));
    }

    /// Injected map failures not yet used up (0 when every one was hit).
    #[cfg(test)]
    pub fn pending() -> usize {
        MAPS.with(|f| f.get())
    }

    #[cfg(test)]
    fn take_from(c: &'static std::thread::LocalKey<Cell<usize>>) -> bool {
        c.with(|f| {
            let n = f.get();
            if n > 0 {
                f.set(n - 1);
            }
            n > 0
        })
    }

    /// True when this map call must fail (and counts it).
    #[inline(always)]
    pub(super) fn take() -> bool {
        #[cfg(test)]
        {
            take_from(&MAPS)
        }
        #[cfg(not(test))]
        {
            false
        }
    }

    /// True when this remap call must fail (and counts it).
    #[inline(always)]
    pub(super) fn take_remap() -> bool {
        #[cfg(test)]
        {
            take_from(&REMAPS)
        }
        #[cfg(not(test))]
        {
            false
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
        assert!(page_size() >= 4096);
    }

    #[test]
    fn aligned_map_is_aligned_zeroed_purgeable_and_unmappable_in_parts() {
        let align = 256 * 1024;
        let p = map_aligned(4 * align, align);
        assert!(!p.is_null());
        assert_eq!(p as usize % align, 0);
        // SAFETY: p is a fresh mapping of 4·align bytes.
        unsafe {
            assert_eq!(*p, 0);
            assert_eq!(*p.add(4 * align - 1), 0);
            p.write_bytes(7, 4 * align);
            purge(p, 4 * align);
            assert_eq!(*p.add(100), 0);
            assert_eq!(*p.add(4 * align - 1), 0);
            p.write_bytes(9, align);
            unmap_part(p.add(2 * align), 2 * align);
            assert_eq!(*p.add(align - 1), 9);
            unmap(p, 2 * align);
        }
    }

    #[test]
    fn sparse_and_plain_maps_are_zeroed() {
        let p = map_sparse(64 << 20);
        let q = map(3 * page_size());
        assert!(!p.is_null() && !q.is_null());
        // SAFETY: fresh mappings of those sizes.
        unsafe {
            assert_eq!(*p.add(40 << 20), 0);
            *p.add(40 << 20) = 1;
            assert_eq!(*q.add(3 * page_size() - 1), 0);
            unmap(p, 64 << 20);
            unmap(q, 3 * page_size());
        }
    }

    #[test]
    fn remap_grows_or_says_no_and_moves_or_says_no() {
        let pg = page_size();
        let p = map_aligned(4 * pg, pg);
        assert!(!p.is_null());
        // SAFETY: p is a fresh mapping of 4 pages; the remaps below keep the contract.
        unsafe {
            p.write_bytes(5, 4 * pg);
            let len = if grow_in_place(p, 4 * pg, 8 * pg) {
                assert_eq!(*p.add(8 * pg - 1), 0);
                8 * pg
            } else {
                4 * pg
            };
            let dst = map_aligned(16 * pg, pg);
            assert!(!dst.is_null());
            if move_pages(p, len, dst, 16 * pg) {
                assert_eq!(*dst.add(4 * pg - 1), 5);
                assert_eq!(*dst.add(16 * pg - 1), 0);
            } else {
                assert_eq!(*p.add(4 * pg - 1), 5);
                unmap(p, len);
            }
            unmap(dst, 16 * pg);
        }
    }

    #[test]
    fn injected_faults_refuse_maps_then_stop() {
        fault::fail_maps(2);
        assert!(map(page_size()).is_null());
        assert!(map_aligned(1 << 18, 1 << 18).is_null());
        assert_eq!(fault::pending(), 0);
        let p = map(page_size());
        assert!(!p.is_null());
        // SAFETY: fresh mapping.
        unsafe { unmap(p, page_size()) };
    }

    #[test]
    fn clock_is_monotonic_and_moves() {
        let a = now_ms();
        sleep_ms(30);
        let b = now_ms();
        assert!(
            b.wrapping_sub(a) >= 10 && b.wrapping_sub(a) < 10_000,
            "{a} -> {b}"
        );
    }

    /// The huge page is the kernel's where it says (AArch64 with 64 KiB pages: 512 MiB), else
    /// what the page size implies (issue 41: a 2 MiB constant stood for it).
    #[test]
    fn huge_page_size_is_the_kernels_or_what_the_page_size_implies() {
        let h = huge_page_size();
        assert!(h.is_power_of_two() && h >= page_size(), "{h}");
        let kernel = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok());
        match kernel {
            Some(k) if cfg!(target_os = "linux") => assert_eq!(h, k),
            _ => assert_eq!(h, huge_page_size_for(page_size())),
        }
        if cfg!(target_pointer_width = "64") {
            assert_eq!(huge_page_size_for(4 << 10), 2 << 20);
            assert_eq!(huge_page_size_for(16 << 10), 32 << 20);
            assert_eq!(huge_page_size_for(64 << 10), 512 << 20);
        }
    }

    #[test]
    fn rss_is_reported() {
        assert!(rss_bytes().unwrap() > 0);
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(random_seed(), random_seed());
    }

    #[test]
    fn copy_readable_copies_what_is_mapped() {
        let src = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let mut dst = [0u8; 8];
        // SAFETY: both buffers are valid for 8 bytes.
        unsafe { copy_readable(src.as_ptr(), dst.as_mut_ptr(), 8) };
        assert_eq!(src, dst);
    }
}
