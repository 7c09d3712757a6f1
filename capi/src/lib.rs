//! poolalloc as the C allocator: `malloc`, `free`, `calloc`, `realloc` and the rest of glibc's
//! allocation functions, with glibc's semantics (errno, null cases, overflow checks), over
//! [`poolalloc::raw`].
//!
//! Two ways to use it. As a shared library, for any program:
//!
//! ```text
//! cargo build --release -p poolalloc-c
//! LD_PRELOAD=target/release/libpoolalloc_c.so program …     # or link with -lpoolalloc_c
//! ```
//!
//! Or linked into a Rust binary, so that the C and C++ code linked with it (a `-sys` crate, a
//! file built by the `cc` crate) and libc itself allocate from the same pools as the Rust code:
//! depend on this package, use [`PoolAlloc`](poolalloc::PoolAlloc) as the global allocator, and
//! call [`link`] once (see there).
//!
//! `--features hardened` compiles in poolalloc's misuse checks, and a few of the C library's own
//! (docs/hardening.md).
//!
//! Nothing here needs an init call, and nothing here allocates: the first `malloc` of a thread
//! (before `main`, inside libc, in a TLS destructor) sets up what it needs from mmap. C++'s
//! `operator new`/`delete`, every form (sized, aligned, nothrow, arrays), are exported too (`cpp`).
//!
//! Alignment: a block of 16 bytes or more is 16-aligned (`alignof(max_align_t)`), as glibc's are
//! and as compilers assume of `malloc`; smaller blocks are 8-aligned (no object that fits in them
//! needs more).
//!
//! Linux only (glibc's and musl's allocation functions, `LD_PRELOAD`): on other targets this library
//! is empty and [`link`] does nothing, so that `cargo build --workspace --target <other>` and
//! `cargo test --workspace --target <other>` pass.

/// Refers to each function named (its address, through `black_box`), so that the linker keeps
/// the object file that defines it (see [`link`]).
#[cfg(target_os = "linux")]
macro_rules! keep {
    ($($f:path),* $(,)?) => {$( core::hint::black_box($f as *const ()); )*};
}

#[cfg(target_os = "linux")]
mod cpp;
#[cfg(target_os = "linux")]
mod malloc;

/// Makes `malloc`, `free`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`,
/// `malloc_usable_size`, the rest of this library's functions and C++'s `operator new`/`delete`
/// this executable's own, so that every allocation of the process goes to poolalloc: the C code
/// linked into the binary, libc's (`strdup`, `fopen`, `getaddrinfo`), and that of shared libraries,
/// loaded at start or later with `dlopen`. Their blocks count in [`poolalloc::stats`], the
/// purger returns their memory, and the profiler samples them (feature `profiling`).
///
/// ```ignore
/// #[global_allocator]
/// static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
///
/// fn main() {
///     poolalloc_c::link();
///     // ...
/// }
/// ```
///
/// The call does nothing at run time that matters (the library's constructor has already run
/// before `main`): it is the *reference* that counts. A Rust library an executable depends on but
/// never names is not linked at all, and the linker takes from one it links only the object files
/// something refers to; this function refers to every exported function, so all of them end up
/// in the executable, where their definitions come before libc's for the whole process (a
/// program's own `malloc` interposes on libc's: glibc and musl support it).
///
/// Use [`PoolAlloc`](poolalloc::PoolAlloc) as the global allocator with it: both sides then share
/// one set of pools (this package depends on `poolalloc`, so the binary has one copy of it), and
/// Rust keeps its sized frees. (Without it, Rust's `System` allocator calls `malloc`, which is
/// ours too, only slower.) Once this library serves `malloc`, `PoolAlloc`'s large blocks are spans
/// of poolalloc's own whatever [`LargeBlocks`](poolalloc::LargeBlocks) says: `System`
/// would only come back here.
///
/// Linux only; elsewhere nothing is exported and this does nothing.
#[inline(never)]
pub fn link() {
    #[cfg(target_os = "linux")]
    {
        malloc::keep();
        cpp::keep();
    }
}
