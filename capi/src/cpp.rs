//! C++'s `operator new` and `operator delete`, every replaceable form (plain, array, nothrow,
//! `std::align_val_t`, sized), under their Itanium names, so that a C++ program's allocations skip
//! libstdc++'s wrappers and its sized deletes skip the free path's address-map lookup.
//!
//! The throwing forms behave as C++ requires without a C++ compiler in the build: on failure they
//! call the installed new-handler until the allocation succeeds, and when there is none they throw
//! `std::bad_alloc`, through libstdc++'s own `std::get_new_handler()` and
//! `std::__throw_bad_alloc()`, found at run time with `dlsym` (a program that calls `operator new`
//! has its C++ runtime loaded). The exception unwinds through the `extern "C-unwind"` frames here.
//! The nothrow forms call the handler too and return null when there is none; a handler that
//! throws from inside a nothrow form ends the process (libstdc++ would return null).
//!
//! Alignment: the plain forms align as `malloc` does (16 bytes for blocks of 16 bytes or more,
//! `__STDCPP_DEFAULT_NEW_ALIGNMENT__` on x86-64 and AArch64), the aligned forms to their argument.

use core::ffi::{CStr, c_void};
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use poolalloc::raw;

/// `std::nothrow_t`, only ever passed by reference.
#[repr(C)]
pub struct NoThrow {
    _private: [u8; 0],
}

/// The alignment the aligned forms use: the argument, at least what `malloc` gives that size.
#[inline(always)]
fn align_of_new(size: usize, align: usize) -> usize {
    align.max(crate::malloc::align_for(size))
}

// --- failure: the new-handler loop and std::bad_alloc ---------------------------------------------

/// A function of the C++ runtime, found once: 0 while not looked up, 1 when absent.
struct Symbol {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl Symbol {
    const fn new(name: &'static CStr) -> Self {
        Symbol {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The function's address, or None when no loaded object defines it. Only reached once an
    /// allocation has failed (dlsym may allocate: our allocator then serves it, no lock is held).
    fn get(&self) -> Option<usize> {
        let mut a = self.addr.load(Relaxed);
        if a == 0 {
            // SAFETY: RTLD_DEFAULT searches every loaded object; the name is NUL-terminated.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) };
            a = if f.is_null() { 1 } else { f as usize };
            self.addr.store(a, Relaxed);
        }
        (a != 1).then_some(a)
    }
}

/// `std::new_handler std::get_new_handler() noexcept`.
static GET_NEW_HANDLER: Symbol = Symbol::new(c"_ZSt15get_new_handlerv");
/// `void std::__throw_bad_alloc()`: throws `std::bad_alloc`.
static THROW_BAD_ALLOC: Symbol = Symbol::new(c"_ZSt17__throw_bad_allocv");

type NewHandler = unsafe extern "C-unwind" fn();

/// The installed new-handler, if any.
fn new_handler() -> Option<NewHandler> {
    let get = GET_NEW_HANDLER.get()?;
    // SAFETY: the symbol is std::get_new_handler, a noexcept function taking nothing and returning
    // a function pointer (possibly null).
    let h = unsafe {
        let get: unsafe extern "C" fn() -> *mut c_void = core::mem::transmute(get);
        get()
    };
    // SAFETY: a non-null new_handler is a `void()` function; it may throw, hence C-unwind.
    (!h.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, NewHandler>(h) })
}

/// Throws `std::bad_alloc`; aborts with a message when no C++ runtime that can is loaded.
#[cold]
fn throw_bad_alloc() -> ! {
    if let Some(f) = THROW_BAD_ALLOC.get() {
        // SAFETY: the symbol is std::__throw_bad_alloc, `[[noreturn]] void()`, which throws.
        unsafe {
            let f: unsafe extern "C-unwind" fn() -> ! = core::mem::transmute(f);
            f()
        }
    }
    let text = b"poolalloc: operator new: out of memory, and no std::__throw_bad_alloc to throw\n";
    // SAFETY: writes a static buffer to stderr, then aborts.
    unsafe {
        libc::write(2, text.as_ptr().cast(), text.len());
        libc::abort()
    }
}

/// A throwing form failed: call the new-handler and try again until it succeeds, throw
/// `std::bad_alloc` when there is no handler (what `[new.delete.single]` requires).
#[cold]
#[inline(never)]
fn new_failed(size: usize, align: usize) -> *mut c_void {
    loop {
        match new_handler() {
            // SAFETY: the program's new-handler; it may throw, which unwinds through us.
            Some(h) => unsafe { h() },
            None => throw_bad_alloc(),
        }
        let p = allocate(size, align);
        if !p.is_null() {
            return p;
        }
    }
}

/// A nothrow form failed: the same loop, but null where the throwing form would throw.
#[cold]
#[inline(never)]
fn new_failed_nothrow(size: usize, align: usize) -> *mut c_void {
    loop {
        let Some(h) = new_handler() else {
            return ptr::null_mut();
        };
        // SAFETY: the program's new-handler. This frame is `extern "C"` up the stack: a handler
        // that throws here ends the process (documented above).
        unsafe { h() };
        let p = allocate(size, align);
        if !p.is_null() {
            return p;
        }
    }
}

/// One try: `align` 0 for the plain forms (malloc's alignment and its one-lookup class).
#[inline(always)]
fn allocate(size: usize, align: usize) -> *mut c_void {
    if align == 0 {
        raw::malloc(size).cast()
    } else if align.is_power_of_two()
        && size
            .checked_add(align)
            .is_some_and(|t| t <= crate::malloc::MAX_REQUEST)
    {
        raw::alloc(size, align_of_new(size, align)).cast()
    } else {
        // Not a valid std::align_val_t, or a size no block can have.
        ptr::null_mut()
    }
}

#[inline(always)]
fn new_throwing(size: usize, align: usize) -> *mut c_void {
    let p = allocate(size, align);
    if p.is_null() {
        return new_failed(size, align);
    }
    p
}

#[inline(always)]
fn new_nothrow(size: usize, align: usize) -> *mut c_void {
    let p = allocate(size, align);
    if p.is_null() {
        return new_failed_nothrow(size, align);
    }
    p
}

/// Sized delete: the size says whether the block is a slot (see [`raw::free_sized`]).
///
/// # Safety
/// `p` is null or a live block from the `operator new` form matching `size` and `align`.
#[inline(always)]
unsafe fn delete_sized(p: *mut c_void, size: usize, align: usize) {
    let align = match align {
        0 => 0,
        a if a.is_power_of_two() => align_of_new(size, a),
        // No block was handed out for an invalid alignment; let the lookup decide.
        // SAFETY: forwarded contract.
        _ => return unsafe { delete(p) },
    };
    // SAFETY: forwarded contract: operator new(size[, align]) allocated p with these arguments.
    unsafe { raw::free_sized(p.cast(), size, align) }
}

/// Unsized delete: the free path's lookup finds the block's kind.
///
/// # Safety
/// `p` is null or a live block from any form of `operator new`.
#[inline(always)]
unsafe fn delete(p: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { raw::free(p.cast()) }
}

// --- the exported forms -----------------------------------------------------------------------------

macro_rules! throwing_new {
    ($($name:ident ($($arg:ident: $t:ty),*) => $align:expr;)*) => {$(
        /// A throwing `operator new` form (see the module docs).
        ///
        /// # Safety
        /// Always safe to call; the block is the caller's to delete.
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name(size: usize $(, $arg: $t)*) -> *mut c_void {
            new_throwing(size, $align)
        }
    )*};
}

macro_rules! nothrow_new {
    ($($name:ident ($($arg:ident: $t:ty),*) => $align:expr;)*) => {$(
        /// A nothrow `operator new` form: null when out of memory and no new-handler helps.
        ///
        /// # Safety
        /// Always safe to call; the block is the caller's to delete.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(size: usize $(, $arg: $t)*, _nothrow: *const NoThrow) -> *mut c_void {
            new_nothrow(size, $align)
        }
    )*};
}

macro_rules! deletes {
    ($($name:ident ($p:ident $(, $arg:ident: $t:ty)*) => $body:expr;)*) => {$(
        /// An `operator delete` form.
        ///
        /// # Safety
        /// `p` is null or a live block from the matching `operator new` form (for a sized form, of
        /// that size; for an aligned form, of that alignment), not used afterwards.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($p: *mut c_void $(, $arg: $t)*) {
            // SAFETY: forwarded contract.
            unsafe { $body }
        }
    )*};
}

throwing_new! {
    _Znwm() => 0;
    _Znam() => 0;
    _ZnwmSt11align_val_t(align: usize) => align;
    _ZnamSt11align_val_t(align: usize) => align;
}

nothrow_new! {
    _ZnwmRKSt9nothrow_t() => 0;
    _ZnamRKSt9nothrow_t() => 0;
    _ZnwmSt11align_val_tRKSt9nothrow_t(align: usize) => align;
    _ZnamSt11align_val_tRKSt9nothrow_t(align: usize) => align;
}

deletes! {
    _ZdlPv(p) => delete(p);
    _ZdaPv(p) => delete(p);
    _ZdlPvRKSt9nothrow_t(p, _nt: *const NoThrow) => delete(p);
    _ZdaPvRKSt9nothrow_t(p, _nt: *const NoThrow) => delete(p);
    _ZdlPvSt11align_val_t(p, _align: usize) => delete(p);
    _ZdaPvSt11align_val_t(p, _align: usize) => delete(p);
    _ZdlPvSt11align_val_tRKSt9nothrow_t(p, _align: usize, _nt: *const NoThrow) => delete(p);
    _ZdaPvSt11align_val_tRKSt9nothrow_t(p, _align: usize, _nt: *const NoThrow) => delete(p);
    _ZdlPvm(p, size: usize) => delete_sized(p, size, 0);
    _ZdaPvm(p, size: usize) => delete_sized(p, size, 0);
    _ZdlPvmSt11align_val_t(p, size: usize, align: usize) => delete_sized(p, size, align);
    _ZdaPvmSt11align_val_t(p, size: usize, align: usize) => delete_sized(p, size, align);
}

/// Refers to every operator of this file, so that the linker keeps them all in an executable that
/// links this library as an rlib (see [`crate::link`]).
pub(crate) fn keep() {
    keep!(
        _Znwm,
        _Znam,
        _ZnwmSt11align_val_t,
        _ZnamSt11align_val_t,
        _ZnwmRKSt9nothrow_t,
        _ZnamRKSt9nothrow_t,
        _ZnwmSt11align_val_tRKSt9nothrow_t,
        _ZnamSt11align_val_tRKSt9nothrow_t,
        _ZdlPv,
        _ZdaPv,
        _ZdlPvRKSt9nothrow_t,
        _ZdaPvRKSt9nothrow_t,
        _ZdlPvSt11align_val_t,
        _ZdaPvSt11align_val_t,
        _ZdlPvSt11align_val_tRKSt9nothrow_t,
        _ZdaPvSt11align_val_tRKSt9nothrow_t,
        _ZdlPvm,
        _ZdaPvm,
        _ZdlPvmSt11align_val_t,
        _ZdaPvmSt11align_val_t,
    );
}
