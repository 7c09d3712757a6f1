//! The C and C++ side of the `linked` test (`tests/linked.rs`): functions of `c/c_side.c` and
//! `c/cpp_side.cpp`, built by the `cc` crate (`build.rs`) and linked into the test executable
//! with poolalloc's `malloc` (`poolalloc_c::link()`). Nothing else lives in this package.
//!
//! Linux only, as the C library is; the C++ functions with glibc only.
#![cfg(target_os = "linux")]

use core::ffi::{c_char, c_int, c_void};

unsafe extern "C" {
    /// Allocates `n` blocks of mixed sizes (8 B to 2 KiB, every 1000th 256 KiB) and writes them;
    /// reports requested bytes, usable bytes of blocks up to 64 KiB and above, and how many are
    /// above. 0 when malloc failed.
    pub fn c_alloc_many(
        n: usize,
        requested: *mut usize,
        usable_small: *mut usize,
        usable_large: *mut usize,
        large: *mut usize,
    ) -> c_int;
    /// Frees what `c_alloc_many` handed out; 0 when a block's first byte changed meanwhile.
    pub fn c_free_all() -> c_int;
    /// malloc_usable_size, realloc, calloc, posix_memalign, aligned_alloc from C: 0, or the
    /// number of the check that failed.
    pub fn c_api_checks() -> c_int;
    /// `malloc(n)` from C.
    pub fn c_malloc(n: usize) -> *mut c_void;
    /// `free(p)` from C.
    pub fn c_free(p: *mut c_void);
    /// `strdup(s)`: libc's own malloc call.
    pub fn c_strdup(s: *const c_char) -> *mut c_char;
}

#[cfg(linked_cpp)]
unsafe extern "C" {
    /// `new char[n]`.
    pub fn cpp_new(n: usize) -> *mut c_void;
    /// `delete[]` of a `cpp_new` block.
    pub fn cpp_delete(p: *mut c_void);
    /// `operator new(n, std::align_val_t(128))`.
    pub fn cpp_new_aligned(n: usize) -> *mut c_void;
    /// `operator delete(p, std::align_val_t(128))`.
    pub fn cpp_delete_aligned(p: *mut c_void);
    /// `new std::string(n, 'x')`.
    pub fn cpp_string(n: usize) -> *mut c_void;
    /// The string's characters.
    pub fn cpp_string_data(s: *mut c_void) -> *const c_void;
    /// `delete` of a `cpp_string`.
    pub fn cpp_string_delete(s: *mut c_void);
}
