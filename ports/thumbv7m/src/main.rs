//! A bare-metal Cortex-M3 program whose global allocator is poolalloc's `RegionAlloc` over a static
//! array in `.bss` (no init call), with a second region added at run time. It runs ordinary
//! `alloc` code (`Vec`, `Box`, `String`, `BTreeMap`) of mixed sizes, checks the allocator's
//! statistics after each step, and exits through semihosting: success only if every check held.
//! With the `critical-section` feature an interrupt handler (SysTick) allocates and frees too.
//!
//!     cargo run            # in qemu-system-arm -machine lm3s6965evb (see .cargo/config.toml)
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicU32, Ordering};
use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use poolalloc::region::{Region, RegionAlloc};

/// 40 KiB of the part's 64 KiB: the rest holds the stack and the program's statics.
const ARENA_SIZE: usize = 40 * 1024;
static mut ARENA: [u8; ARENA_SIZE] = [0; ARENA_SIZE];
/// Added at run time.
static mut EXTRA: [u8; 8 * 1024] = [0; 8 * 1024];

#[global_allocator]
// SAFETY: ARENA is used by nothing else.
static HEAP: RegionAlloc = RegionAlloc::new(unsafe { Region::array(&raw mut ARENA) });

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panicked: {}", info);
    hprintln!("{:?}", HEAP.stats());
    exit(false)
}

/// Ends the program with its result as qemu's exit status (semihosting).
fn exit(success: bool) -> ! {
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Without a semihosting host the call returns: wait (CI's timeout ends it).
    loop {
        cortex_m::asm::wfi();
    }
}

/// Checks run and their failures.
static CHECKS: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

fn check(name: &str, ok: bool) {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    if ok {
        hprintln!("test {} ... ok", name);
    } else {
        FAILED.fetch_add(1, Ordering::Relaxed);
        hprintln!("test {} ... FAILED ({:?})", name, HEAP.stats());
    }
}

/// Nothing live: every block merged back into one per region, no slab held.
fn all_free() -> bool {
    let s = HEAP.stats();
    s.live_blocks == 0 && s.requested == 0 && s.slab_bytes == 0 && s.free == s.region_bytes
}

/// Allocations made by the interrupt handler (`critical-section` only).
#[cfg_attr(not(feature = "critical-section"), allow(dead_code))]
static TICKS: AtomicU32 = AtomicU32::new(0);

#[cfg(feature = "critical-section")]
#[cortex_m_rt::exception]
fn SysTick() {
    // Allocating in an interrupt handler: safe only with the critical-section lock.
    let n = TICKS.load(Ordering::Relaxed);
    let b: Box<[u8]> = alloc::vec![n as u8; 24 + (n as usize % 200)].into_boxed_slice();
    let s = format!("tick {n}");
    if b.iter().all(|&x| x == n as u8) && s.len() > 5 {
        TICKS.store(n + 1, Ordering::Relaxed);
    }
}

fn workload(round: u32) {
    // Vectors that grow through every small class into large blocks (realloc in place or moved).
    let mut v: Vec<u32> = Vec::new();
    for i in 0..1000 {
        v.push(i * round);
    }
    let mut sum = 0u32;
    for (i, x) in v.iter().enumerate() {
        sum = sum.wrapping_add(*x ^ i as u32);
    }
    // Boxes of mixed sizes, freed out of order.
    let mut boxes: Vec<Box<[u8]>> = (0..60)
        .map(|i| alloc::vec![i as u8; 1 + (i * 37) % 300].into_boxed_slice())
        .collect();
    for i in (0..boxes.len()).step_by(3) {
        boxes[i] = Box::new([]);
    }
    // A map of strings.
    let mut map = BTreeMap::new();
    for i in 0..200u32 {
        map.insert(
            i.wrapping_mul(2_654_435_761) % 1000,
            format!("value {i} of round {round}"),
        );
    }
    map.retain(|k, _| k % 2 == 0);
    let total: usize = map.values().map(String::len).sum();
    let ok = boxes
        .iter()
        .enumerate()
        .all(|(i, b)| b.iter().all(|&x| x == i as u8))
        && total > 0
        && sum != 1;
    check("workload_contents", ok);
}

#[entry]
fn main() -> ! {
    hprintln!("running poolalloc's RegionAlloc on a Cortex-M3 (lm3s6965evb)");
    #[cfg(feature = "critical-section")]
    {
        let mut p = cortex_m::Peripherals::take().unwrap();
        p.SYST
            .set_clock_source(cortex_m::peripheral::syst::SystClkSource::Core);
        p.SYST.set_reload(20_000);
        p.SYST.clear_current();
        p.SYST.enable_counter();
        p.SYST.enable_interrupt();
    }

    let s = HEAP.stats();
    check(
        "laid_out_on_first_use",
        s.regions == 1 && s.region_bytes > ARENA_SIZE - 64 && s.free == s.region_bytes,
    );

    for round in 1..=5 {
        workload(round);
        check("everything_freed", all_free());
    }
    check(
        "peak_within_the_region",
        HEAP.stats().peak_requested < ARENA_SIZE,
    );

    // Out of memory is a null pointer, not a crash.
    let huge = Layout::from_size_align(60 * 1024, 8).unwrap();
    // SAFETY: non-zero size.
    let p = unsafe { HEAP.alloc(huge) };
    check(
        "out_of_memory_is_null",
        p.is_null() && HEAP.stats().failed >= 1,
    );

    // Fill most of the first region, then add a second one: the next block comes from it.
    let first: Vec<u8> = alloc::vec![1; 30 * 1024];
    // SAFETY: EXTRA is used by nothing else.
    check(
        "add_region",
        HEAP.add_region(unsafe { Region::array(&raw mut EXTRA) }),
    );
    let second: Vec<u8> = alloc::vec![2; 6 * 1024];
    let extra = (&raw const EXTRA) as usize;
    let at = second.as_ptr() as usize;
    check(
        "block_from_the_added_region",
        (extra..extra + 8 * 1024).contains(&at) && HEAP.stats().regions == 2,
    );
    check(
        "contents_kept",
        first.iter().all(|&x| x == 1) && second.iter().all(|&x| x == 2),
    );
    drop(first);
    drop(second);
    check("everything_freed_two_regions", all_free());

    #[cfg(feature = "critical-section")]
    {
        // Keep allocating until the interrupt handler has run (and allocated) many times.
        let mut spins = 0u32;
        while TICKS.load(Ordering::Relaxed) < 50 && spins < 2_000_000 {
            let b = Box::new([spins; 8]);
            core::hint::black_box(&b);
            spins += 1;
        }
        let ticks = TICKS.load(Ordering::Relaxed);
        hprintln!("{} allocations in the SysTick handler", ticks);
        check("interrupt_handler_allocates", ticks >= 50);
    }

    hprintln!("{:?}", HEAP.stats());
    let (n, failed) = (
        CHECKS.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    hprintln!(
        "test result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out",
        if failed == 0 { "ok" } else { "FAILED" },
        n - failed,
        failed
    );
    exit(failed == 0)
}
