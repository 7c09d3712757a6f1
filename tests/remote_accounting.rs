//! What a block that changes threads costs, counted where a CPU's clock hides it (issue 45: on
//! AMD moving a cache line between cores is cheap, on Intel's mesh it is the whole gap to
//! jemalloc). A producer allocates batches of 64 boxes of 8–256 B and sends them to a consumer,
//! which checks and frees them: every block is a remote free. Per block freed, the allocator's own
//! `testing` counters give (a) atomic read-modify-writes on a chunk header outside a batch's push,
//! (b) remote-free list links the owner walks, (c) writes into the block by the freeing thread.
//!
//! (a) is held at 0 (step 1: the requested bytes go with the batch's push). (b) and (c) are held
//! at one per message (step 3: a run of frees into one chunk travels as a message, the indices of
//! its slots written into its first slot; the owner reads each message once and follows no link
//! of a slot; step 2 had taken (b) near 0 but left (c) at one a block). The classes too small
//! for a message (8 bytes; 16 with `hardened`) still link their slots: one write and (on 32-bit
//! targets) one walk a block, a few percent of this mix. With `hardened` the free mark
//! (`on_free`) is written into every freed block as well: it is `hardened`'s own cost, not
//! counted here. The same counts, after, for blocks whose thread exited (their chunks have no
//! owner): batched too. One test function: the counters are the process's.
#![cfg(feature = "testing")]

use poolalloc::testing::contention;
use std::sync::mpsc;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

const BATCHES: usize = 2000;
const PER_BATCH: usize = 64;

#[test]
fn a_block_freed_by_another_thread_costs_no_header_atomic() {
    let (tx, rx) = mpsc::sync_channel::<Vec<Box<[u8]>>>(4);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let consumer = std::thread::spawn(move || {
        let mut n = 0usize;
        for batch in rx {
            for b in batch {
                assert!(
                    b.iter().all(|&x| x == b.len() as u8),
                    "a block was corrupted"
                );
                n += 1;
            }
        }
        // Until the producer hears this it stays alive: its chunks keep their owner, so no free
        // here is pushed alone to an abandoned chunk.
        done_tx.send(()).unwrap();
        n
    });
    // Both threads have heaps before the count starts.
    drop(std::hint::black_box(vec![0u8; 8]));
    let before = contention();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..BATCHES {
        let batch: Vec<Box<[u8]>> = (0..PER_BATCH)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = 8 + (x % 249) as usize;
                vec![n as u8; n].into_boxed_slice()
            })
            .collect();
        tx.send(batch).unwrap();
    }
    drop(tx);
    done_rx.recv().unwrap();
    let c = contention().since(&before);
    let freed = consumer.join().unwrap();
    assert_eq!(freed, BATCHES * PER_BATCH);
    let per = |n: u64| n as f64 / c.remote_frees.max(1) as f64;
    println!(
        "remote frees {}: per block (a) header atomics {:.3}, (b) links walked {:.3}, (c) freer's writes {:.3}; pushes per block {:.3}",
        c.remote_frees,
        per(c.remote_header_rmws),
        per(c.remote_links_walked),
        per(c.remote_block_writes),
        per(c.remote_pushes)
    );
    // Every box the producer made was freed by the consumer (the batches' vectors too).
    assert!(
        c.remote_frees >= (BATCHES * PER_BATCH) as u64,
        "{c:?}: fewer remote frees than blocks sent"
    );
    assert_eq!(
        c.remote_header_rmws, 0,
        "{c:?}: an atomic on a chunk header per block"
    );
    // One link a message (its next), none a slot; the linked 8-byte class walks on 32-bit
    // targets, where the list word does not count.
    assert!(
        per(c.remote_links_walked) <= 0.1,
        "{c:?}: links walked per block"
    );
    if cfg!(target_pointer_width = "64") {
        assert!(
            c.remote_links_walked <= c.remote_pushes,
            "{c:?}: more than a link a message"
        );
    }
    // One write a message (its first slot), plus one a block of the linked classes.
    assert!(
        per(c.remote_block_writes) <= 0.1,
        "{c:?}: freer's writes per block"
    );
    // Batched: a push carries many blocks (a message holds up to 64 slots, 16 KiB).
    assert!(per(c.remote_pushes) < 0.1, "{c:?}: pushes per block");

    // Blocks left by threads that exited, freed here: their chunks have no owner. They are
    // batched like any other (issue 46; each was pushed alone before, a header atomic and a push
    // a block).
    let left: Vec<Vec<Box<[u8]>>> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                (0..4000)
                    .map(|i| {
                        let n = 8 + (i * 7 + t) % 249;
                        vec![n as u8; n].into_boxed_slice()
                    })
                    .collect()
            })
            .join()
            .unwrap()
        })
        .collect();
    let before = contention();
    let mut n = 0;
    for v in left {
        for b in v {
            assert!(
                b.iter().all(|&x| x == b.len() as u8),
                "a block was corrupted"
            );
            n += 1;
        }
    }
    // This thread's batches go out (as at its next slow path), inside the count.
    poolalloc::trim();
    let c = contention().since(&before);
    let per = |k: u64| k as f64 / n as f64;
    println!(
        "blocks of exited threads {n}: per block header atomics {:.3}, pushes {:.3}",
        per(c.remote_header_rmws),
        per(c.remote_pushes)
    );
    assert!(
        c.remote_frees >= n as u64,
        "{c:?}: fewer remote frees than blocks"
    );
    assert!(
        per(c.remote_header_rmws) <= 0.1 && per(c.remote_pushes) <= 0.1,
        "{c:?}: frees into chunks with no owner are not batched"
    );
}
