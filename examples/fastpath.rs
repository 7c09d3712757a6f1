//! The fast path, for instruction counting: `valgrind --tool=callgrind` on this example (release)
//! counts the instructions of one `alloc` and one `dealloc` of a 16-byte block (or of the size given
//! as the second argument) through
//! `GlobalAlloc` on `PoolAlloc` directly (the functions `fast_alloc` and `fast_free`, inclusive,
//! divided by the iteration count printed). See docs/how-it-works.md, "Fast path".

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[inline(never)]
fn fast_alloc(l: Layout) -> *mut u8 {
    // SAFETY: l has a non-zero size.
    unsafe { P.alloc(l) }
}

#[inline(never)]
fn fast_free(p: *mut u8, l: Layout) {
    // SAFETY: p was allocated by P with l and is freed once.
    unsafe { P.dealloc(p, l) }
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let n = arg(1, 1_000_000);
    // The block size (default 16: the figures in docs/how-it-works.md); `hardened` marks slots of
    // 24 bytes and more with poison words, so its counts depend on it.
    let size = arg(2, 16);
    let l = Layout::from_size_align(black_box(size), 8).unwrap();
    // Warm up: the chunk is carved and the thread's heap exists before counting starts.
    let warm: Vec<*mut u8> = (0..64).map(|_| fast_alloc(l)).collect();
    for p in warm {
        fast_free(p, l);
    }
    for _ in 0..n {
        let p = fast_alloc(l);
        black_box(p);
        fast_free(p, l);
    }
    println!("{n} alloc+free pairs of {size} B");
}
