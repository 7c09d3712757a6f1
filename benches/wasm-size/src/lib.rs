//! A minimal `no_std` wasm module: `alloc`, `free` and `realloc` exported over a static global
//! allocator chosen by feature (`region`, `talc`, `dlmalloc`), for `run.sh`'s code-size table.
#![no_std]

use core::alloc::{GlobalAlloc, Layout};

#[cfg(feature = "region")]
static mut ARENA: [u8; 64 * 1024] = [0; 64 * 1024];
#[cfg(feature = "region")]
#[global_allocator]
static A: poolalloc::region::RegionAlloc =
    // SAFETY: the arena is this allocator's alone.
    poolalloc::region::RegionAlloc::new(unsafe {
        poolalloc::region::Region::array(&raw mut ARENA)
    });

#[cfg(feature = "talc")]
static mut ARENA: [u8; 64 * 1024] = [0; 64 * 1024];
#[cfg(feature = "talc")]
#[global_allocator]
static A: talc::TalcLock<spinning_top::RawSpinlock, talc::source::Claim> =
    // SAFETY: the arena is this allocator's alone.
    talc::TalcLock::new(unsafe { talc::source::Claim::array(&raw mut ARENA) });

#[cfg(feature = "dlmalloc")]
#[global_allocator]
static A: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap_or(Layout::new::<u8>())
}

/// # Safety
/// `size` is not zero.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn alloc(size: usize, align: usize) -> *mut u8 {
    // SAFETY: a valid layout of non-zero size (caller).
    unsafe { A.alloc(layout(size, align)) }
}

/// # Safety
/// `p` came from `alloc` or `realloc` with this size and alignment.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut u8, size: usize, align: usize) {
    // SAFETY: forwarded.
    unsafe { A.dealloc(p, layout(size, align)) }
}

/// # Safety
/// As for `free`; `new` is not zero.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut u8, size: usize, align: usize, new: usize) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe { A.realloc(p, layout(size, align), new) }
}
