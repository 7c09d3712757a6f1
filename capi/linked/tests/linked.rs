//! poolalloc's `malloc` linked into a Rust executable (`poolalloc_c::link()`), with `PoolAlloc` as
//! the global allocator, and C (and C++) code built by the `cc` crate linked with it:
//!
//! - the executable's own `malloc`, `free`, ... and C++ operators are what the process resolves
//!   (dlsym), libc's `strdup` and a library loaded later with `dlopen` included;
//! - the C side's blocks count in `poolalloc::stats()`, exactly, and leave it when C frees them;
//!   Rust's large blocks count once (not once more through `System`, which is `malloc`, ours);
//! - Rust and C share one set of pools, and the resident set falls after both sides free;
//! - `malloc_usable_size`, `posix_memalign`, `aligned_alloc`, `calloc`, `realloc` from C.
//!
//! One `main` (no harness): the counts are exact only while no other test thread allocates.
//! Linux only, as the C library is; the C++ part and `dlopen` with glibc only (`build.rs`).

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[cfg(target_os = "linux")]
fn main() {
    poolalloc_c::link();
    linux::symbols();
    linux::rust_blocks();
    linux::c_blocks_counted();
    linux::api();
    linux::libc_blocks();
    #[cfg(linked_plugin)]
    linux::plugin();
    #[cfg(linked_cpp)]
    linux::cpp();
    linux::rss_falls();
    println!("linked: every check passed");
}

#[cfg(not(target_os = "linux"))]
fn main() {
    poolalloc_c::link();
    println!("linked: the C library is Linux only; nothing to test here");
}

#[cfg(target_os = "linux")]
mod linux {
    use core::ffi::CStr;
    use poolalloc::{raw, stats};
    use poolalloc_c_linked::*;

    /// Small live blocks (slots) in every class.
    fn slots(s: &poolalloc::Stats) -> usize {
        s.classes().iter().map(|c| c.live_slots).sum()
    }

    /// Whether `name` resolves, for the whole process (`RTLD_DEFAULT`: what libc and libraries
    /// loaded later bind to), to a definition inside this executable.
    #[cfg(target_env = "gnu")]
    fn defined_here(name: &CStr) -> bool {
        // SAFETY: dlsym and dladdr with valid names and out-pointers.
        unsafe {
            let f = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
            assert!(!f.is_null(), "{name:?} does not resolve");
            let mut info: libc::Dl_info = core::mem::zeroed();
            let mut mine: libc::Dl_info = core::mem::zeroed();
            assert!(libc::dladdr(f, &mut info) != 0);
            assert!(libc::dladdr(symbols as *const core::ffi::c_void, &mut mine) != 0);
            info.dli_fbase == mine.dli_fbase
        }
    }

    /// The executable's definitions are the process's.
    pub fn symbols() {
        #[cfg(target_env = "gnu")]
        {
            let mut names: Vec<&CStr> = vec![
                c"malloc",
                c"free",
                c"calloc",
                c"realloc",
                c"reallocarray",
                c"posix_memalign",
                c"aligned_alloc",
                c"memalign",
                c"valloc",
                c"pvalloc",
                c"malloc_usable_size",
                c"malloc_trim",
            ];
            if cfg!(linked_cpp) {
                // libstdc++ is linked (the C++ side), so the operators are exported too.
                names.extend([c"_Znwm", c"_Znam", c"_ZdlPv", c"_ZdaPv", c"_ZdlPvm"]);
                names.extend([c"_ZnwmSt11align_val_t", c"_ZdlPvSt11align_val_t"]);
            }
            for name in names {
                assert!(
                    defined_here(name),
                    "{name:?} resolves outside the executable"
                );
            }
            println!("symbols: malloc & co resolve to the executable for the whole process");
        }
        // However it was resolved, what malloc hands out is ours.
        // SAFETY: malloc and free of a block.
        unsafe {
            let p = libc::malloc(24);
            assert!(raw::owns(p.cast()));
            libc::free(p);
        }
    }

    /// Rust's blocks: one set of pools with C's, and a large one counted once.
    pub fn rust_blocks() {
        let b = Box::new([7u8; 40]);
        assert!(
            raw::owns(b.as_ptr().cast_mut()),
            "a Rust slot is in our chunks"
        );
        // SAFETY: reads the block's usable size by address (a live block of ours).
        let usable = unsafe { raw::usable_size(b.as_ptr().cast_mut()) };
        assert!(usable.is_some_and(|u| (40..=48).contains(&u)), "{usable:?}");
        drop(b);

        let s0 = stats();
        let v: Vec<u8> = Vec::with_capacity(1 << 20);
        let s1 = stats();
        assert!(
            raw::owns(v.as_ptr().cast_mut()),
            "a Rust large block is a span of ours"
        );
        assert_eq!(s1.large_blocks - s0.large_blocks, 1, "counted once");
        assert_eq!(s1.large_bytes - s0.large_bytes, 1 << 20);
        assert_eq!(poolalloc::large_blocks(), poolalloc::LargeBlocks::Spans);
        drop(v);
        let s2 = stats();
        assert_eq!(
            (s2.large_blocks, s2.large_bytes),
            (s0.large_blocks, s0.large_bytes)
        );
        println!("rust: slots in our chunks, a large block a span counted once");
    }

    /// C's blocks in `stats()`, exactly.
    pub fn c_blocks_counted() {
        const N: usize = 100_000;
        let s0 = stats();
        let (mut req, mut small, mut large_bytes, mut large) = (0, 0, 0, 0);
        // SAFETY: out-pointers to locals.
        let ok = unsafe { c_alloc_many(N, &mut req, &mut small, &mut large_bytes, &mut large) };
        let s1 = stats();
        assert_eq!(ok, 1, "C's malloc failed");
        assert!(
            !s1.requested_known,
            "C's frees carry no size: requested bytes are not known"
        );
        assert_eq!(large, N / 1000);
        assert_eq!(slots(&s1) - slots(&s0), N - large, "C's small blocks");
        assert_eq!(s1.live_bytes - s0.live_bytes, small, "their usable bytes");
        assert_eq!(s1.large_blocks - s0.large_blocks, large, "C's large blocks");
        assert_eq!(
            s1.large_bytes - s0.large_bytes,
            large_bytes,
            "their usable bytes"
        );
        // SAFETY: frees what c_alloc_many handed out.
        assert_eq!(unsafe { c_free_all() }, 1, "a C block changed while live");
        let s2 = stats();
        assert_eq!(slots(&s2), slots(&s0));
        assert_eq!(s2.live_bytes, s0.live_bytes);
        assert_eq!(
            (s2.large_blocks, s2.large_bytes),
            (s0.large_blocks, s0.large_bytes)
        );
        println!(
            "c: {N} blocks ({} small, {large} large; {:.1} MiB requested, {:.1} MiB usable) in stats(), exactly, and gone after C's free",
            N - large,
            req as f64 / 1048576.0,
            (small + large_bytes) as f64 / 1048576.0
        );
    }

    /// The C functions' semantics from C, and blocks passing between the sides.
    pub fn api() {
        // SAFETY: runs the C checks.
        let r = unsafe { c_api_checks() };
        assert_eq!(r, 0, "C API check {r} failed (capi/linked/c/c_side.c)");
        // SAFETY: a block from C's malloc, measured and freed from Rust (the same malloc).
        unsafe {
            let p = c_malloc(1000);
            assert!(raw::owns(p.cast()));
            assert_eq!(
                raw::usable_size(p.cast()),
                Some(libc::malloc_usable_size(p))
            );
            assert!(libc::malloc_usable_size(p) >= 1000);
            libc::free(p);
            let q = libc::malloc(5000);
            c_free(q);
        }
        println!("api: malloc_usable_size, realloc, calloc, posix_memalign, aligned_alloc from C");
    }

    /// Blocks libc allocates for the program (`strdup`) are ours, and our `free` takes them; libc's
    /// own blocks (`fopen`'s) come from us and go back to us.
    pub fn libc_blocks() {
        let s0 = stats();
        // SAFETY: strdup of a C string, freed with free.
        unsafe {
            let p = c_strdup(c"a string libc copies".as_ptr());
            assert!(!p.is_null());
            assert!(raw::owns(p.cast()), "strdup's block is ours");
            assert_eq!(slots(&stats()) - slots(&s0), 1);
            assert_eq!(CStr::from_ptr(p), c"a string libc copies");
            libc::free(p.cast());
            let q = libc::strdup(c"from Rust".as_ptr());
            assert!(raw::owns(q.cast()));
            libc::free(q.cast());
        }
        assert_eq!(slots(&stats()), slots(&s0));
        // libc allocating and freeing for itself: fopen's FILE, fclose's free.
        // SAFETY: fopen of a file that exists, read, closed.
        unsafe {
            let f = libc::fopen(c"/proc/self/statm".as_ptr(), c"r".as_ptr());
            assert!(!f.is_null());
            assert!(libc::fgetc(f) >= 0);
            assert!(
                slots(&stats()) > slots(&s0),
                "fopen's FILE is in our chunks"
            );
            libc::fclose(f);
        }
        assert_eq!(slots(&stats()), slots(&s0), "fclose freed it to us");
        println!(
            "libc: strdup's blocks are ours and free takes them; fopen/fclose allocate from us"
        );
    }

    /// A library loaded after start binds to the executable's malloc.
    #[cfg(linked_plugin)]
    pub fn plugin() {
        let path = std::ffi::CString::new(env!("LINKED_PLUGIN_SO")).unwrap();
        // SAFETY: dlopen of our plugin; dlsym of its functions with their C types.
        unsafe {
            let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            assert!(!h.is_null(), "dlopen {path:?}");
            let sym = |n: &CStr| {
                let f = libc::dlsym(h, n.as_ptr());
                assert!(!f.is_null(), "{n:?}");
                f
            };
            let alloc: extern "C" fn(usize) -> *mut core::ffi::c_void =
                core::mem::transmute(sym(c"plugin_alloc"));
            let free: extern "C" fn(*mut core::ffi::c_void) =
                core::mem::transmute(sym(c"plugin_free"));
            let address: extern "C" fn() -> *mut core::ffi::c_void =
                core::mem::transmute(sym(c"plugin_malloc_address"));
            assert_eq!(
                address() as usize,
                libc::malloc as *const () as usize,
                "the plugin's malloc is the executable's"
            );
            let s0 = stats();
            let p = alloc(3000);
            assert!(raw::owns(p.cast()));
            assert_eq!(slots(&stats()) - slots(&s0), 1);
            free(p);
            let q = alloc(100);
            libc::free(q);
            assert_eq!(slots(&stats()), slots(&s0));
        }
        println!("dlopen: a library loaded later allocates from poolalloc");
    }

    /// C++'s operators are ours.
    #[cfg(linked_cpp)]
    pub fn cpp() {
        let s0 = stats();
        // SAFETY: the C++ side's blocks, freed by their matching functions.
        unsafe {
            let p = cpp_new(100);
            assert!(raw::owns(p.cast()));
            let a = cpp_new_aligned(1000);
            assert!(raw::owns(a.cast()));
            assert_eq!(a as usize % 128, 0);
            let s = cpp_string(5000);
            assert!(raw::owns(s.cast()));
            assert!(raw::owns(cpp_string_data(s).cast_mut().cast()));
            assert_eq!(slots(&stats()) - slots(&s0), 4);
            cpp_string_delete(s);
            cpp_delete_aligned(a);
            cpp_delete(p);
        }
        assert_eq!(slots(&stats()), slots(&s0));
        println!("c++: new and delete (plain, aligned, std::string's) are ours");
    }

    fn rss() -> usize {
        stats().rss_bytes.expect("Linux reports the resident set")
    }

    fn mib(b: usize) -> f64 {
        b as f64 / 1048576.0
    }

    /// Both sides allocate ~100 MiB each, then free: after `trim` the resident set is back near
    /// where it started.
    pub fn rss_falls() {
        const N: usize = 100_000;
        poolalloc::trim();
        let base = rss();
        let s0 = stats();
        // Rust: mixed sizes as C's (8 B to 2 KiB, every 1000th 256 KiB), every byte written.
        let rust: Vec<Vec<u8>> = (0..N)
            .map(|i| {
                let x = (i as u64)
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let size = if i % 1000 == 999 {
                    256 << 10
                } else {
                    8 + ((x >> 33) % 2041) as usize
                };
                vec![i as u8; size]
            })
            .collect();
        let (mut req, mut small, mut large_bytes, mut large) = (0, 0, 0, 0);
        // SAFETY: out-pointers to locals.
        let ok = unsafe { c_alloc_many(N, &mut req, &mut small, &mut large_bytes, &mut large) };
        assert_eq!(ok, 1);
        let s1 = stats();
        let peak = rss();
        let rust_bytes: usize = rust.iter().map(|v| v.len()).sum();
        assert!(
            s1.live_bytes + s1.large_bytes - s0.live_bytes - s0.large_bytes >= rust_bytes + req,
            "both sides' bytes are in stats()"
        );
        assert!(
            peak - base >= (rust_bytes + req) * 3 / 4,
            "both sides' blocks are resident: {:.1} MiB over {:.1} MiB",
            mib(peak - base),
            mib(rust_bytes + req)
        );
        // SAFETY: frees what c_alloc_many handed out.
        assert_eq!(unsafe { c_free_all() }, 1);
        let after_c = rss();
        drop(rust);
        poolalloc::trim();
        let end = rss();
        let grown = peak - base;
        let left = end.saturating_sub(base);
        println!(
            "rss: {:.1} MiB at start, {:.1} MiB with Rust's {:.1} MiB and C's {:.1} MiB live, {:.1} MiB after C freed, {:.1} MiB after Rust freed and trim: {:.3} of the growth left",
            mib(base),
            mib(peak),
            mib(rust_bytes),
            mib(req),
            mib(after_c),
            mib(end),
            left as f64 / grown as f64
        );
        assert!(
            left * 10 < grown,
            "the resident set stays {:.1} MiB above where it started",
            mib(left)
        );
    }
}
