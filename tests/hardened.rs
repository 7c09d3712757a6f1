//! Death tests of the `hardened` feature: each misuse runs in a child process (this test binary
//! re-run with POOLALLOC_TEST_CHILD naming the case: poolalloc-test-support's `child`), which must
//! abort with a message naming the problem.
//! Run with `cargo test --features hardened --test hardened`.
#![cfg(feature = "hardened")]

use std::alloc::{GlobalAlloc, Layout, System};

use poolalloc_test_support::child::{self, Ending};

static P: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// A `region::RegionAlloc`, whose frees `hardened` checks too.
static mut ARENA: [u8; 64 * 1024] = [0; 64 * 1024];
static R: poolalloc::region::RegionAlloc =
    // SAFETY: ARENA is used by nothing else.
    poolalloc::region::RegionAlloc::new(unsafe {
        poolalloc::region::Region::array(&raw mut ARENA)
    });

fn l(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// The misuse catalogue: (case, substring the abort message must contain).
const CASES: &[(&str, &str)] = &[
    ("double_free_small", "double free"),
    ("double_free_large", "double free or invalid pointer"),
    ("double_free_after_other_frees", "double free"),
    ("double_free_8_byte", "double free"),
    ("realloc_of_freed_8_byte_block", "realloc of freed block"),
    ("never_allocated_slot", "never-allocated"),
    ("write_after_free_on_the_tag_word", "write after free"),
    ("unaligned_free", "not the start of a block"),
    ("interior_free", "not the start of a block"),
    ("wild_pointer", "not allocated by poolalloc"),
    ("foreign_pointer_small", "not allocated by poolalloc"),
    ("foreign_pointer_large", "not a live large block"),
    ("size_mismatch", "size mismatch"),
    ("size_mismatch_after_shrink_in_place", "size mismatch"),
    ("small_freed_as_large", "size mismatch"),
    ("write_after_free", "write after free"),
    ("write_after_free_deep", "at offset 896"),
    ("write_after_free_tail", "at offset 16376"),
    ("realloc_of_freed_block", "realloc of freed block"),
    ("corrupted_free_list", "corrupted free list"),
    ("link_to_another_chunk", "corrupted free list"),
    ("corrupted_remote_message", "corrupted remote-free message"),
    (
        "small_block_freed_to_another_heap",
        "freed to a Heap that did not allocate it",
    ),
    (
        "large_block_freed_to_another_heap",
        "freed to a Heap that did not allocate it",
    ),
    (
        "global_block_freed_to_a_heap",
        "freed to a Heap that did not allocate it",
    ),
    ("region_double_free_small", "region: double free"),
    ("region_double_free_large", "region: double free"),
    (
        "region_interior_free_small",
        "region: free of a pointer this allocator did not hand out",
    ),
    (
        "region_size_mismatch_small",
        "region: free with a layout the block was not allocated with",
    ),
    (
        "region_size_mismatch_large",
        "region: free with a layout the block was not allocated with",
    ),
];

/// Performs one misuse. Returning means the allocator did not notice.
fn run_case(case: &str) {
    // SAFETY: none of this is safe: each case breaks the GlobalAlloc contract on purpose, in a child
    // process that is expected to abort.
    unsafe {
        match case {
            "double_free_small" => {
                let p = P.alloc(l(64));
                P.dealloc(p, l(64));
                P.dealloc(p, l(64));
            }
            "double_free_large" => {
                let p = P.alloc(l(1 << 20));
                P.dealloc(p, l(1 << 20));
                P.dealloc(p, l(1 << 20));
            }
            "double_free_after_other_frees" => {
                let v: Vec<*mut u8> = (0..10).map(|_| P.alloc(l(48))).collect();
                for &p in &v {
                    P.dealloc(p, l(48));
                }
                P.dealloc(v[3], l(48));
            }
            "double_free_8_byte" => {
                let p = P.alloc(l(8));
                P.dealloc(p, l(8));
                P.dealloc(p, l(8));
            }
            "realloc_of_freed_8_byte_block" => {
                let p = P.alloc(l(8));
                P.dealloc(p, l(8));
                P.realloc(p, l(8), 16);
            }
            "never_allocated_slot" => {
                // A slot far beyond everything handed out in a fresh chunk of this class.
                let p = P.alloc(l(3072));
                P.dealloc(p.add(3072 * 60), l(3072));
            }
            "write_after_free_on_the_tag_word" => {
                let p = P.alloc(l(32));
                P.dealloc(p, l(32));
                p.add(8).write(0);
                alloc_until(p, l(32));
            }
            "unaligned_free" => {
                let p = P.alloc(l(64));
                P.dealloc(p.add(1), l(64));
            }
            "interior_free" => {
                let p = P.alloc(l(256));
                P.dealloc(p.add(128), l(256));
            }
            "wild_pointer" => {
                // On 32-bit targets, where every address may be mapped, the first page (below
                // the lowest address the kernel maps).
                let wild = if cfg!(target_pointer_width = "64") {
                    0x1234_5678_9000_u64 as usize
                } else {
                    0x1000
                };
                P.dealloc(wild as *mut u8, l(64));
            }
            "foreign_pointer_small" => {
                let p = System.alloc(l(64));
                P.dealloc(p, l(64));
            }
            "foreign_pointer_large" => {
                let p = System.alloc(l(1 << 20));
                P.dealloc(p, l(1 << 20));
            }
            "size_mismatch" => {
                let p = P.alloc(l(64));
                P.dealloc(p, l(256));
            }
            "size_mismatch_after_shrink_in_place" => {
                // 1000 B is in the 1024 B slot; 600 B keeps it (at least half the slot). 300 B
                // is less than half of it: no realloc could have left such a block there.
                let p = P.alloc(l(1000));
                let q = P.realloc(p, l(1000), 600);
                assert_eq!(p, q, "600 B of a 1024 B slot stays in place");
                P.dealloc(q, l(300));
            }
            "small_freed_as_large" => {
                let p = P.alloc(l(64));
                P.dealloc(p, l(1 << 20));
            }
            "write_after_free" => {
                let p = P.alloc(l(64));
                P.dealloc(p, l(64));
                p.add(16).write(0x42);
                // The slot comes back once the chunk's free list runs dry, and is checked then.
                alloc_until(p, l(64));
            }
            // `hardened-full` poisons a freed slot whole up to 4 KiB, and past that its last 1 KiB.
            "write_after_free_deep" => {
                let p = P.alloc(l(1024));
                P.dealloc(p, l(1024));
                p.add(896).write(0x42);
                alloc_until(p, l(1024));
            }
            "write_after_free_tail" => {
                let p = P.alloc(l(16384));
                P.dealloc(p, l(16384));
                p.add(16383).write(0x42);
                alloc_until(p, l(16384));
            }
            "realloc_of_freed_block" => {
                let p = P.alloc(l(64));
                P.dealloc(p, l(64));
                P.realloc(p, l(64), 1000);
            }
            "corrupted_free_list" => {
                let a = P.alloc(l(64));
                let b = P.alloc(l(64));
                P.dealloc(a, l(64));
                P.dealloc(b, l(64));
                // b is on top of the local free list and links to a: overwrite its link as a heap
                // overflow would. Handing b out again decodes the link.
                b.cast::<usize>().write(0x4141_4141_4141_4141_u64 as usize);
                alloc_until(b, l(64));
                P.alloc(l(64));
            }
            "corrupted_remote_message" => {
                // Three 64-byte blocks freed by another thread travel to their chunk as one
                // message, written into the first (the count at bytes 16..18, the indices of the
                // other two after it); its thread's exit pushes it. Pointing the message's first
                // index at a live block of the chunk, as an overflow from the block before would,
                // must not hand that block out a second time: the owner checks every index when
                // it expands the message, and the live block carries no free tag.
                let mut v: Vec<usize> = (0..4).map(|_| P.alloc(l(64)) as usize).collect();
                let base = |a: usize| a & !((256 << 10) - 1);
                while base(v[3]) != base(v[0]) {
                    v[3] = P.alloc(l(64)) as usize;
                }
                let (a, b, c) = (v[0], v[1], v[2]);
                std::thread::spawn(move || {
                    for p in [a, b, c] {
                        P.dealloc(p as *mut u8, l(64));
                    }
                })
                .join()
                .unwrap();
                let live = ((v[3] - base(a)) >> 3) as u16;
                (a as *mut u8).add(18).cast::<u16>().write(live);
                alloc_until(a as *mut u8, l(64));
            }
            "link_to_another_chunk" => {
                // Two free slots in each of two chunks of the 64-byte class: a2 links to a1, b2
                // to b1, and b's chunk is the current one. Copying a2's (encoded) link into b2
                // makes b2 link to a1: a free slot of ours, of the right class, carrying its free
                // mark, but in another chunk, which no list of b2's chunk may hold. Handed out,
                // it would be on two lists at once.
                let chunk_of = |p: *mut u8| p as usize >> 18;
                let pair = || loop {
                    let (x, y) = (P.alloc(l(64)), P.alloc(l(64)));
                    if chunk_of(x) == chunk_of(y) {
                        break (x, y);
                    }
                };
                let (a1, a2) = pair();
                let (mut b1, mut b2) = pair();
                while chunk_of(b1) == chunk_of(a1) {
                    (b1, b2) = pair();
                }
                P.dealloc(a1, l(64));
                P.dealloc(a2, l(64));
                P.dealloc(b1, l(64));
                P.dealloc(b2, l(64));
                b2.cast::<usize>().write(a2.cast::<usize>().read());
                alloc_until(b2, l(64));
                P.alloc(l(64));
            }
            "small_block_freed_to_another_heap" | "large_block_freed_to_another_heap" => {
                use allocator_api2::alloc::Allocator;
                let (a, b) = (poolalloc::Heap::new(), poolalloc::Heap::new());
                let lay = l(if case.starts_with("small") {
                    64
                } else {
                    100_000
                });
                let _ = b.allocate(lay); // b has chunks (or a list) of its own
                let p = a.allocate(lay).unwrap();
                b.deallocate(p.cast(), lay);
            }
            "global_block_freed_to_a_heap" => {
                use allocator_api2::alloc::Allocator;
                let h = poolalloc::Heap::new();
                let _ = h.allocate(l(64));
                let p = P.alloc(l(64));
                h.deallocate(std::ptr::NonNull::new(p).unwrap(), l(64));
            }
            "region_double_free_small" => {
                let keep = R.alloc(l(16)); // the slab stays
                let p = R.alloc(l(16));
                R.dealloc(p, l(16));
                R.dealloc(p, l(16));
                R.dealloc(keep, l(16));
            }
            "region_double_free_large" => {
                let p = R.alloc(l(3000));
                R.dealloc(p, l(3000));
                R.dealloc(p, l(3000));
            }
            "region_interior_free_small" => {
                let p = R.alloc(l(16));
                R.dealloc(p.add(8), l(16));
            }
            "region_size_mismatch_small" => {
                // 16 B and 64 B slots share the slab size: the header names the other class.
                let p = R.alloc(l(16));
                R.dealloc(p, l(64));
            }
            "region_size_mismatch_large" => {
                let p = R.alloc(l(300));
                R.dealloc(p, l(3000));
            }
            other => panic!("unknown case {other}"),
        }
    }
}

/// Allocates blocks of layout `l` (and leaks them) until `p` is handed out again: a freed slot
/// returns once its chunk's free list runs dry and the local frees are taken. Panics (failing the
/// death test) if it never comes back.
unsafe fn alloc_until(p: *mut u8, l: Layout) {
    for _ in 0..100_000 {
        // SAFETY: l has a non-zero size.
        if unsafe { P.alloc(l) } == p {
            return;
        }
    }
    panic!("{p:p} was never handed out again");
}

/// In a child: run the case named by the environment (a case that returns is reported by the
/// parent). In the parent: does nothing.
#[test]
fn child_entry() {
    child::enter(run_case);
}

#[test]
fn every_misuse_aborts_with_a_message_naming_it() {
    // Writes after free past the tag word are caught by the poison of `hardened-full` only.
    let cases = CASES.iter().filter(|&&(case, _)| {
        let full_only = matches!(
            case,
            "write_after_free" | "write_after_free_deep" | "write_after_free_tail"
        );
        !full_only || cfg!(feature = "hardened-full")
    });
    child::expect_each(
        "child_entry",
        cases.map(|&(case, expect)| (case, Ending::Aborts, expect)),
    );
}

/// Correct use under `hardened` stays quiet: a mixed workload with realloc and cross-thread frees.
#[test]
fn correct_use_passes_every_check() {
    let handles: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                for i in 0..20_000usize {
                    let size = 1 + (i * 7919 + t) % 3000;
                    // SAFETY: size > 0; blocks are freed once with their layout.
                    unsafe {
                        let p = P.alloc(l(size));
                        p.write_bytes(0xee, size);
                        let p = P.realloc(p, l(size), size * 2);
                        v.push((p as usize, size * 2));
                        if v.len() > 500 {
                            let (q, s) = v.swap_remove(i % v.len());
                            P.dealloc(q as *mut u8, l(s));
                        }
                    }
                }
                v
            })
        })
        .collect();
    let blocks: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    for (p, s) in blocks {
        // SAFETY: allocated above, freed once here (on another thread than its allocator's).
        unsafe { P.dealloc(p as *mut u8, l(s)) };
    }
}

/// A block that realloc shrank in place (into a smaller class's size, still in its slot) is freed
/// and reallocated with its new layout: the size-mismatch check accepts it, and the slot is
/// poisoned and checked whole when it is freed and handed out again.
#[test]
fn blocks_shrunk_in_place_pass_the_checks() {
    for (from, to, back) in [
        (1000usize, 600usize, 1024usize),
        (128, 64, 100),
        (32768, 16384, 30000),
        (48, 24, 40),
    ] {
        for _ in 0..3 {
            // SAFETY: sizes > 0; each block is freed once, with the layout of its last realloc.
            unsafe {
                let p = P.alloc(l(from));
                p.write_bytes(0x5a, from);
                let q = P.realloc(p, l(from), to);
                assert_eq!(p, q, "{from} -> {to} stays in its slot");
                P.dealloc(q, l(to));
                let p = P.alloc(l(from));
                let q = P.realloc(p, l(from), to);
                let r = P.realloc(q, l(to), back);
                assert_eq!(q, r, "{to} -> {back} grows back within the slot");
                P.dealloc(r, l(back));
            }
        }
    }
}

/// An 8-byte block's state is read from its only word (free while it decodes to a free-list link):
/// blocks freed without being written, or holding the values programs store most, must not be taken
/// for freed ones.
#[test]
fn eight_byte_blocks_with_common_contents_are_live() {
    let values = [
        None,
        Some(0u64),
        Some(1),
        Some(u64::MAX),
        Some(0x1000),
        Some(8),
    ];
    for round in 0..200 {
        let blocks: Vec<*mut u8> = (0..64)
            // SAFETY: a valid small layout.
            .map(|_| unsafe { P.alloc(Layout::new::<u64>()) })
            .collect();
        for (i, &p) in blocks.iter().enumerate() {
            assert!(!p.is_null());
            let v = values[(i + round) % values.len()];
            // SAFETY: p is a live 8-byte block.
            unsafe {
                if let Some(v) = v {
                    p.cast::<u64>().write(v);
                }
                // Its neighbour's address, as a linked structure would store it.
                if i % 7 == 6 {
                    p.cast::<*mut u8>().write(blocks[i - 1]);
                }
            }
        }
        for (i, &p) in blocks.iter().enumerate() {
            // SAFETY: each block is live and freed once; realloc in place keeps it in its class.
            unsafe {
                let p = if i % 3 == 0 {
                    P.realloc(p, Layout::new::<u64>(), 7)
                } else {
                    p
                };
                P.dealloc(
                    p,
                    Layout::from_size_align(if i % 3 == 0 { 7 } else { 8 }, 8).unwrap(),
                );
            }
        }
    }
}
