//! The OS contract (see `mod.rs`) on Unix: Linux (glibc and musl), macOS and FreeBSD, 64- and
//! 32-bit (nothing here depends on the word size).
//!
//! What differs between them, and nowhere else in the crate:
//! - purge: Linux `madvise(MADV_DONTNEED)` (the pages read as zero at once; not `MADV_FREE`,
//!   whose lazily freed pages stay in RSS, snmalloc#846); macOS and FreeBSD map fresh zero pages
//!   over the range (`mmap(MAP_FIXED)`), since their `MADV_DONTNEED` and `MADV_FREE` leave the
//!   old contents readable and the contract promises zeros;
//! - remap: `mremap` on Linux only; elsewhere the caller copies;
//! - the clock: `CLOCK_MONOTONIC_COARSE` on Linux, `CLOCK_MONOTONIC` elsewhere;
//! - the resident set: `/proc/self/statm` (Linux), `proc_pidinfo` (macOS), `sysctl` (FreeBSD);
//! - entropy: `getrandom` (Linux), `getentropy` (macOS, FreeBSD);
//! - the heap's TLS word: on x86-64 Linux an initial-exec TLS word declared in assembly; elsewhere
//!   `thread_local!` (see [`tls_word`]).

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The allocator `PoolAlloc` uses here.
pub const BACKEND: super::Backend = super::Backend::Pools;

/// `munmap` of part of a mapping returns its address space too.
pub const PARTIAL_UNMAP: bool = true;

/// Purged pages go back to the OS.
pub const RETURNS_MEMORY: bool = true;

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let r = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if r > 0 { r as usize } else { 4096 }
}

fn mmap_anon(size: usize, extra: libc::c_int) -> *mut u8 {
    mmap_anon_prot(size, libc::PROT_READ | libc::PROT_WRITE, extra)
}

fn mmap_anon_prot(size: usize, prot: libc::c_int, extra: libc::c_int) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; the result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANON | extra,
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

pub fn map(size: usize) -> *mut u8 {
    mmap_anon(size, 0)
}

pub fn map_sparse(size: usize) -> *mut u8 {
    // Miri knows only MAP_PRIVATE | MAP_ANONYMOUS; FreeBSD and macOS never reserve swap for an
    // anonymous mapping up front, so they need no flag.
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(miri)))]
    let extra = libc::MAP_NORESERVE;
    #[cfg(not(all(any(target_os = "linux", target_os = "android"), not(miri))))]
    let extra = 0;
    mmap_anon(size, extra)
}

/// Address space that faults on any access (`PROT_NONE`), costing no memory.
pub fn reserve_inaccessible(size: usize) -> *mut u8 {
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(miri)))]
    let extra = libc::MAP_NORESERVE;
    #[cfg(not(all(any(target_os = "linux", target_os = "android"), not(miri))))]
    let extra = 0;
    mmap_anon_prot(size, libc::PROT_NONE, extra)
}

/// Over-maps by `align` and unmaps the unaligned head and tail.
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

/// # Safety
/// See `os::unmap`.
pub unsafe fn unmap(p: *mut u8, size: usize) {
    // SAFETY: guaranteed by the caller. munmap of a valid range only fails on bad arguments.
    unsafe {
        libc::munmap(p.cast(), size);
    }
}

/// # Safety
/// See `os::unmap_part`.
pub unsafe fn unmap_part(p: *mut u8, size: usize) {
    // SAFETY: guaranteed by the caller; munmap takes any page-aligned part of a mapping.
    unsafe { unmap(p, size) }
}

/// # Safety
/// See `os::purge`.
pub unsafe fn purge(p: *mut u8, size: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the range is ours and unused (caller); DONTNEED on a private anonymous mapping
    // drops the pages, which read as zero afterwards.
    unsafe {
        libc::madvise(p.cast(), size, libc::MADV_DONTNEED);
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    // SAFETY: the range is ours and unused (caller); MAP_FIXED replaces exactly that range with
    // fresh zero pages, dropping the old ones. If it fails the range keeps its old pages (still
    // mapped and usable), so zero what the caller relies on by hand.
    unsafe {
        let r = libc::mmap(
            p.cast(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED,
            -1,
            0,
        );
        if r == libc::MAP_FAILED {
            ptr::write_bytes(p, 0, size);
        }
    }
}

/// Whether transparent huge pages may be asked for: `/sys/kernel/mm/transparent_hugepage/enabled`
/// is not `[never]` (read once, without allocating).
#[cfg(target_os = "linux")]
fn thp_allowed() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Relaxed) {
        1 => return true,
        2 => return false,
        _ => {}
    }
    let mut buf = [0u8; 64];
    let ok = read_file(c"/sys/kernel/mm/transparent_hugepage/enabled", &mut buf)
        .is_some_and(|text| !text.windows(7).any(|w| w == b"[never]"));
    STATE.store(if ok { 1 } else { 2 }, Relaxed);
    ok
}

/// The kernel's transparent huge page size, `hpage_pmd_size` (Linux; read without allocating):
/// None where it cannot be read, and on the other systems, which have no such pages.
pub fn huge_page_size() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let mut buf = [0u8; 32];
        let text = read_file(
            c"/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
            &mut buf,
        )?;
        parse_decimal(text.trim_ascii_end())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The start of a small file (`/proc`, `/sys`), read into `buf` without allocating: the bytes read,
/// None when it cannot be opened or read, or is empty.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_file<'a>(path: &core::ffi::CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: buf is valid for buf.len() bytes of writes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: fd is an open descriptor owned here.
    unsafe { libc::close(fd) };
    (n > 0).then(|| &buf[..n as usize])
}

/// A number written in decimal digits, nothing else; None when it is not one or overflows.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn parse_decimal(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0usize, |n, &d| {
        d.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
    })
}

/// # Safety
/// See `os::advise_huge`.
pub unsafe fn advise_huge(p: *mut u8, size: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        if !thp_allowed() {
            return false;
        }
        // SAFETY: the range is ours and page aligned (caller); MADV_HUGEPAGE only changes how
        // future faults in it are served.
        unsafe { libc::madvise(p.cast(), size, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (p, size);
        false
    }
}

/// # Safety
/// See `os::grow_in_place`.
pub unsafe fn grow_in_place(p: *mut u8, old: usize, new: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [p, p + old) is our whole mapping (caller); without MREMAP_MAYMOVE it either
        // grows where it is or fails, changing nothing.
        let r = unsafe { libc::mremap(p.cast(), old, new, 0) };
        r != libc::MAP_FAILED
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (p, old, new);
        false
    }
}

/// # Safety
/// See `os::move_pages`.
pub unsafe fn move_pages(src: *mut u8, len: usize, dst: *mut u8, new_len: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: src/len is our whole mapping, dst/new_len our fresh one (caller); MREMAP_FIXED
        // replaces dst with the old pages (grown to new_len) and unmaps src, or fails changing
        // nothing.
        let r = unsafe {
            libc::mremap(
                src.cast(),
                len,
                new_len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                dst.cast::<libc::c_void>(),
            )
        };
        r != libc::MAP_FAILED
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (src, len, dst, new_len);
        false
    }
}

/// # Safety
/// See `os::protect`.
pub unsafe fn protect(p: *mut u8, size: usize, writable: bool) -> bool {
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: the range is inside one of our mappings, page aligned (caller).
    unsafe { libc::mprotect(p.cast(), size, prot) == 0 }
}

/// # Safety
/// See `os::guard`.
pub unsafe fn guard(p: *mut u8, size: usize) -> bool {
    // SAFETY: the range is inside one of our mappings, page aligned, unused (caller).
    unsafe { libc::mprotect(p.cast(), size, libc::PROT_NONE) == 0 }
}

/// See `os::is_stack_or_image`.
#[cfg(target_os = "linux")]
pub fn is_stack_or_image(p: *const u8) -> bool {
    let here = 0u8;
    let sp = core::hint::black_box(&here) as *const u8 as usize;
    // The top of this thread's stack: the main thread's holds the auxiliary vector's random
    // bytes near its top; another thread's (glibc and musl) ends with its thread descriptor.
    // SAFETY: getpid, gettid, getauxval and pthread_self have no preconditions.
    let top = unsafe {
        if libc::getpid() == libc::gettid() {
            libc::getauxval(libc::AT_RANDOM) as usize
        } else {
            libc::pthread_self() as usize
        }
    };
    let a = p as usize;
    // A top far above (a signal handler on an alternate stack) tells nothing.
    if a >= sp && a < top && top - sp <= 64 << 20 {
        return true;
    }
    // SAFETY: an all-zero Dl_info (null pointers) is valid for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is ours to write.
    let found = unsafe { libc::dladdr(p.cast(), &mut info) } != 0;
    // SAFETY: as above.
    let loader = unsafe { libc::getauxval(libc::AT_BASE) } as usize;
    found && !info.dli_fbase.is_null() && info.dli_fbase as usize != loader
}

/// See `os::is_stack_or_image`: not told apart here.
#[cfg(not(target_os = "linux"))]
pub fn is_stack_or_image(_p: *const u8) -> bool {
    false
}

/// See `os::is_unmapped`: `msync` of the page fails with `ENOMEM` where nothing is mapped.
#[cfg(target_os = "linux")]
pub fn is_unmapped(p: *const u8) -> bool {
    let page = p as usize & !(super::page_size() - 1);
    // SAFETY: msync only inspects the range (MS_ASYNC schedules nothing for anonymous memory); an
    // unmapped range is reported, not touched.
    let r = unsafe {
        libc::msync(
            page as *mut libc::c_void,
            super::page_size(),
            libc::MS_ASYNC,
        )
    };
    // SAFETY: errno is this thread's, read right after the call.
    r != 0 && unsafe { *libc::__errno_location() } == libc::ENOMEM
}

/// See `os::is_unmapped`: not told here.
#[cfg(not(target_os = "linux"))]
pub fn is_unmapped(_p: *const u8) -> bool {
    false
}

// ---------------------------------------------------------------------------------------------------
// Threads.

/// Declares `mod $m { pub fn get() -> *mut $T; pub fn set(*mut $T) }`: the calling thread's
/// TLS word, which starts out holding the address of the static `$init` (a `$T`, or a
/// `repr(transparent)` wrapper of one). Const-initialised, no destructor, never allocates.
///
/// On x86-64 Linux the word is declared in assembly and read with the initial-exec TLS model:
/// one `mov` from `%fs`, in an executable and in a shared library alike. (Rust's `thread_local!`
/// uses the general-dynamic model in a shared library: a call to `__tls_get_addr` on every malloc
/// and free of `libpoolalloc_c.so`; only nightly can choose the model.) A library with an
/// initial-exec TLS word must be loaded at startup (LD_PRELOAD, or linked) or find room in glibc's
/// surplus static TLS when `dlopen`ed; it needs 8 bytes. Elsewhere, and under Miri,
/// `thread_local!` holds it.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
macro_rules! tls_word {
    (mod $m:ident: $T:ty = $init:path) => {
        mod $m {
            use super::*;

            // The word, in `.tdata` so that it starts out naming `$init`. Hidden: it is private
            // to the binary or library poolalloc is linked into. (The symbol keeps its first name.)
            core::arch::global_asm!(
                ".pushsection .tdata,\"awT\",@progbits",
                ".p2align 3",
                ".globl __poolalloc_heap_slot_v01",
                ".hidden __poolalloc_heap_slot_v01",
                "__poolalloc_heap_slot_v01:",
                ".quad {init}",
                ".popsection",
                init = sym $init,
            );

            #[inline(always)]
            pub fn get() -> *mut $T {
                let p: *mut $T;
                // SAFETY: reads this thread's 8-byte TLS word: its offset from the thread pointer
                // comes from the GOT (initial-exec), and %fs is the thread pointer on x86-64
                // Linux.
                unsafe {
                    core::arch::asm!(
                        "mov {p}, qword ptr [rip + __poolalloc_heap_slot_v01@GOTTPOFF]",
                        "mov {p}, qword ptr fs:[{p}]",
                        p = out(reg) p,
                        options(nostack, readonly, preserves_flags, pure),
                    );
                }
                p
            }

            #[inline(always)]
            pub fn set(h: *mut $T) {
                // SAFETY: writes this thread's TLS word (as `get` reads it).
                unsafe {
                    core::arch::asm!(
                        "mov {t}, qword ptr [rip + __poolalloc_heap_slot_v01@GOTTPOFF]",
                        "mov qword ptr fs:[{t}], {h}",
                        t = out(reg) _,
                        h = in(reg) h,
                        options(nostack, preserves_flags),
                    );
                }
            }
        }
    };
}
#[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri))))]
pub(crate) use super::tls_word_std as tls_word;
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
pub(crate) use tls_word;

/// The thread-exit hook (one for the process) and the pthread key whose destructor calls it.
static EXIT_HOOK: super::Hook = super::Hook::new();
static EXIT_KEY: spin::Once<Option<libc::pthread_key_t>> = spin::Once::new();

extern "C" fn on_key_destroyed(_: *mut libc::c_void) {
    EXIT_HOOK.call();
}

/// Runs `hook` (the same for every call of the process) when the calling thread exits.
/// Where pthread cannot (out of memory inside libc), the hook does not run: a bounded leak.
pub fn watch_thread_exit(hook: fn()) {
    EXIT_HOOK.set(hook);
    let key = EXIT_KEY.call_once(|| {
        // SAFETY: zeroed is a valid out-value for the key (an integer or, on some targets, a
        // plain struct); the destructor is a plain function living forever.
        let mut k: libc::pthread_key_t = unsafe { core::mem::zeroed() };
        // SAFETY: k is a valid out-pointer.
        let r = unsafe { libc::pthread_key_create(&mut k, Some(on_key_destroyed)) };
        (r == 0).then_some(k)
    });
    if let Some(k) = *key {
        // Any non-null value makes pthread call the destructor at exit.
        // SAFETY: k is a key created above.
        unsafe { libc::pthread_setspecific(k, ptr::dangling::<u8>().cast()) };
    }
}

static FORK_HOOKS: [super::Hook; 3] = [super::Hook::new(), super::Hook::new(), super::Hook::new()];

extern "C" fn fork_prepare() {
    FORK_HOOKS[0].call();
}
extern "C" fn fork_parent() {
    FORK_HOOKS[1].call();
}
extern "C" fn fork_child() {
    FORK_HOOKS[2].call();
}

/// Registers hooks that run in the forking thread before `fork`, and after it in the parent and
/// in the child. Call once; later calls change nothing.
pub fn at_fork(prepare: fn(), parent: fn(), child: fn()) {
    static ONCE: spin::Once<()> = spin::Once::new();
    ONCE.call_once(|| {
        FORK_HOOKS[0].set(prepare);
        FORK_HOOKS[1].set(parent);
        FORK_HOOKS[2].set(child);
        // SAFETY: the handlers are plain functions that live for the whole program.
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        }
    });
}

static PURGER_BODY: super::Hook = super::Hook::new();

extern "C" fn purger_main(_: *mut libc::c_void) -> *mut libc::c_void {
    PURGER_BODY.call();
    ptr::null_mut()
}

/// Starts `body` on a detached thread with a small stack (64 KiB); false if the OS refuses.
/// Called at most once at a time (the caller serialises).
pub fn spawn_purger(body: fn()) -> bool {
    PURGER_BODY.set(body);
    // SAFETY: attr and tid are valid out-pointers; the thread function lives forever and takes no
    // argument. A small stack: the purger only walks lists and makes syscalls.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        let mut tid: libc::pthread_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 64 * 1024);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let r = libc::pthread_create(&mut tid, &attr, purger_main, ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        r == 0
    }
}

/// The flag `watch_user_signal` sets (null until it is called).
static USER_SIGNAL_FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(ptr::null_mut());

extern "C" fn on_user_signal(_: libc::c_int) {
    // Async-signal-safe: two atomic operations.
    let f = USER_SIGNAL_FLAG.load(Ordering::Acquire);
    if !f.is_null() {
        // SAFETY: only `watch_user_signal` stores here, a `&'static AtomicBool`.
        unsafe { (*f).store(true, Ordering::Release) };
    }
}

/// Sets `flag` whenever the process receives `SIGUSR2`, if nothing else handles that signal (its
/// disposition is the default, or this handler already). False, leaving the program's own handler
/// alone, when it has one, or when the OS refuses.
pub fn watch_user_signal(flag: &'static AtomicBool) -> bool {
    USER_SIGNAL_FLAG.store(
        flag as *const AtomicBool as *mut AtomicBool,
        Ordering::Release,
    );
    let ours = on_user_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: zeroed is a valid sigaction; the pointers are valid for the calls; the handler is
    // async-signal-safe and lives forever.
    unsafe {
        let mut old: libc::sigaction = core::mem::zeroed();
        if libc::sigaction(libc::SIGUSR2, ptr::null(), &mut old) != 0 {
            return false;
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != ours {
            return false;
        }
        let mut new: libc::sigaction = core::mem::zeroed();
        new.sa_sigaction = ours;
        new.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(libc::SIGUSR2, &new, ptr::null_mut()) == 0
    }
}

pub fn sleep_ms(ms: usize) {
    // SAFETY: zeroed is a valid timespec.
    let mut ts: libc::timespec = unsafe { core::mem::zeroed() };
    ts.tv_sec = (ms / 1000) as _;
    ts.tv_nsec = ((ms % 1000) * 1_000_000) as _;
    // SAFETY: ts is a valid timespec; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, ptr::null_mut()) };
}

#[inline]
pub fn thread_id() -> usize {
    // SAFETY: no preconditions; never fails.
    unsafe { libc::pthread_self() as usize }
}

#[inline]
pub fn yield_now() {
    // SAFETY: sched_yield has no preconditions.
    unsafe {
        libc::sched_yield();
    }
}

// ---------------------------------------------------------------------------------------------------
// The process.

/// A coarse monotonic clock in milliseconds (wrapping), cheap enough for the slow path.
pub fn now_ms() -> u32 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let clock = libc::CLOCK_MONOTONIC_COARSE;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let clock = libc::CLOCK_MONOTONIC;
    // SAFETY: zeroed is a valid timespec.
    let mut ts: libc::timespec = unsafe { core::mem::zeroed() };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000) as u32
}

/// Three words of entropy from the kernel, or (if it refuses) from the clock and addresses.
pub fn random_seed() -> [usize; 3] {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut k = [0usize; 3];
    let want = size_of_val(&k);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the buffer is valid for `want` bytes; getrandom may fill less on failure.
    let ok = unsafe { libc::getrandom(k.as_mut_ptr().cast(), want, 0) } == want as isize;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    // SAFETY: the buffer is valid for `want` (< 256) bytes.
    let ok = unsafe { libc::getentropy(k.as_mut_ptr().cast(), want) } == 0;
    if !ok {
        // SAFETY: zeroed is a valid timespec; ts is a valid out-pointer.
        let ts = unsafe {
            let mut ts: libc::timespec = core::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts);
            ts
        };
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let t = (ts.tv_sec as usize).wrapping_mul(1_000_000_007) ^ ts.tv_nsec as usize;
        let local = 0u8;
        k = [
            t ^ (&COUNTER as *const _ as usize),
            t.rotate_left(29) ^ (random_seed as *const () as usize) ^ n,
            t.rotate_left(41) ^ (&local as *const u8 as usize),
        ];
    }
    k
}

/// The process's resident set size in bytes.
pub fn rss_bytes() -> Option<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        statm_resident_pages().map(|p| p * super::page_size())
    }
    #[cfg(target_os = "macos")]
    {
        // SAFETY: zeroed is a valid proc_taskinfo; the buffer size passed is its size.
        let mut ti: libc::proc_taskinfo = unsafe { core::mem::zeroed() };
        let n = size_of::<libc::proc_taskinfo>() as libc::c_int;
        // SAFETY: ti is valid for n bytes of writes.
        let r = unsafe {
            libc::proc_pidinfo(
                libc::getpid(),
                libc::PROC_PIDTASKINFO,
                0,
                (&raw mut ti).cast(),
                n,
            )
        };
        (r == n).then_some(ti.pti_resident_size as usize)
    }
    #[cfg(target_os = "freebsd")]
    {
        // SAFETY: zeroed is a valid kinfo_proc.
        let mut kp: libc::kinfo_proc = unsafe { core::mem::zeroed() };
        let mut len = size_of::<libc::kinfo_proc>();
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
        // SAFETY: mib names 4 levels; kp is valid for len bytes of writes; no new value.
        let r = unsafe {
            libc::sysctl(
                mib.as_ptr(),
                4,
                (&raw mut kp).cast(),
                &mut len,
                ptr::null(),
                0,
            )
        };
        (r == 0).then(|| kp.ki_rssize as usize * super::page_size())
    }
    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "freebsd"
    )))]
    {
        None
    }
}

/// The resident pages from `/proc/self/statm`, read without allocating.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn statm_resident_pages() -> Option<usize> {
    let mut buf = [0u8; 128];
    // statm: "size resident shared text lib data dt", in pages.
    let mut fields = read_file(c"/proc/self/statm", &mut buf)?.split(|&b| b == b' ');
    fields.next()?;
    parse_decimal(fields.next()?)
}

/// The descriptor [`write_stderr`] writes to: 2, or its copy made by [`keep_stderr`].
static STDERR_FD: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(2);

/// Keeps a private copy of stderr for later messages: a program may close its stderr before the
/// exit handlers run (coreutils' `close_stdout` closes both), and the exit report must still
/// reach it.
pub fn keep_stderr() {
    // SAFETY: F_DUPFD_CLOEXEC duplicates fd 2 (if open) onto a free descriptor ≥ 3.
    let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
    if fd >= 0 {
        STDERR_FD.store(fd, Ordering::Relaxed);
    }
}

/// Writes `msg` to stderr (no allocation, no lock of ours), all of it unless stderr fails.
pub fn write_stderr(mut msg: &[u8]) {
    let fd = STDERR_FD.load(Ordering::Relaxed);
    while !msg.is_empty() {
        // SAFETY: msg is valid for its length.
        let n = unsafe { libc::write(fd, msg.as_ptr().cast(), msg.len()) };
        if n <= 0 {
            return;
        }
        msg = &msg[n as usize..];
    }
}

/// Writes `msg` to stderr (no allocation, no lock of ours) and aborts the process.
pub fn fatal_write_and_abort(msg: &[u8]) -> ! {
    write_stderr(msg);
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

#[cfg(not(target_os = "macos"))]
unsafe extern "C" {
    /// The process's environment (POSIX), a null-terminated array of `NAME=VALUE` strings.
    static environ: *const *const libc::c_char;
}

/// Calls `f` with each `NAME=VALUE` entry of the environment, without allocating. The caller must
/// not change the environment meanwhile (it runs once, early, from the allocator's settings).
pub fn for_each_env(f: &mut dyn FnMut(&[u8])) {
    #[cfg(not(target_os = "macos"))]
    // SAFETY: reading the pointer the C runtime keeps.
    let mut e = unsafe { environ };
    #[cfg(target_os = "macos")]
    // SAFETY: _NSGetEnviron returns the address of the process's environ pointer.
    let mut e = unsafe { *libc::_NSGetEnviron() }
        .cast_const()
        .cast::<*const libc::c_char>();
    if e.is_null() {
        return;
    }
    // SAFETY: environ is a null-terminated array of NUL-terminated strings.
    unsafe {
        while !(*e).is_null() {
            f(core::ffi::CStr::from_ptr(*e).to_bytes());
            e = e.add(1);
        }
    }
}

/// Whether the process was started with privileges its invoker lacks: set-user-ID or
/// set-group-ID, or file capabilities (what the dynamic loader calls secure mode, and glibc
/// ignores its `MALLOC_*` tunables in). Linux: the kernel's `AT_SECURE` in the auxiliary vector,
/// set at `exec`, or, if the vector has no such entry, real and effective IDs that differ
/// ([`secure_mode`]); the BSDs and macOS: `issetugid`, which stays true after such a process
/// drops its privileges. Elsewhere, conservatively, real and effective IDs that differ.
pub fn privileged() -> bool {
    // Miri runs the unit tests as its host process, never set-user-ID, and has no auxiliary
    // vector to read.
    #[cfg(miri)]
    {
        false
    }
    #[cfg(all(any(target_os = "linux", target_os = "android"), not(miri)))]
    {
        secure_mode(at_secure(), ids_differ)
    }
    #[cfg(all(
        any(
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "openbsd",
            target_os = "netbsd",
            target_os = "dragonfly"
        ),
        not(miri)
    ))]
    {
        // SAFETY: issetugid has no preconditions.
        unsafe { libc::issetugid() != 0 }
    }
    #[cfg(not(any(
        miri,
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    )))]
    {
        ids_differ()
    }
}

/// The decision of [`privileged`] on Linux, given what the auxiliary vector says of `AT_SECURE`
/// (None: no such entry) and, asked only then, whether real and effective IDs differ. The
/// kernel's word is final when it gives one; without it the process must not be taken for
/// unprivileged (it fails closed, as on the platforms without `AT_SECURE`): a kernel or loader
/// that leaves the entry out (an emulator, a hand-made `exec`) may still have run it set-user-ID.
#[cfg(any(target_os = "linux", target_os = "android", test))]
fn secure_mode(at_secure: Option<libc::c_ulong>, ids_differ: impl FnOnce() -> bool) -> bool {
    match at_secure {
        Some(v) => v != 0,
        None => ids_differ(),
    }
}

/// `getauxval(AT_SECURE)`, or None when the auxiliary vector has no such entry (`getauxval`
/// returns 0 then and sets `errno` to `ENOENT`).
#[cfg(all(any(target_os = "linux", target_os = "android"), not(miri)))]
fn at_secure() -> Option<libc::c_ulong> {
    #[cfg(target_os = "linux")]
    let errno = libc::__errno_location;
    #[cfg(target_os = "android")]
    let errno = libc::__errno;
    // SAFETY: errno is this thread's own; getauxval reads the auxiliary vector the kernel gave
    // the process and has no preconditions; errno is read right after it.
    unsafe {
        *errno() = 0;
        let v = libc::getauxval(libc::AT_SECURE);
        (v != 0 || *errno() != libc::ENOENT).then_some(v)
    }
}

/// Whether the real and effective user or group IDs differ (a set-user-ID or set-group-ID
/// process that has not dropped its privileges).
#[cfg(not(miri))]
#[cfg_attr(
    any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    ),
    allow(dead_code)
)]
fn ids_differ() -> bool {
    // SAFETY: these four calls have no preconditions and cannot fail.
    unsafe { libc::getuid() != libc::geteuid() || libc::getgid() != libc::getegid() }
}

/// Declares that `$f` (a `fn()`) runs when the program starts (when the library is loaded, for
/// a shared library), before `main`: a pointer to it in the platform's constructor section
/// (`.init_array`, `__mod_init_func`). rustc keeps `#[used]` statics of dependencies linked.
/// The function must not rely on the Rust runtime (it may run before it is set up).
macro_rules! run_at_start {
    ($f:path) => {
        const _: () = {
            extern "C" fn start() {
                $f()
            }
            #[used]
            #[cfg_attr(
                any(target_os = "linux", target_os = "freebsd"),
                unsafe(link_section = ".init_array")
            )]
            #[cfg_attr(target_os = "macos", unsafe(link_section = "__DATA,__mod_init_func"))]
            static AT_START: extern "C" fn() = start;
        };
    };
}
pub(crate) use run_at_start;

static AT_EXIT: super::Hook = super::Hook::new();

extern "C" fn run_at_exit() {
    AT_EXIT.call();
}

/// Runs `hook` when the process exits normally (`exit`, a return from `main`). Call once.
pub fn at_exit(hook: fn()) {
    AT_EXIT.set(hook);
    // SAFETY: run_at_exit is a plain function living for the whole program.
    unsafe { libc::atexit(run_at_exit) };
}

/// Copies as much of `[src, src + len)` as is readable into `dst`, without faulting: on Linux the
/// kernel reads our own memory (`process_vm_readv`) and stops at the first unreadable page.
/// Elsewhere a plain copy: only the C library, which is Linux-only, copies blocks it did not
/// allocate.
///
/// # Safety
/// `dst` is valid for `len` bytes of writes; off Linux `src` must be readable for `len` bytes.
pub unsafe fn copy_readable(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let local = libc::iovec {
            iov_base: dst.cast(),
            iov_len: len,
        };
        let remote = libc::iovec {
            iov_base: src.cast_mut().cast(),
            iov_len: len,
        };
        // SAFETY: process_vm_readv reads our own memory through the kernel, which stops at the
        // first unreadable page instead of faulting; dst holds len writable bytes (caller).
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n < 0 {
            // Not available (ENOSYS under qemu-user, EPERM under a seccomp policy): copy page by
            // page while the kernel says the page is mapped (`mincore` fails on a hole). The
            // first page holds the block's start, so it is readable.
            let page = super::page_size();
            let mut done = 0;
            while done < len {
                let at = src as usize + done;
                let base = at & !(page - 1);
                let mut resident = 0u8;
                // SAFETY: mincore only inspects the mapping of [base, base + page).
                let mapped = done == 0
                    || unsafe { libc::mincore(base as *mut libc::c_void, page, &mut resident) }
                        == 0;
                if !mapped {
                    break;
                }
                let n = (base + page - at).min(len - done);
                // SAFETY: [at, at + n) lies in one mapped page; dst has room for len bytes.
                unsafe { ptr::copy_nonoverlapping(at as *const u8, dst.add(done), n) };
                done += n;
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    // SAFETY: both ranges are valid for len bytes (caller) and distinct blocks.
    unsafe {
        ptr::copy_nonoverlapping(src, dst, len)
    };
}

/// glibc: freed blocks up to 32 MiB stay in the arenas for reuse (`M_MMAP_THRESHOLD` 32 MiB, the
/// most glibc's own dynamic threshold reaches: blocks are mapped apart, and unmapped at `free`,
/// only above it), and the free top of a heap is given back at `free` only past 8 MiB
/// (`M_TRIM_THRESHOLD`; glibc's default 128 KiB). Not more: `malloc_trim` (the purger's) gives
/// back free pages inside every arena but the top of the main one only, so a thread's arena keeps
/// up to this much resident until it frees again (64 MiB left 66 MiB of 160 resident in
/// `tests/large_blocks.rs`). Nothing elsewhere.
pub fn keep_system_allocator_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt has no preconditions; an out-of-range value is refused (returns 0), which
    // leaves glibc's own policy.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 8 << 20);
    }
}

/// glibc's `malloc_trim(0)`: the system allocator returns its free memory. Nothing elsewhere.
pub fn trim_system_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// `AT_SECURE` decides when the auxiliary vector has it; without it the real and effective
    /// IDs do (issue 41: it failed open, unprivileged whatever the IDs).
    #[test]
    fn privileged_falls_back_to_the_ids_without_at_secure() {
        assert!(secure_mode(Some(1), || false));
        assert!(!secure_mode(Some(0), || true));
        assert!(secure_mode(None, || true));
        assert!(!secure_mode(None, || false));
        // This test process: not set-user-ID, and its kernel gives AT_SECURE.
        assert!(!privileged());
    }
}
