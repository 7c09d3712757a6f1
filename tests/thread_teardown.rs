//! Allocation during a thread's teardown: other thread-locals' destructors allocate, free blocks of
//! their own thread and of others, register further thread-locals while the thread exits, and
//! hand blocks out of the dying thread; on Unix a pthread key created after poolalloc's own (whose
//! destructor runs after poolalloc has abandoned the thread's heap) does the same. Nothing may
//! crash, lose a block or leak one: afterwards every block is accounted for and the pools hold no
//! more than a thread's worth. What poolalloc touches during a thread's exit on each platform, and
//! why it is safe there: docs/platforms.md, "Thread teardown".
//!
//! Runs on Linux, on Windows under wine and on wasm32-wasip1-threads; compiled for macOS (CI's
//! tier-2 clippy).

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::mpsc::{self, Sender};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// Blocks that outlive their thread: sent here by destructors, checked and freed by the test.
static SURVIVORS: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

/// A block filled with `tag`, of a size that depends on it (small classes and a large block).
fn block(tag: u8) -> Box<[u8]> {
    let n = match tag % 4 {
        0 => 24,
        1 => 200,
        2 => 3000,
        _ => 70_000,
    };
    vec![tag; n].into_boxed_slice()
}

/// A thread-local whose destructor allocates, frees what the thread allocated (and a block of
/// another thread's), and hands a block out of the dying thread.
struct Allocates {
    tag: u8,
    mine: Vec<Box<[u8]>>,
    foreign: Option<Box<[u8]>>,
    out: Option<Sender<Box<[u8]>>>,
}

impl Drop for Allocates {
    fn drop(&mut self) {
        // New blocks, written and freed during teardown.
        let mut fresh: Vec<Box<[u8]>> = (0..64).map(|i| block(self.tag.wrapping_add(i))).collect();
        fresh.push(
            format!("thread {} exits", self.tag)
                .into_bytes()
                .into_boxed_slice(),
        );
        for (i, b) in self.mine.drain(..).enumerate() {
            assert!(
                b.iter().all(|&x| x == b[0]),
                "block {i} of thread {}",
                self.tag
            );
        }
        drop(black_box(fresh));
        // A block of another thread's, freed here.
        drop(self.foreign.take());
        // A block that outlives the thread.
        if let Some(out) = self.out.take() {
            let _ = out.send(block(self.tag));
        }
        // A thread-local touched for the first time during teardown: its destructor runs later.
        LATE.with(|l| l.borrow_mut().push(block(self.tag ^ 0x55)));
    }
}

/// Registered during teardown by `Allocates`' destructor; its own destructor allocates again.
struct Late(Vec<Box<[u8]>>);

impl Late {
    fn push(&mut self, b: Box<[u8]>) {
        self.0.push(b);
    }
}

impl Drop for Late {
    fn drop(&mut self) {
        let again = block(7);
        SURVIVORS.lock().unwrap().push(again);
        self.0.clear();
    }
}

thread_local! {
    static FIRST: RefCell<Option<Allocates>> = const { RefCell::new(None) };
    static LATE: RefCell<Late> = const { RefCell::new(Late(Vec::new())) };
}

/// A pthread key created after poolalloc's own (the thread has allocated already): its destructor
/// runs after poolalloc abandoned the thread's heap, and allocates, frees and keeps a block.
#[cfg(unix)]
mod after_ours {
    use super::{SURVIVORS, block};
    use std::sync::OnceLock;

    unsafe extern "C" fn destroy(p: *mut libc::c_void) {
        // SAFETY: the value set below is a Box<Box<[u8]>> leaked into the key.
        let b = unsafe { Box::from_raw(p.cast::<Box<[u8]>>()) };
        assert!(b.iter().all(|&x| x == b[0]));
        let fresh: Vec<Box<[u8]>> = (0..32).map(block).collect();
        drop(fresh);
        SURVIVORS.lock().unwrap().push(block(9));
        drop(b);
    }

    pub fn arm(tag: u8) {
        static KEY: OnceLock<libc::pthread_key_t> = OnceLock::new();
        let key = *KEY.get_or_init(|| {
            let mut k: libc::pthread_key_t = 0;
            // SAFETY: k is a valid out-pointer; the destructor lives forever.
            assert_eq!(
                unsafe { libc::pthread_key_create(&mut k, Some(destroy)) },
                0
            );
            k
        });
        let v = Box::into_raw(Box::new(block(tag)));
        // SAFETY: key is a live key; the value is freed by its destructor.
        assert_eq!(unsafe { libc::pthread_setspecific(key, v.cast()) }, 0);
    }
}

fn wave(threads: usize, round: usize) {
    let (tx, rx) = mpsc::channel::<Box<[u8]>>();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let tag = (round * threads + t) as u8;
            let foreign = block(tag.wrapping_add(1));
            let out = tx.clone();
            std::thread::spawn(move || {
                let mine: Vec<Box<[u8]>> = (0..100).map(|i| block(tag.wrapping_add(i))).collect();
                #[cfg(unix)]
                after_ours::arm(tag);
                FIRST.with(|f| {
                    *f.borrow_mut() = Some(Allocates {
                        tag,
                        mine,
                        foreign: Some(foreign),
                        out: Some(out),
                    })
                });
            })
        })
        .collect();
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
    let got: Vec<Box<[u8]>> = rx.iter().collect();
    assert_eq!(got.len(), threads, "a block from each dying thread");
    for b in got {
        assert!(b.iter().all(|&x| x == b[0]));
    }
}

#[test]
fn thread_locals_allocate_and_free_while_threads_exit() {
    // Warm up once (the first wave maps what the later ones reuse).
    wave(8, 0);
    SURVIVORS.lock().unwrap().clear();
    poolalloc::trim();
    let before = poolalloc::stats();
    for round in 1..=10 {
        wave(8, round);
    }
    let survivors = std::mem::take(&mut *SURVIVORS.lock().unwrap());
    // Late's destructor on every thread, and the pthread key's on Unix.
    let per_thread = if cfg!(unix) { 2 } else { 1 };
    assert_eq!(
        survivors.len(),
        10 * 8 * per_thread,
        "blocks kept by teardown"
    );
    for b in &survivors {
        assert!(b.iter().all(|&x| x == b[0]));
    }
    drop(survivors);
    poolalloc::trim();
    let after = poolalloc::stats();
    // Every block is freed: the live figures are back where they were, within what this thread's
    // own bookkeeping (the harness) may hold.
    assert!(
        after.live_bytes <= before.live_bytes + (64 << 10),
        "live bytes {} -> {}\n{after}",
        before.live_bytes,
        after.live_bytes
    );
    assert_eq!(
        after.large_blocks, before.large_blocks,
        "large blocks\n{after}"
    );
    let abandoned: usize = after.classes().iter().map(|c| c.abandoned_chunks).sum();
    assert_eq!(abandoned, 0, "abandoned chunks after trim\n{after}");
}
