//! The one-line swap on wasm32, checked: the pools serve the program (not `System`), and memory
//! that linear memory can never give back is reused across size classes. Phase one fills about
//! 8 MiB with 48-byte blocks and frees them; phase two fills 6 MiB with 200-byte blocks, then
//! with 3 KiB ones: their chunks are phase one's, so no chunk is mapped and (on wasm32) linear
//! memory does not grow. (6 MiB each: a class's chunk holds a little less or more than another's,
//! by how its slot size divides the chunk.) A failed check panics (on wasm32 a trap: a non-zero
//! exit).
//!
//! ```text
//! cargo run --example wasm_reuse                                   # the host, as a check of the logic
//! cargo build --example wasm_reuse --target wasm32-unknown-unknown --release
//! wasmtime run --invoke main target/wasm32-unknown-unknown/release/examples/wasm_reuse.wasm 0 0
//! cargo run --example wasm_reuse --target wasm32-wasip1            # with a wasm32-wasip1 runner
//! ```
//!
//! (`.ci/targets wasi` runs the wasm32-unknown-unknown build so.)

use poolalloc::{Backend, PoolAlloc};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: PoolAlloc = PoolAlloc::new();

/// Fills `bytes` with blocks of `size` bytes, each written, checks them, then frees them all.
fn fill(size: usize, bytes: usize) {
    let n = bytes / size;
    let mut blocks: Vec<Box<[u8]>> = Vec::with_capacity(n);
    for i in 0..n {
        blocks.push(vec![i as u8; size].into_boxed_slice());
    }
    for (i, b) in blocks.iter().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8), "block {i} of {size} bytes");
    }
    drop(black_box(blocks));
}

fn main() {
    let s = poolalloc::stats();
    assert_eq!(s.backend, Backend::Pools, "the pools serve this target");
    fill(48, 8 << 20);
    let first = poolalloc::stats();
    fill(200, 6 << 20);
    fill(3 << 10, 6 << 20);
    let after = poolalloc::stats();
    // Every chunk of the later phases was one of the first phase's (the list of pointers, 2.8 MB
    // for the 48-byte phase, is a large block: it does not take chunks).
    assert!(
        after.chunks_mapped <= first.chunks_mapped,
        "chunks mapped: {} after the first phase, {} after the others",
        first.chunks_mapped,
        after.chunks_mapped
    );
    if cfg!(target_family = "wasm") {
        // There the resident set is linear memory's size: it only grows, and it did not here
        // beyond the large blocks' room (the lists of pointers, served by the system allocator).
        let (a, b) = (first.rss_bytes.unwrap(), after.rss_bytes.unwrap());
        assert!(
            b <= a + (2 << 20),
            "linear memory grew from {a} to {b} bytes"
        );
    }
    if cfg!(not(all(target_family = "wasm", target_os = "unknown"))) {
        println!(
            "ok: {} chunks mapped for 3 phases (8, 6 and 6 MiB), {} bytes of memory",
            after.chunks_mapped,
            after.rss_bytes.unwrap_or(0)
        );
    }
}
