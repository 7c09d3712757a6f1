//! The OS contract (see `mod.rs`) on 64-bit Windows, through `windows-sys`.
//!
//! What differs from Unix:
//! - `VirtualAlloc` reserves address space in 64 KiB granules and `VirtualFree(MEM_RELEASE)` frees
//!   only a whole reservation from its start, so [`map_aligned`] finds an aligned place and
//!   reserves exactly there (retrying if another thread takes it first), and [`unmap_part`] only
//!   decommits ([`PARTIAL_UNMAP`] is false): the chunk source then maps chunk by chunk.
//! - purge: decommit, then commit again (fresh pages read as zero; the commit charge stays, the
//!   memory goes back). `MEM_RESET` would keep the old contents readable.
//! - no remap: the caller copies. No fork.
//! - the heap's TLS word: a Win32 TLS index (`TlsGetValue`), not `thread_local!` (see [`tls_word`]).
//! - thread exit: a fiber-local storage callback (`FlsAlloc`), which Windows runs when a thread
//!   exits; it is skipped while the process itself shuts down (other threads are gone by then,
//!   and may have been stopped holding a lock).
//! - the map of the address space (`map_sparse`) is committed (commit charge, no resident memory
//!   until touched: Windows has no overcommit).

use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Security::Authentication::Identity::RtlGenRandom;
use windows_sys::Win32::Storage::FileSystem::WriteFile;
use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE};
use windows_sys::Win32::System::Diagnostics::Debug::ReadProcessMemory;
use windows_sys::Win32::System::Environment::{FreeEnvironmentStringsA, GetEnvironmentStrings};
use windows_sys::Win32::System::Memory::{
    MEM_COMMIT, MEM_DECOMMIT, MEM_RELEASE, MEM_RESERVE, PAGE_NOACCESS, PAGE_READONLY,
    PAGE_READWRITE, VirtualAlloc, VirtualFree, VirtualProtect,
};
use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::SystemInformation::{GetSystemInfo, GetTickCount64, SYSTEM_INFO};
use windows_sys::Win32::System::Threading::{
    CreateThread, FlsAlloc, FlsSetValue, GetCurrentProcess, GetCurrentThreadId,
    STACK_SIZE_PARAM_IS_A_RESERVATION, Sleep, SwitchToThread, TLS_OUT_OF_INDEXES, TlsAlloc,
    TlsGetValue, TlsSetValue,
};

#[link(name = "ntdll")]
unsafe extern "system" {
    /// True (non-zero) once the process is shutting down (`ExitProcess` or a return from main).
    fn RtlDllShutdownInProgress() -> u8;
}

/// The allocator `PoolAlloc` uses here.
pub const BACKEND: super::Backend = super::Backend::Pools;

/// Part of a reservation can be decommitted but not released.
pub const PARTIAL_UNMAP: bool = false;

/// Decommitted pages go back to the OS.
pub const RETURNS_MEMORY: bool = true;

const FLS_OUT_OF_INDEXES: u32 = u32::MAX;

fn system_info() -> SYSTEM_INFO {
    // SAFETY: zeroed is a valid SYSTEM_INFO, which GetSystemInfo fills.
    let mut si: SYSTEM_INFO = unsafe { core::mem::zeroed() };
    // SAFETY: si is a valid out-pointer.
    unsafe { GetSystemInfo(&mut si) };
    si
}

pub fn page_size() -> usize {
    let p = system_info().dwPageSize as usize;
    if p.is_power_of_two() { p } else { 4096 }
}

/// Reservation granularity (64 KiB on every Windows so far).
fn granularity() -> usize {
    static G: AtomicUsize = AtomicUsize::new(0);
    let g = G.load(Ordering::Relaxed);
    if g != 0 {
        return g;
    }
    let g = system_info().dwAllocationGranularity as usize;
    let g = if g.is_power_of_two() { g } else { 64 * 1024 };
    G.store(g, Ordering::Relaxed);
    g
}

fn valloc(at: *mut u8, size: usize, kind: u32, prot: u32) -> *mut u8 {
    // SAFETY: VirtualAlloc at a chosen address only succeeds on free (or, for MEM_COMMIT, our own
    // reserved) address space; it touches nothing else. Null on failure.
    unsafe { VirtualAlloc(at.cast_const().cast(), size, kind, prot).cast() }
}

/// Reserved address space (`PAGE_NOACCESS`, never committed): any access faults.
pub fn reserve_inaccessible(size: usize) -> *mut u8 {
    valloc(ptr::null_mut(), size, MEM_RESERVE, PAGE_NOACCESS)
}

pub fn map(size: usize) -> *mut u8 {
    valloc(
        ptr::null_mut(),
        size,
        MEM_RESERVE | MEM_COMMIT,
        PAGE_READWRITE,
    )
}

pub fn map_sparse(size: usize) -> *mut u8 {
    map(size)
}

/// Reserves and commits `size` bytes at a multiple of `align` (see [`place_aligned`]).
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    place_aligned(size, align, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE)
}

/// Reserves `size` bytes at a multiple of `align`, committing nothing (`PAGE_NOACCESS` until
/// [`commit`]): an arena's range, which costs no commit charge until used.
pub fn reserve_aligned(size: usize, align: usize) -> *mut u8 {
    place_aligned(size, align, MEM_RESERVE, PAGE_NOACCESS)
}

/// Commits `[p, p + size)` of a reservation of ours read-write (zero where it was decommitted);
/// false where the OS refuses (the commit limit).
///
/// # Safety
/// See `os::commit`.
pub unsafe fn commit(p: *mut u8, size: usize) -> bool {
    !valloc(p, size, MEM_COMMIT, PAGE_READWRITE).is_null()
}

/// `size` bytes allocated as `kind` with `prot` at a multiple of `align`: first where the OS puts
/// them (often aligned already), else at the aligned address inside a larger reservation just
/// released.
fn place_aligned(size: usize, align: usize, kind: u32, prot: u32) -> *mut u8 {
    let place = || valloc(ptr::null_mut(), size, kind, prot);
    if align <= granularity() {
        return place();
    }
    let p = place();
    if p.is_null() || p as usize % align == 0 {
        return p;
    }
    // SAFETY: p is our own whole reservation, unused.
    unsafe { unmap(p, size) };
    let Some(total) = size.checked_add(align) else {
        return ptr::null_mut();
    };
    for _ in 0..16 {
        let r = valloc(ptr::null_mut(), total, MEM_RESERVE, PAGE_NOACCESS);
        if r.is_null() {
            return r;
        }
        let start = (r as usize + align - 1) & !(align - 1);
        // SAFETY: r is our own whole reservation, unused.
        unsafe { unmap(r, total) };
        // Another thread may take the range between the release and this call: then try again.
        let q = valloc(start as *mut u8, size, kind, prot);
        if !q.is_null() {
            return q;
        }
    }
    ptr::null_mut()
}

/// # Safety
/// See `os::unmap`: `p` is the start of a reservation made here.
pub unsafe fn unmap(p: *mut u8, _size: usize) {
    // SAFETY: p starts a whole reservation of ours (caller); MEM_RELEASE takes size 0.
    unsafe { VirtualFree(p.cast(), 0, MEM_RELEASE) };
}

/// # Safety
/// See `os::unmap_part`.
pub unsafe fn unmap_part(p: *mut u8, size: usize) {
    // SAFETY: the range is part of a reservation of ours and unused (caller).
    unsafe { VirtualFree(p.cast(), size, MEM_DECOMMIT) };
}

/// # Safety
/// See `os::purge`.
pub unsafe fn purge(p: *mut u8, size: usize) {
    // SAFETY: the range is ours and unused (caller). Decommitted pages come back zeroed when
    // committed again. The decommit gave its commit charge back, so the commit can fail if the
    // charge was taken meanwhile (the system's commit limit); the range would then fault, which
    // the contract does not allow: retry for a while, then stop with a message.
    unsafe {
        VirtualFree(p.cast(), size, MEM_DECOMMIT);
        for _ in 0..100 {
            if !valloc(p, size, MEM_COMMIT, PAGE_READWRITE).is_null() {
                return;
            }
            Sleep(1);
        }
    }
    fatal_write_and_abort(b"poolalloc: cannot commit purged memory again (commit limit)\n");
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

/// # Safety
/// See `os::protect`.
pub unsafe fn protect(p: *mut u8, size: usize, writable: bool) -> bool {
    let prot = if writable {
        PAGE_READWRITE
    } else {
        PAGE_READONLY
    };
    let mut old = 0;
    // SAFETY: the range is inside one of our committed mappings, page aligned (caller).
    unsafe { VirtualProtect(p.cast(), size, prot, &mut old) != 0 }
}

/// See `os::is_stack_or_image`: not told apart here.
pub fn is_stack_or_image(_p: *const u8) -> bool {
    false
}

/// See `os::is_unmapped`: not told here.
pub fn is_unmapped(_p: *const u8) -> bool {
    false
}

// ---------------------------------------------------------------------------------------------------
// Threads.

/// Declares `mod $m { pub fn get() -> *mut $T; pub fn set(*mut $T) }` over a Win32 TLS index:
/// the calling thread's TLS word, reading as the address of the static `$init` until set. Not
/// `thread_local!`: on windows-gnu (no native TLS in Rust) that boxes each value on a thread's
/// first access, through the global allocator, which is us: reading the word would recurse.
/// `TlsGetValue` allocates nothing. A null word reads as `$init`, so a thread needs no setup.
macro_rules! tls_word {
    (mod $m:ident: $T:ty = $init:path) => {
        mod $m {
            use super::*;

            #[inline(always)]
            pub fn get() -> *mut $T {
                let p = crate::os::tls_get().cast::<$T>();
                if p.is_null() {
                    (&raw const $init).cast::<$T>().cast_mut()
                } else {
                    p
                }
            }

            #[inline(always)]
            pub fn set(h: *mut $T) {
                crate::os::tls_set(h.cast())
            }
        }
    };
}
pub(crate) use tls_word;

/// The TLS index of the heap's TLS word ([`tls_word`]); `TLS_OUT_OF_INDEXES` if there was none.
static TLS_INDEX: spin::Once<u32> = spin::Once::new();

#[inline]
fn tls_index() -> u32 {
    // SAFETY: TlsAlloc has no preconditions.
    *TLS_INDEX.call_once(|| unsafe { TlsAlloc() })
}

/// The calling thread's heap pointer in its TLS word (null until set).
#[inline]
pub fn tls_get() -> *mut u8 {
    let i = tls_index();
    if i == TLS_OUT_OF_INDEXES {
        return ptr::null_mut();
    }
    // SAFETY: i is an index TlsAlloc gave us.
    unsafe { TlsGetValue(i).cast() }
}

/// Sets the calling thread's heap pointer in its TLS word. Without a TLS index (the process ran out of them) the
/// word stays null and the thread uses the static heap its null stands for.
#[inline]
pub fn tls_set(p: *mut u8) {
    let i = tls_index();
    if i != TLS_OUT_OF_INDEXES {
        // SAFETY: i is an index TlsAlloc gave us.
        unsafe { TlsSetValue(i, p.cast_const().cast()) };
    }
}

static EXIT_HOOK: super::Hook = super::Hook::new();
static FLS_INDEX: spin::Once<u32> = spin::Once::new();

unsafe extern "system" fn on_fls_destroyed(_: *const c_void) {
    // SAFETY: no preconditions.
    if unsafe { RtlDllShutdownInProgress() } != 0 {
        return;
    }
    EXIT_HOOK.call();
}

/// Runs `hook` (the same for every call of the process) when the calling thread exits.
pub fn watch_thread_exit(hook: fn()) {
    EXIT_HOOK.set(hook);
    // SAFETY: the callback is a plain function living forever.
    let idx = *FLS_INDEX.call_once(|| unsafe { FlsAlloc(Some(on_fls_destroyed)) });
    if idx != FLS_OUT_OF_INDEXES {
        // A non-null value makes Windows call the callback when the thread exits.
        // SAFETY: idx is an index FlsAlloc gave us.
        unsafe { FlsSetValue(idx, ptr::dangling::<u8>().cast()) };
    }
}

/// No fork on Windows.
pub fn at_fork(_prepare: fn(), _parent: fn(), _child: fn()) {}

static PURGER_BODY: super::Hook = super::Hook::new();

unsafe extern "system" fn purger_main(_: *mut c_void) -> u32 {
    PURGER_BODY.call();
    0
}

/// Starts `body` on a thread with a small stack (64 KiB reserved); false if the OS refuses.
pub fn spawn_purger(body: fn()) -> bool {
    PURGER_BODY.set(body);
    let mut tid = 0u32;
    // SAFETY: the thread function lives forever and takes no argument; tid is a valid out-pointer.
    let h: HANDLE = unsafe {
        CreateThread(
            ptr::null(),
            64 * 1024,
            Some(purger_main),
            ptr::null(),
            STACK_SIZE_PARAM_IS_A_RESERVATION,
            &mut tid,
        )
    };
    if h.is_null() {
        return false;
    }
    // The thread runs on without its handle (detached).
    // SAFETY: h is the handle CreateThread returned, closed once.
    unsafe { CloseHandle(h) };
    true
}

pub fn sleep_ms(ms: usize) {
    // SAFETY: no preconditions.
    unsafe { Sleep(ms.min(u32::MAX as usize) as u32) };
}

#[inline]
pub fn thread_id() -> usize {
    // SAFETY: no preconditions; never fails.
    unsafe { GetCurrentThreadId() as usize }
}

#[inline]
pub fn yield_now() {
    // SAFETY: no preconditions.
    unsafe { SwitchToThread() };
}

// ---------------------------------------------------------------------------------------------------
// The process.

pub fn now_ms() -> u32 {
    // SAFETY: no preconditions.
    unsafe { GetTickCount64() as u32 }
}

pub fn random_seed() -> [usize; 3] {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut k = [0usize; 3];
    // SAFETY: the buffer is valid for its size.
    let ok = unsafe { RtlGenRandom(k.as_mut_ptr().cast(), size_of_val(&k) as u32) };
    if !ok {
        let t = (now_ms() as usize).wrapping_mul(1_000_000_007);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed) as usize;
        let local = 0u8;
        k = [
            t ^ (&COUNTER as *const _ as usize),
            t.rotate_left(29) ^ (random_seed as *const () as usize) ^ n,
            t.rotate_left(41) ^ (&local as *const u8 as usize),
        ];
    }
    k
}

pub fn rss_bytes() -> Option<usize> {
    // SAFETY: zeroed is a valid PROCESS_MEMORY_COUNTERS.
    let mut c: PROCESS_MEMORY_COUNTERS = unsafe { core::mem::zeroed() };
    let n = size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    c.cb = n;
    // SAFETY: c is valid for n bytes of writes; the pseudo-handle needs no closing.
    let ok = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &mut c, n) };
    (ok != 0).then_some(c.WorkingSetSize)
}

/// Stderr stays reachable here: nothing to keep.
pub fn keep_stderr() {}

pub fn write_stderr(msg: &[u8]) {
    // SAFETY: msg is valid for its length; a null or invalid handle makes WriteFile fail only.
    unsafe {
        let h = GetStdHandle(STD_ERROR_HANDLE);
        if !h.is_null() && h != INVALID_HANDLE_VALUE {
            let mut written = 0u32;
            WriteFile(
                h,
                msg.as_ptr(),
                msg.len().min(u32::MAX as usize) as u32,
                &mut written,
                ptr::null_mut(),
            );
        }
    }
}

pub fn fatal_write_and_abort(msg: &[u8]) -> ! {
    write_stderr(msg);
    std::process::abort()
}

/// Windows has no setuid: a process runs with its starter's token (an elevated one is started
/// elevated by its user, who also sets its environment), so none is privileged in this sense.
pub fn privileged() -> bool {
    false
}

/// Calls `f` with each `NAME=VALUE` entry of the environment block (ANSI), without allocating.
pub fn for_each_env(f: &mut dyn FnMut(&[u8])) {
    // SAFETY: the block is a sequence of NUL-terminated strings ended by an empty one; it is ours
    // until freed below.
    unsafe {
        let block = GetEnvironmentStrings();
        if block.is_null() {
            return;
        }
        let mut p = block.cast_const();
        while *p != 0 {
            let s = core::ffi::CStr::from_ptr(p.cast()).to_bytes();
            f(s);
            p = p.add(s.len() + 1);
        }
        FreeEnvironmentStringsA(block);
    }
}

unsafe extern "C" {
    /// The C runtime's (mingw's msvcrt or the UCRT, linked by Rust's std either way).
    fn atexit(cb: extern "C" fn()) -> core::ffi::c_int;
}

/// Declares that `$f` (a `fn()`) runs when the program starts (when the DLL is loaded), before
/// `main`: a pointer to it among the C runtime's initialisers (`.CRT$XCU`). rustc keeps `#[used]`
/// statics of dependencies linked. The function must not rely on the Rust runtime.
macro_rules! run_at_start {
    ($f:path) => {
        const _: () = {
            extern "C" fn start() {
                $f()
            }
            #[used]
            #[unsafe(link_section = ".CRT$XCU")]
            static AT_START: extern "C" fn() = start;
        };
    };
}
pub(crate) use run_at_start;

static AT_EXIT: super::Hook = super::Hook::new();

extern "C" fn run_at_exit() {
    AT_EXIT.call();
}

/// Runs `hook` when the process exits normally. Call once.
pub fn at_exit(hook: fn()) {
    AT_EXIT.set(hook);
    // SAFETY: run_at_exit is a plain function living for the whole program.
    unsafe { atexit(run_at_exit) };
}

/// Copies as much of `[src, src + len)` as is readable into `dst` without faulting
/// (`ReadProcessMemory` on our own process).
///
/// # Safety
/// `dst` is valid for `len` bytes of writes.
pub unsafe fn copy_readable(src: *const u8, dst: *mut u8, len: usize) {
    let mut n = 0usize;
    // SAFETY: the kernel reads our own memory and fails instead of faulting; dst holds len
    // writable bytes (caller).
    unsafe { ReadProcessMemory(GetCurrentProcess(), src.cast(), dst.cast(), len, &mut n) };
}

/// The system heap keeps its own policy.
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
